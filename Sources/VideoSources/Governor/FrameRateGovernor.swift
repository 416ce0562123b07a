import MediaTypes

/// Watches the delivered frame rate against the granted one.
///
/// UVC cameras halve their rate in low light (auto-exposure priority lets the
/// exposure grow past the frame interval), and drivers drop buffers under
/// load; no capture agent notices. The governor fires when the delivered rate
/// stays below `threshold` x granted for `window`; the capturer reports it,
/// and with adaptation on, acts (at most `maxActions` times, `settle` apart).
public struct FrameRateGovernor: Sendable {
    public struct Configuration: Hashable, Sendable {
        /// Fraction of the granted rate below which delivery counts as too slow.
        public var threshold: Double = 0.75
        /// How long it must stay too slow before the governor fires.
        public var window: Duration = .seconds(3)
        /// How long to wait after an action before judging again.
        public var settle: Duration = .seconds(3)
        public var maxActions = 3

        public init() {}
    }

    public enum Decision: Hashable, Sendable {
        case none
        /// Too slow for `seconds`: report it (once per episode).
        case report(delivered: Double, granted: Double, seconds: Double)
        /// Too slow and adaptation is on: report and act now.
        case reportAndAct(delivered: Double, granted: Double, seconds: Double)
    }

    public let configuration: Configuration
    public let adapt: Bool
    private var granted: Double
    private var sampleStart: MonotonicTimestamp?
    private var sampleCount: UInt64 = 0
    private var slowSince: MonotonicTimestamp?
    private var reportedThisEpisode = false
    private var lastActionAt: MonotonicTimestamp?
    public private(set) var actionsTaken = 0
    /// The delivered rate over the last completed one-second sample.
    public private(set) var lastSampleRate: Double?

    public init(granted: Double, adapt: Bool, configuration: Configuration = .init()) {
        self.granted = granted
        self.adapt = adapt
        self.configuration = configuration
    }

    /// After a renegotiation: a new granted rate, and measurement starts over.
    public mutating func restart(granted: Double, at now: MonotonicTimestamp) {
        self.granted = granted
        sampleStart = now
        sampleCount = 0
        slowSince = nil
        reportedThisEpisode = false
        lastActionAt = now
    }

    /// Feed every delivered frame (`delivered: true`) and every idle wake-up.
    public mutating func observe(at now: MonotonicTimestamp, delivered: Bool) -> Decision {
        guard granted > 0 else { return .none }
        guard let start = sampleStart else {
            sampleStart = now
            return .none
        }
        if delivered { sampleCount += 1 }
        let elapsed = now - start
        guard elapsed >= .seconds(1) else { return .none }

        let rate = Double(sampleCount) / elapsed.secondsDouble
        lastSampleRate = rate
        sampleStart = now
        sampleCount = 0
        if rate >= configuration.threshold * granted {
            slowSince = nil
            reportedThisEpisode = false
            return .none
        }
        let since = slowSince ?? start
        slowSince = since
        let slowFor = now - since
        guard slowFor >= configuration.window else { return .none }

        let seconds = slowFor.secondsDouble
        if adapt, actionsTaken < configuration.maxActions,
           lastActionAt.map({ now - $0 >= configuration.settle }) ?? true {
            actionsTaken += 1
            lastActionAt = now
            reportedThisEpisode = true
            slowSince = now
            return .reportAndAct(delivered: rate, granted: granted, seconds: seconds)
        }
        if !reportedThisEpisode {
            reportedThisEpisode = true
            return .report(delivered: rate, granted: granted, seconds: seconds)
        }
        return .none
    }
}
