// The seam between the HTTP side of the embedded viewer (this module) and the
// server-side WebRTC that answers WHEP offers (the publisher). The server only
// speaks HTTP; everything about ICE, DTLS and media lives behind this protocol.

/// Why a WHEP offer could not be answered.
public enum WHEPHostError: Error, Sendable {
    /// The offer is not SDP we can answer (unparsable, no media we send, no ICE
    /// credentials, no fingerprint...). Answered with 400 and the text.
    case badOffer(String)
    /// The offer is fine but no viewer can be added now (no stream yet, viewer
    /// limit reached, shutting down). Answered with 503 and the text.
    case unavailable(String)
}

/// What the viewer server asks of the WebRTC side.
public protocol WHEPSessionHost: Sendable {
    /// A new viewer from a WHEP offer: returns its id and the SDP answer.
    /// The id becomes the last path component of the resource, `/whep/<id>`,
    /// so it should be URL-safe (letters, digits, `-`, `_`).
    func createViewer(offer: String) async throws(WHEPHostError) -> (id: String, answer: String)
    /// Ends a viewer; false when no such viewer.
    func deleteViewer(id: String) async -> Bool
    /// JSON object text for GET /stats.
    func statsJSON() async -> String
    /// Numbers for GET /metrics.
    func metrics() async -> ViewerMetrics
}

/// The numbers behind GET /metrics (Prometheus text exposition format).
public struct ViewerMetrics: Sendable, Equatable {
    /// Video frames encoded since start (counter).
    public var framesEncoded: UInt64
    /// Video frames dropped before or by the encoder since start (counter).
    public var framesDropped: UInt64
    /// Of those, frames the encoder was too busy to take (counter).
    public var framesDroppedEncoderBusy: UInt64
    /// Viewers connected now (gauge).
    public var viewers: Int
    /// Video bitrate being sent, bits per second, one viewer's worth (gauge).
    public var videoBitrate: Double
    /// Round-trip time in seconds from RTCP, nil while none is known (gauge;
    /// the sample is left out when nil).
    public var roundTripTime: Double?

    public init(
        framesEncoded: UInt64 = 0,
        framesDropped: UInt64 = 0,
        framesDroppedEncoderBusy: UInt64 = 0,
        viewers: Int = 0,
        videoBitrate: Double = 0,
        roundTripTime: Double? = nil
    ) {
        self.framesEncoded = framesEncoded
        self.framesDropped = framesDropped
        self.framesDroppedEncoderBusy = framesDroppedEncoderBusy
        self.viewers = viewers
        self.videoBitrate = videoBitrate
        self.roundTripTime = roundTripTime
    }
}
