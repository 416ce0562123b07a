import Synchronization

/// Counters a capturer keeps while streaming.
public struct CaptureStatistics: Hashable, Sendable {
    /// Frames handed to the consumer.
    public var framesDelivered: UInt64 = 0
    /// Frames the driver dropped, seen as gaps in its sequence numbers.
    public var framesDroppedByDriver: UInt64 = 0
    /// Buffers flagged V4L2_BUF_FLAG_ERROR (dropped).
    public var framesCorrupt: UInt64 = 0
    /// Buffers with fewer bytes than the format needs (dropped).
    public var framesTooShort: UInt64 = 0
    /// MJPEG buffers with broken markers or that failed to decode (dropped).
    public var framesBadJPEG: UInt64 = 0
    /// Older buffers skipped because a newer one was already waiting.
    public var framesSkippedForNewer: UInt64 = 0
    /// Frames dropped because the consumer still held every pooled frame.
    public var framesDroppedConsumerBusy: UInt64 = 0
    /// Kernel timestamps in the future or going backwards (replaced by the arrival time).
    public var timestampsRejected: UInt64 = 0
    /// Times the device was lost and reopened.
    public var reconnects: UInt64 = 0
    /// Delivered frames per second over the whole run.
    public var measuredFramesPerSecond: Double = 0
    /// Delivered frames per second over the last window (about 1 s).
    public var recentFramesPerSecond: Double = 0
    /// Kernel timestamp to consumer callback, in nanoseconds.
    public var latencyP50Nanoseconds: Int64 = 0
    public var latencyP99Nanoseconds: Int64 = 0
    public var latencyMaxNanoseconds: Int64 = 0

    public init() {}

    /// Every frame that did not reach the consumer, whatever the reason.
    public var framesDropped: UInt64 {
        framesDroppedByDriver + framesCorrupt + framesTooShort + framesBadJPEG + framesDroppedConsumerBusy
    }
}

/// Keeps the last `capacity` latency samples in preallocated storage, so
/// recording one costs no allocation; percentiles are computed on request.
public struct LatencySamples: Sendable {
    private var samples: [Int64]
    /// Where percentiles are selected, allocated once: statistics are read
    /// while capture runs, and reading them must not allocate either.
    private var scratch: [Int64]
    private var nextIndex = 0
    public private(set) var recorded = 0

    public init(capacity: Int = 4096) {
        samples = [Int64](repeating: 0, count: capacity)
        scratch = samples
    }

    public mutating func record(_ nanoseconds: Int64) {
        samples[nextIndex] = nanoseconds
        nextIndex = (nextIndex + 1) % samples.count
        recorded += 1
    }

    /// The p-th percentile (0...100) of the samples kept, 0 when there are none.
    public mutating func percentile(_ p: Double) -> Int64 {
        let n = min(recorded, samples.count)
        guard n > 0 else { return 0 }
        let rank = min(max(Int((p / 100 * Double(n - 1)).rounded()), 0), n - 1)
        return samples.withUnsafeBufferPointer { kept in
            scratch.withUnsafeMutableBufferPointer { work in
                _ = work.update(fromContentsOf: kept[0..<n])
                return Self.select(rank, in: UnsafeMutableBufferPointer(rebasing: work[0..<n]))
            }
        }
    }

    public var maximum: Int64 { samples[0..<min(recorded, samples.count)].max() ?? 0 }

    /// Quickselect (Hoare partition, middle pivot): the value that would sit
    /// at `rank` if `values` were sorted. Reorders `values`; never allocates,
    /// unlike `sorted()`, whose merge sort takes scratch memory.
    private static func select(_ rank: Int, in values: UnsafeMutableBufferPointer<Int64>) -> Int64 {
        var low = 0, high = values.count - 1
        while low < high {
            let pivot = values[low + (high - low) / 2]
            var i = low, j = high
            while i <= j {
                while values[i] < pivot { i += 1 }
                while values[j] > pivot { j -= 1 }
                if i <= j {
                    values.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if rank <= j { high = j } else if rank >= i { low = i } else { break }
        }
        return values[rank]
    }
}

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

/// Statistics shared between the capture thread (writer) and everyone else (readers).
public final class CaptureStatisticsRecorder: Sendable {
    private struct State: Sendable {
        var stats = CaptureStatistics()
        var latency = LatencySamples()
        var rate = RateMeter()
    }
    private let state = Mutex(State())

    public init() {}

    /// Updates counters under the lock.
    public func update(_ body: (inout CaptureStatistics) -> Void) {
        state.withLock { body(&$0.stats) }
    }

    /// Records a delivered frame: its latency and the delivery time.
    public func recordDelivery(captured: MonotonicTimestamp, delivered: MonotonicTimestamp) {
        state.withLock { s in
            s.stats.framesDelivered += 1
            s.latency.record(max(0, (delivered - captured).nanosecondsClamped))
            s.rate.tick(at: delivered)
        }
    }

    /// A snapshot with rates and percentiles filled in.
    public var snapshot: CaptureStatistics {
        state.withLock { s in
            var out = s.stats
            out.measuredFramesPerSecond = s.rate.rate
            out.recentFramesPerSecond = s.rate.recentRate
            out.latencyP50Nanoseconds = s.latency.percentile(50)
            out.latencyP99Nanoseconds = s.latency.percentile(99)
            out.latencyMaxNanoseconds = s.latency.maximum
            return out
        }
    }

    public func reset() {
        state.withLock { $0 = State() }
    }
}
