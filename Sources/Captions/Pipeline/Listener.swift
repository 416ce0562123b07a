import Encoders
import Logging
import MediaTypes

/// The captioner's listening thread: Opus to 16 kHz frames, frames to
/// utterances, utterances to requests for text (partials, early and late
/// finals) through the handoff, and the text that comes back to captions,
/// in order.
final class Listener: @unchecked Sendable {   // used by the listening thread only
    static let sampleRate = 16_000
    static let frameSamples = 320   // 20 ms

    let handoff: RecognitionHandoff
    let decoder: OpusDecoder
    let settings: StreamCaptioner.Settings
    let detectorSettings: UtteranceDetector.Settings
    let queue: PacketQueue
    let streamID: String
    let logger: Logger
    let onCaption: @Sendable (Caption) -> Void

    var detector: UtteranceDetector
    /// One decoded packet (up to 120 ms at 16 kHz).
    var pcm = [Int16](repeating: 0, count: 1920)
    /// The frame being filled.
    var frame = [Float](repeating: 0, count: frameSamples)
    var frameFill = 0
    /// The voice activity model (nil: by level), the window it is being filled
    /// with, and its verdict on the last full window, which each frame takes
    /// (Silero's 32 ms windows do not line up with the 20 ms frames).
    var voice: (any VoiceActivityModel)?
    var voiceWindow: [Float]
    var voiceFill = 0
    var speechProbability: Float = 0
    /// The last frames outside an utterance (a ring), for the utterance's onset.
    var preRoll: [Float]
    var preRollStart = 0
    var preRollFrames = 0
    /// The current utterance: which (counted from 1), its samples, its partials.
    var utteranceNumber: UInt64 = 0
    var utterance: [Float]
    var utteranceCount = 0
    var samplesAtLastPartial = 0
    var lastPartial = ""
    /// The current utterance's final, recognised at the start of a pause.
    var earlyFinal = EarlyFinal.none
    /// An utterance that has ended while its final was still being recognised.
    var awaitingFinal: (utterance: UInt64, partial: String)?
    /// Counted since the counters were last brought up to date.
    var pending = CaptionCounters()

    enum EarlyFinal: Equatable {
        case none
        /// The handoff's job with this serial is recognising it.
        case recognising(serial: UInt64)
        case ready(String)
    }

    init(voice: (any VoiceActivityModel)?, decoder: OpusDecoder, settings: StreamCaptioner.Settings, queue: PacketQueue,
         streamID: String, logger: Logger, onCaption: @escaping @Sendable (Caption) -> Void) {
        self.voice = voice
        voiceWindow = [Float](repeating: 0, count: voice?.windowSamples ?? 0)
        self.decoder = decoder
        self.settings = settings
        let detectorSettings = settings.detector ?? (voice == nil ? UtteranceDetector.Settings() : .silero)
        self.detectorSettings = detectorSettings
        self.queue = queue
        self.streamID = streamID
        self.logger = logger
        self.onCaption = onCaption
        detector = UtteranceDetector(settings: detectorSettings)
        preRoll = [Float](repeating: 0, count: detectorSettings.preRollFrames * Self.frameSamples)
        let capacity = (detectorSettings.maxFrames + detectorSettings.preRollFrames + 1) * Self.frameSamples
        utterance = [Float](repeating: 0, count: capacity)
        handoff = RecognitionHandoff(capacity: capacity)
    }

    func run(_ stop: StopSignal, counters: SharedCounters) {
        while !stop.isStopRequested {
            _ = stop.wait(milliseconds: 200)
            takeResult()
            while queue.pop({ packet in decode(packet, stop) }) {
                if stop.isStopRequested { return }
            }
            // Caught up with the stream: a partial, if a second of speech came since the
            // last and the recognizer is free (a partial never waits: the next one will do).
            if settings.partials, detector.inUtterance, detector.lastFrameWasSpeech, earlyFinal == .none,
               utteranceCount - samplesAtLastPartial >= Int(settings.partialInterval * Double(Self.sampleRate)),
               submit(final: false) != nil {
                samplesAtLastPartial = utteranceCount
            }
            if pending != CaptionCounters() {
                let counted = pending
                counters.value.withLock { $0 = $0 + counted }
                pending = CaptionCounters()
            }
        }
    }

    /// Decodes one packet and feeds its frames on.
    private func decode(_ packet: UnsafeRawBufferPointer, _ stop: StopSignal) {
        let count: Int
        do {
            count = try pcm.withUnsafeMutableBufferPointer { out throws(CodecError) in try decoder.decode(packet, into: out) }
        } catch {
            logger.debug("captions: stream \(streamID): an Opus packet did not decode: \(error)")
            return
        }
        pending.audioSeconds += Double(count) / Double(Self.sampleRate)
        for i in 0..<count {
            let sample = Float(pcm[i]) / 32768
            if voice != nil {
                voiceWindow[voiceFill] = sample
                voiceFill += 1
                if voiceFill == voiceWindow.count {
                    voiceFill = 0
                    classifyVoiceWindow()
                }
            }
            frame[frameFill] = sample
            frameFill += 1
            if frameFill == Self.frameSamples {
                frameFill = 0
                step(stop)
            }
        }
    }

    private func classifyVoiceWindow() {
        guard let voice else { return }
        do {
            speechProbability = try voiceWindow.withUnsafeBufferPointer { window throws(CaptionError) in
                try voice.speechProbability(window)
            }
        } catch {
            // Captions go on, by level: worse at telling speech from noise, but they go on.
            logger.warning("captions: stream \(streamID): \(error); finding utterances by level from now on")
            self.voice = nil
        }
    }

    /// One full frame through the detector.
    private func step(_ stop: StopSignal) {
        let verdict: UtteranceDetector.Step
        if voice != nil {
            verdict = detector.feed(speechProbability: speechProbability)
        } else {
            verdict = detector.feed(levelDB: frame.withUnsafeBufferPointer { UtteranceDetector.levelDB($0) })
        }
        switch verdict {
        case .silence:
            keepPreRoll()
        case .started:
            utteranceNumber += 1
            utteranceCount = 0
            for k in 0..<preRollFrames {
                let start = ((preRollStart + k) % detectorSettings.preRollFrames) * Self.frameSamples
                append(preRoll, from: start)
            }
            preRollFrames = 0
            append(frame, from: 0)
            samplesAtLastPartial = utteranceCount
            lastPartial = ""
            earlyFinal = .none
        case .continuing:
            append(frame, from: 0)
            if detector.lastFrameWasSpeech {
                voidEarlyFinal()
            } else if let frames = settings.earlyFinalPauseFrames, detector.pauseFrames == frames, earlyFinal == .none {
                // The audio from here to the utterance's end is pause: the final will not
                // change. A partial still under way is moot: the final comes sooner without it.
                let current = utteranceNumber
                handoff.callOff { $0.utterance == current && !$0.final }
                if let serial = submitWaiting(final: true, stop) { earlyFinal = .recognising(serial: serial) }
            }
        case .ended(let keep):
            append(frame, from: 0)
            finish(keep: keep, stop)
        }
    }

    /// Speech came back after the early final was asked for: the final will say more.
    private func voidEarlyFinal() {
        switch earlyFinal {
        case .none: return
        case .recognising(let serial): handoff.callOff { $0.serial == serial }
        case .ready: break
        }
        earlyFinal = .none
        pending.earlyFinalsDiscarded += 1
    }

    private func keepPreRoll() {
        let frames = detectorSettings.preRollFrames
        guard frames > 0 else { return }
        let slot = (preRollStart + preRollFrames) % frames
        for i in 0..<Self.frameSamples { preRoll[slot * Self.frameSamples + i] = frame[i] }
        if preRollFrames < frames { preRollFrames += 1 } else { preRollStart = (preRollStart + 1) % frames }
    }

    private func append(_ source: [Float], from start: Int) {
        guard utteranceCount + Self.frameSamples <= utterance.count else { return }
        for i in 0..<Self.frameSamples { utterance[utteranceCount + i] = source[start + i] }
        utteranceCount += Self.frameSamples
    }

    /// The utterance is over: one final (if there was speech, or a partial to close),
    /// now or when the recognizer has it.
    private func finish(keep: Bool, _ stop: StopSignal) {
        let current = utteranceNumber
        let partial = lastPartial
        if keep {
            switch earlyFinal {
            case .ready(let text):
                sendFinal(text, partial: partial)
            case .recognising:
                awaitingFinal = (current, partial)
            case .none:
                handoff.callOff { $0.utterance == current && !$0.final }
                if submitWaiting(final: true, stop) != nil {
                    awaitingFinal = (current, partial)
                } else {
                    sendFinal("", partial: partial)   // stopping
                }
            }
        } else {
            handoff.callOff { $0.utterance == current }
            sendFinal("", partial: partial)
        }
        earlyFinal = .none
        utteranceCount = 0
        samplesAtLastPartial = 0
        lastPartial = ""
    }

    /// A final's text (empty: the engine heard nothing, or the utterance was too short to ask).
    private func sendFinal(_ text: String, partial: String) {
        // The partials said something: their final says it too.
        let final = text.isEmpty ? partial : text
        guard !final.isEmpty else { return }
        pending.finals += 1
        onCaption(Caption(text: final, isFinal: true))
    }

    /// Asks for the text of the utterance so far; the job's serial, or nil when the recognizer is busy.
    private func submit(final: Bool) -> UInt64? {
        takeResult()
        let job = RecognitionHandoff.Job(utterance: utteranceNumber, final: final, count: utteranceCount)
        return utterance.withUnsafeBufferPointer { all in
            handoff.submit(job, samples: UnsafeBufferPointer(rebasing: all[0..<utteranceCount]))
        }
    }

    /// `submit`, waiting for the recognizer to be free (it may be finishing the
    /// last utterance's final, or giving up a partial); nil only when stopping.
    /// Packets queue up meanwhile and are caught up after.
    private func submitWaiting(final: Bool, _ stop: StopSignal) -> UInt64? {
        while !stop.isStopRequested {
            if let serial = submit(final: final) { return serial }
            _ = stop.wait(milliseconds: 20)
        }
        return nil
    }

    /// What the recognizer finished, if anything, to captions.
    private func takeResult() {
        guard let (job, text) = handoff.takeResult() else { return }
        if job.final {
            if let awaiting = awaitingFinal, awaiting.utterance == job.utterance {
                awaitingFinal = nil
                sendFinal(text ?? "", partial: awaiting.partial)
            } else if earlyFinal == .recognising(serial: job.serial) {
                // Failed: nothing early, the end of the utterance asks again.
                earlyFinal = text.map { .ready($0) } ?? .none
            }
        } else if job.utterance == utteranceNumber, detector.inUtterance, earlyFinal == .none,
                  let text, !text.isEmpty, text != lastPartial {
            lastPartial = text
            pending.partials += 1
            onCaption(Caption(text: text, isFinal: false))
        }
    }
}
