/// GET /metrics in the Prometheus text exposition format, version 0.0.4:
/// for each metric a `# HELP` and a `# TYPE` line, then `name value` samples.
enum PrometheusText {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// One camera's metrics as today's unlabelled samples; several cameras'
    /// as one sample each, labelled `camera="N"` (1-based, as in /cameras/N/).
    static func render(_ cameras: [ViewerMetrics]) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: (ViewerMetrics) -> String?) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (index, metrics) in cameras.enumerated() {
                guard let text = value(metrics) else { continue }
                let label = cameras.count == 1 ? "" : "{camera=\"\(index + 1)\"}"
                out += "\(name)\(label) \(text)\n"
            }
        }
        metric("camagent_frames_encoded_total", "counter", "Video frames encoded since the agent started.") { String($0.framesEncoded) }
        metric("camagent_frames_dropped_total", "counter", "Video frames dropped before or by the encoder since the agent started.") { String($0.framesDropped) }
        metric("camagent_frames_dropped_encoder_busy_total", "counter", "Video frames replaced by a newer one before the encoder took them (included in camagent_frames_dropped_total).") { String($0.framesDroppedEncoderBusy) }
        metric("camagent_viewers", "gauge", "Viewers connected now.") { String($0.viewers) }
        metric("camagent_video_bitrate_bits_per_second", "gauge", "Video bitrate being sent to each viewer.") { number($0.videoBitrate) }
        metric("camagent_rtt_seconds", "gauge", "Round-trip time to the viewers from RTCP (absent while unknown).") { $0.roundTripTime.map(number) }
        return out
    }

    /// A float as Prometheus reads it (Go's ParseFloat plus `NaN`, `+Inf`, `-Inf`).
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
