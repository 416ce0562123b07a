import Logging
import MediaTypes

/// The captioner's recognizing thread: the handoff's jobs, one at a time.
final class RecognizerLoop: @unchecked Sendable {   // used by the recognizing thread only
    let recognizer: any SpeechRecognizer
    let handoff: RecognitionHandoff
    let counters: SharedCounters
    let streamID: String
    let logger: Logger

    init(recognizer: any SpeechRecognizer, handoff: RecognitionHandoff, counters: SharedCounters, streamID: String, logger: Logger) {
        self.recognizer = recognizer
        self.handoff = handoff
        self.counters = counters
        self.streamID = streamID
        self.logger = logger
    }

    func run(_ stop: StopSignal) {
        while !stop.isStopRequested {
            guard let (job, jobStop) = handoff.start() else {
                _ = stop.wait(milliseconds: 200)
                continue
            }
            let started = MonotonicTimestamp.now()
            var text: String?
            do {
                let samples = UnsafeBufferPointer(rebasing: handoff.audio[0..<job.count])
                text = TranscriptCleanup.clean(try recognizer.transcribe(samples, final: job.final, stop: jobStop))
            } catch .recognitionStopped {
                text = nil
            } catch {
                logger.warning("captions: stream \(streamID): \(error)")
            }
            let seconds = MonotonicTimestamp.now().seconds - started.seconds
            counters.value.withLock { $0.engineSeconds += seconds }
            handoff.finish(job, text: text)
        }
    }
}
