import RTP

/// What the receiver reported about one of our streams (RTCP receiver
/// report blocks), for the stats and the bitrate controller.
public struct RemoteReception: Sendable, Hashable, Codable {
    /// Packets lost in total, as the receiver counts them.
    public var packetsLost: Int64 = 0
    /// Fraction lost since its previous report, 0...1.
    public var fractionLost: Double = 0
    /// Interarrival jitter, seconds.
    public var jitter: Double = 0
    /// Round-trip time from the last report that carried one, seconds.
    public var roundTripTime: Double?
    public var reportsReceived: UInt64 = 0
}

/// Feedback counters for one stream.
public struct FeedbackCounters: Sendable, Hashable, Codable {
    public var nackReceived: UInt64 = 0
    public var nackedPackets: UInt64 = 0
    public var pliReceived: UInt64 = 0
    public var firReceived: UInt64 = 0
}

/// The target bitrate of the video encoder, driven by what the receiver says:
/// REMB caps it, loss in receiver reports lowers it, and a clean path lets it
/// climb back towards the configured bitrate (the loss-based half of
/// Google Congestion Control, which is what REMB-only receivers expect).
struct BitrateController {
    let maximum: Int
    let minimum: Int
    private(set) var target: Int
    private var remb: Int?

    init(maximum: Int, minimum: Int = 100_000) {
        self.maximum = maximum
        self.minimum = min(minimum, maximum)
        target = maximum
    }

    mutating func estimatedMaximum(_ bitsPerSecond: Int) {
        remb = bitsPerSecond
        target = clamp(min(target, bitsPerSecond))
    }

    /// A receiver report for the video stream: `fractionLost` in 0...1.
    mutating func reportedLoss(_ fractionLost: Double) {
        if fractionLost > 0.10 {
            target = clamp(Int(Double(target) * (1 - 0.5 * fractionLost)))
        } else if fractionLost < 0.02 {
            target = clamp(Int(Double(target) * 1.08))
        }
    }

    private func clamp(_ value: Int) -> Int {
        let ceiling = min(maximum, remb ?? maximum)
        return Swift.max(minimum, Swift.min(value, Swift.max(ceiling, minimum)))
    }
}

/// NTP time (RFC 5905 format) of the wall clock, as sender reports carry it.
enum NTPTime {
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let seconds = UInt64(ts.tv_sec) + 2_208_988_800   // 1900 → 1970
        let fraction = (UInt64(ts.tv_nsec) << 32) / 1_000_000_000
        return seconds << 32 | fraction
    }

    /// The middle 32 bits, as LSR and DLSR use.
    static func compact(_ ntp: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: ntp >> 16) }
}

#if canImport(Glibc)
import Glibc
#endif
