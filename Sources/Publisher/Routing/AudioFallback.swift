/// OpenTok's audio fallback for one routed subscriber: under heavy loss the
/// router stops sending it video, so that the audio gets through; when the
/// loss clears, video comes back. It warns first. Decisions are taken on the
/// subscriber's receiver reports, each one counted once: on the video's loss
/// while video is sent, on the audio's while it is not.
struct AudioFallback: Sendable, Equatable {
    enum State: Sendable, Equatable { case normal, warned, videoOff }

    /// What the router does and says after a report.
    enum Action: Sendable, Equatable { case warn, liftWarning, disableVideo, enableVideo }

    struct Thresholds: Sendable, Equatable {
        /// Loss (fraction, per report) that warns, and that turns video off.
        var warn = 0.10
        var disable = 0.20
        /// Loss under which video comes back.
        var recover = 0.05
        /// Consecutive reports needed for each step: a single bad second is not a trend.
        var reportsToWarn = 2
        var reportsToDisable = 3
        var reportsToRecover = 5
    }

    private(set) var state = State.normal
    let thresholds: Thresholds
    private var high = 0   // consecutive reports at or over the disable threshold
    private var raised = 0 // consecutive reports at or over the warn threshold
    private var clear = 0  // consecutive reports under the recover threshold (or the warn one, when warned)

    init(thresholds: Thresholds = Thresholds()) { self.thresholds = thresholds }

    /// One new receiver report's fraction lost (of the video while it is sent,
    /// of the audio while it is not).
    mutating func report(fractionLost loss: Double) -> Action? {
        switch state {
        case .normal, .warned:
            raised = loss >= thresholds.warn ? raised + 1 : 0
            high = loss >= thresholds.disable ? high + 1 : 0
            clear = loss < thresholds.warn ? clear + 1 : 0
            if high >= thresholds.reportsToDisable {
                state = .videoOff
                high = 0; raised = 0; clear = 0
                return .disableVideo
            }
            if state == .normal, raised >= thresholds.reportsToWarn {
                state = .warned
                return .warn
            }
            if state == .warned, clear >= thresholds.reportsToWarn {
                state = .normal
                return .liftWarning
            }
            return nil
        case .videoOff:
            clear = loss < thresholds.recover ? clear + 1 : 0
            guard clear >= thresholds.reportsToRecover else { return nil }
            state = .normal
            high = 0; raised = 0; clear = 0
            return .enableVideo
        }
    }
}
