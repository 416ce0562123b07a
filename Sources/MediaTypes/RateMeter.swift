/// Measures delivered frame rate over the whole run and over a sliding ~1 s window.
public struct RateMeter: Sendable {
    public private(set) var first: MonotonicTimestamp?
    public private(set) var last: MonotonicTimestamp?
    public private(set) var count: UInt64 = 0
    private var windowStart: MonotonicTimestamp?
    private var windowCount: UInt64 = 0
    public private(set) var recentRate: Double = 0

    public init() {}

    public mutating func tick(at t: MonotonicTimestamp) {
        if first == nil { first = t; windowStart = t }
        last = t
        count += 1
        windowCount += 1
        if let ws = windowStart, (t - ws) >= .seconds(1) {
            recentRate = Double(windowCount - 1) / (t - ws).secondsDouble
            windowStart = t
            windowCount = 1
        }
    }

    /// Frames per second between the first and the last tick.
    public var rate: Double {
        guard let f = first, let l = last, count > 1, l > f else { return 0 }
        return Double(count - 1) / (l - f).secondsDouble
    }
}
