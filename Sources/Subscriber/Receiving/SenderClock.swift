#if canImport(Glibc)
import Glibc
#endif

/// A received stream's timing against its sender's clock, through the
/// sender's reports (RTCP SR: an RTP timestamp at a wall-clock time).
enum SenderClock {
    /// Seconds from when the sender stamped `timestamp` (on its wall clock,
    /// through its last sender report) to now: the delay to render, when the
    /// clocks agree (one host, or NTP-synced hosts); nil before a report.
    static func delay(since timestamp: UInt32, clock: (ntp: Double, rtp: UInt32)?, rate: Double) -> Double? {
        guard let clock else { return nil }
        let sent = clock.ntp + Double(Int32(bitPattern: timestamp &- clock.rtp)) / rate
        return wallClockNow() - sent
    }

    /// Seconds since 1970 on this host's wall clock (what sender reports and W3C stats count in).
    static func wallClockNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// A moving average: one late packet does not swing the figure.
    static func smoothed(_ previous: Double?, _ sample: Double) -> Double {
        guard let previous else { return sample }
        return previous + (sample - previous) / 16
    }
}
