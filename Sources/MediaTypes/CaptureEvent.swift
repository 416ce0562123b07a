/// Something a capturer reports besides frames.
public enum CaptureEvent: Sendable, CustomStringConvertible {
    /// The device went away; with reconnection on, the capturer now waits for it.
    case deviceLost(CaptureError)
    /// The device is back and renegotiated; `gap` is how long no frame flowed.
    case reconnected(CaptureSettings, gap: Duration)
    /// The delivered rate stayed well below the granted one.
    case rateBelowGranted(delivered: Double, granted: Double, seconds: Double)
    /// The frame-rate governor changed something to get the rate back.
    case adapted(action: String)
    /// Capture stopped for good with this error.
    case failed(CaptureError)

    public var description: String {
        switch self {
        case .deviceLost(let e): return "device lost: \(e)"
        case .reconnected(let s, let gap):
            return "reconnected to \(s.device) after \(gap.secondsDouble.formatted(decimals: 2)) s: \(s.deviceFormat)"
        case .rateBelowGranted(let d, let g, let s):
            return "delivered \(d.formatted(decimals: 1)) fps for \(s.formatted(decimals: 0)) s, granted \(g.formatted(decimals: 1)) fps"
        case .adapted(let action): return "adapted: \(action)"
        case .failed(let e): return "capture failed: \(e)"
        }
    }
}
