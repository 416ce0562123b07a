import MediaTypes

/// The one RTP clock formula: a moment on the monotonic clock as RTP time,
/// `base` plus the ticks since `origin` at `clockRate`. Audio and video of
/// every connection count from the same origin, which keeps them in sync at
/// the receiver.
enum RTPClock {
    static func timestamp(at time: MonotonicTimestamp, origin: MonotonicTimestamp, base: UInt32, clockRate: Int) -> UInt32 {
        let ticks = (time - origin).secondsDouble * Double(clockRate)
        return base &+ UInt32(truncatingIfNeeded: Int64(ticks.rounded()))
    }
}
