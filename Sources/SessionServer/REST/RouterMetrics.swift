/// GET /metrics in the Prometheus text exposition format (0.0.4): the
/// registry's counts now, and the media engine's forwarding totals.
enum RouterMetrics {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func render(counts: RegistryCounts, forwarding: ForwardingCounters, captions: CaptionTotals = CaptionTotals()) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        metric("camagent_router_sessions", "gauge", "Sessions the router holds.", String(counts.sessions))
        metric("camagent_router_connections", "gauge", "Connections in all sessions (signalling and bare WHIP clients).", String(counts.connections))
        metric("camagent_router_streams", "gauge", "Streams published in all sessions.", String(counts.streams))
        metric("camagent_router_subscribers", "gauge", "Subscribers of the streams in all sessions (routed and relayed).", String(counts.subscribers))
        metric("camagent_router_forwarded_packets_total", "counter", "RTP and RTCP packets the media engine forwarded.", String(forwarding.packetsForwarded))
        metric("camagent_router_forwarded_bytes_total", "counter", "Bytes the media engine forwarded.", String(forwarding.bytesForwarded))
        metric("camagent_router_dropped_packets_total", "counter", "Packets the media engine dropped instead of forwarding.", String(forwarding.packetsDropped))
        metric("camagent_router_nacked_packets_total", "counter", "Publisher packets found missing and asked for again (NACK).", String(forwarding.packetsNacked))
        metric("camagent_router_recovered_packets_total", "counter", "Publisher packets asked for again that then came.", String(forwarding.packetsRecovered))
        metric("camagent_router_captioned_streams", "gauge", "Streams whose audio is being captioned.", String(captions.captionedStreams))
        metric("camagent_router_captions_partial_total", "counter", "Partial captions (isFinal false) recognised.", String(captions.partials))
        metric("camagent_router_captions_final_total", "counter", "Final captions recognised (one per utterance).", String(captions.finals))
        metric("camagent_router_captions_audio_seconds_total", "counter", "Seconds of captioned audio through voice detection.", String(captions.audioSeconds))
        metric("camagent_router_captions_engine_seconds_total", "counter", "Seconds the speech engine spent recognising.", String(captions.engineSeconds))
        metric("camagent_router_captions_dropped_packets_total", "counter", "Audio packets a captioner had no room for (recognition fell behind the stream).", String(captions.packetsDropped))
        metric("camagent_router_captions_early_finals_discarded_total", "counter", "Finals recognised early, at a pause, that speech coming back voided.", String(captions.earlyFinalsDiscarded))
        return out
    }
}
