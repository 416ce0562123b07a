#if canImport(Glibc)
import Glibc
#endif

/// A point on CLOCK_MONOTONIC, in nanoseconds: the clock V4L2 stamps buffers
/// with (when they carry V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC) and ALSA can stamp
/// periods with, so audio and video line up without conversion.
public struct MonotonicTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public init(seconds: Int, microseconds: Int) {
        nanoseconds = Int64(seconds) * 1_000_000_000 + Int64(microseconds) * 1_000
    }

    public static let zero = MonotonicTimestamp(nanoseconds: 0)

    /// Now on CLOCK_MONOTONIC.
    public static func now() -> MonotonicTimestamp {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return MonotonicTimestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }

    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func - (a: Self, b: Self) -> Duration { .nanoseconds(a.nanoseconds - b.nanoseconds) }

    public static func + (a: Self, d: Duration) -> Self {
        MonotonicTimestamp(nanoseconds: a.nanoseconds + d.nanosecondsClamped)
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }
    public var description: String { "\(seconds.formatted(decimals: 6)) s" }
}
