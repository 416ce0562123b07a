import MediaTypes

/// Where the captioner's two threads meet. The listener (Opus, voice
/// detection, utterances) hands the recognizer one piece of audio at a time
/// and takes its text back: listening never waits for recognition, and a
/// recognition that became moot (a partial, once its utterance's final is
/// wanted) can be called off. One job at a time, in the order given, so
/// the text comes back in that order too.
final class RecognitionHandoff: @unchecked Sendable {   // `audio` changes hands under `phase`'s lock
    struct Job: Sendable, Equatable {
        /// Which utterance (the listener counts them).
        var utterance: UInt64
        var final: Bool
        /// Samples of the utterance, from its start.
        var count: Int
        /// Set by `submit`: each job has its own.
        var serial: UInt64 = 0
    }

    private enum Phase {
        case idle
        case queued(Job)
        case running(Job, RecognitionStop)
        /// The text, nil when the recognition failed or was called off.
        case finished(Job, String?)
    }

    private let phase = PThreadLocked(Phase.idle)
    private var lastSerial: UInt64 = 0   // the listener's
    /// The job's samples: the listener writes them while idle, the recognizer reads them while running.
    let audio: UnsafeMutableBufferPointer<Float>
    /// Wakes the recognizer (a job) and the listener (a result); set once, before the first job.
    nonisolated(unsafe) var wakeRecognizer: StopSignal?
    nonisolated(unsafe) var wakeListener: StopSignal?

    init(capacity: Int) {
        audio = .allocate(capacity: capacity)
        audio.initialize(repeating: 0)
    }

    deinit { audio.deallocate() }

    // MARK: The listener's side

    var isIdle: Bool { phase.withLock { if case .idle = $0 { true } else { false } } }

    /// Queues `job` over `samples` (copied) when no job is under way; its
    /// serial, or nil when busy.
    func submit(_ job: Job, samples: UnsafeBufferPointer<Float>) -> UInt64? {
        guard isIdle, samples.count <= audio.count else { return nil }
        // Idle: the recognizer does not touch `audio` until it sees the job, under the lock.
        _ = UnsafeMutableBufferPointer(rebasing: audio[0..<samples.count]).initialize(fromContentsOf: samples)
        lastSerial += 1
        var queued = job
        queued.serial = lastSerial
        queued.count = samples.count
        phase.withLock { $0 = .queued(queued) }
        wakeRecognizer?.wakeUp()
        return lastSerial
    }

    /// Calls off the job under way if `matches` says so: a queued one never
    /// runs; a running one is asked to stop and finishes with no text.
    func callOff(where matches: (Job) -> Bool) {
        phase.withLock { phase in
            switch phase {
            case .queued(let job) where matches(job): phase = .idle
            case .running(let job, let stop) where matches(job): stop.request()
            default: break
            }
        }
    }

    /// The finished job and its text; the handoff is idle again.
    func takeResult() -> (job: Job, text: String?)? {
        phase.withLock { phase in
            guard case .finished(let job, let text) = phase else { return nil }
            phase = .idle
            return (job, text)
        }
    }

    // MARK: The recognizer's side

    /// The queued job, now running, and its stop.
    func start() -> (job: Job, stop: RecognitionStop)? {
        phase.withLock { phase in
            guard case .queued(let job) = phase else { return nil }
            let stop = RecognitionStop()
            phase = .running(job, stop)
            return (job, stop)
        }
    }

    func finish(_ job: Job, text: String?) {
        phase.withLock { $0 = .finished(job, text) }
        wakeListener?.wakeUp()
    }
}
