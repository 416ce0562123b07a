
/// Statistics shared between the capture thread (writer) and everyone else (readers).
public final class CaptureStatisticsRecorder: Sendable {
    private struct State: Sendable {
        var stats = CaptureStatistics()
        var latency = LatencySamples()
        var rate = RateMeter()
    }
    private let state = PThreadLocked(State())

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
