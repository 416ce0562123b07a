/// Which video frames one receiver gets when it prefers a lower frame rate
/// (OpenTok's preferredFrameRate). With two temporal layers a stream comes
/// at its full rate, or at half of it with the upper layer left out; the
/// receiver gets the highest of the two that is not above what it prefers,
/// or the base layer when both are. A stream with no layers (H.264, or a
/// publisher that makes none) goes whole, whatever is preferred.
struct FrameRateChoice: Sendable {
    /// Frames per second the receiver prefers; nil: every frame.
    var preferred: Double?
    /// The gap between frames, 90 kHz ticks, smoothed over every frame
    /// offered (sent or not): the stream's full rate.
    private var interval: Double?
    private var lastTimestamp: UInt32?

    /// Slack for a measured rate: 29.5 frames a second is still 30.
    static let tolerance = 0.9

    /// The full rate measured so far, frames per second.
    var fullRate: Double? { interval.map { 90_000 / $0 } }

    /// Whether a frame of `layer` goes to this receiver; every frame offered
    /// is measured.
    mutating func admits(layer: UInt8, rtpTimestamp: UInt32) -> Bool {
        if let last = lastTimestamp {
            let gap = Double(rtpTimestamp &- last)
            // A pause (camera lost, encoder idle) is not a frame rate.
            if gap > 0, gap < 90_000 { interval = interval.map { $0 * 0.9 + gap * 0.1 } ?? gap }
        }
        lastTimestamp = rtpTimestamp
        guard layer > 0, let preferred, let fullRate else { return true }
        return preferred >= fullRate * Self.tolerance
    }
}
