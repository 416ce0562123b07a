import Encoders
import Logging
import MediaTypes

/// Live captions for one stream: its Opus packets in (from the router's
/// receive thread, copied into a fixed queue), caption text out. A thread
/// of its own decodes Opus straight to 16 kHz mono (libopus resamples as
/// it decodes), splits utterances (`UtteranceDetector`, with the engine's
/// voice activity model when it has one), and runs the recognizer: a
/// partial about once a second of speech, one final when the utterance
/// ends. The final is recognised early, when a pause begins, so that it is
/// ready when the pause has lasted long enough to end the utterance; speech
/// coming back voids it. Buffers are made once; nothing is allocated per packet.
public final class StreamCaptioner: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Send partials (OpenTok's partialCaptions); finals always go.
        public var partials = true
        /// Seconds of speech between two partials.
        public var partialInterval = 1.0
        /// nil: the settings for the engine's voice detection (`.silero` with a
        /// model, the defaults by level).
        public var detector: UtteranceDetector.Settings?
        /// Non-speech frames after which the final is recognised, before the pause
        /// ends the utterance (nil: only when it has ended). 5 (100 ms, after
        /// Silero's own ~60 ms of lag): past most gaps between words, well short of
        /// the pause that ends an utterance, so the recognition (a few hundred ms)
        /// overlaps the rest of the pause. (8 gave a p50 of 0.93 s from the end of
        /// speech to the final; 5, with a beam of 3, 0.76 s: BENCHMARKS.md.)
        public var earlyFinalPauseFrames: Int? = 5

        public init(partials: Bool = true) { self.partials = partials }
    }

    public let streamID: String
    private let queue: PacketQueue
    private let thread: StoppableThread
    private let counters = SharedCounters()

    /// `onCaption` is called on the captioner's thread, in order.
    public init(streamID: String, recognizers: any SpeechRecognizerFactory, settings: Settings = Settings(),
                logger: Logger, onCaption: @escaping @Sendable (Caption) -> Void) throws(CaptionError) {
        self.streamID = streamID
        let recognizer = try recognizers.makeRecognizer()
        let voice = try recognizers.makeVoiceActivityModel()
        let decoder: OpusDecoder
        do { decoder = try OpusDecoder(channels: 1, sampleRate: 16_000) } catch { throw .decoderFailed("\(error)") }
        let queue = PacketQueue()
        self.queue = queue
        let work = Work(recognizer: recognizer, voice: voice, decoder: decoder, settings: settings, queue: queue,
                        streamID: streamID, logger: logger, onCaption: onCaption)
        let counters = self.counters
        thread = StoppableThread(name: "camagent-captions") { stop in work.run(stop, counters: counters) }
        queue.wake = thread.signal
        logger.info("captions: stream \(streamID) captioned (partials \(settings.partials ? "on" : "off"), voice detection \(voice == nil ? "by level" : "by model"))")
    }

    /// One Opus packet of the stream (any thread; never blocks on recognition).
    public func receive(opusPayload: UnsafeRawBufferPointer) {
        if !queue.push(opusPayload) { counters.value.withLock { $0.packetsDropped += 1 } }
    }

    /// Stops the thread (an utterance under way is dropped: the stream or its captions ended).
    public func stop() { thread.stop() }

    public var statistics: CaptionCounters { counters.value.withLock { $0 } }
}

/// The counters, shared by the captioner and its thread.
final class SharedCounters: Sendable {
    let value = PThreadLocked(CaptionCounters())
}

/// Opus packets waiting for the captioner: fixed slots, filled by the
/// receive thread, drained by the captioner's; full means the newest is dropped.
/// The two threads contend for the lock at every packet, hence a pthread
/// mutex (`PThreadLocked`), which ThreadSanitizer can follow.
final class PacketQueue: @unchecked Sendable {   // storage behind `lock`
    static let slots = 512            // 10 s of 20 ms packets: recognition may take a while
    static let slotBytes = 1500
    private let lock = PThreadLocked(Indices())
    private let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: slots * slotBytes, alignment: 8)
    private let lengths = UnsafeMutableBufferPointer<Int>.allocate(capacity: slots)
    /// Set once, before the first packet (the thread's wake-up).
    nonisolated(unsafe) var wake: StopSignal?

    private struct Indices: Sendable {
        var head = 0
        var count = 0
    }

    deinit {
        storage.deallocate()
        lengths.deallocate()
    }

    func push(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard packet.count <= Self.slotBytes else { return false }
        let pushed = lock.withLock { i -> Bool in
            guard i.count < Self.slots else { return false }
            let slot = (i.head + i.count) % Self.slots
            UnsafeMutableRawBufferPointer(rebasing: storage[slot * Self.slotBytes ..< slot * Self.slotBytes + packet.count])
                .copyMemory(from: packet)
            lengths[slot] = packet.count
            i.count += 1
            return true
        }
        if pushed { wake?.wakeUp() }
        return pushed
    }

    /// Hands the oldest packet to `body` (on the draining thread); false when empty.
    func pop(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        // The slot is read outside the lock: only this thread frees it, after reading.
        guard let slot = lock.withLock({ i -> Int? in i.count > 0 ? i.head : nil }) else { return false }
        body(UnsafeRawBufferPointer(rebasing: storage[slot * Self.slotBytes ..< slot * Self.slotBytes + lengths[slot]]))
        lock.withLock { i in
            i.head = (i.head + 1) % Self.slots
            i.count -= 1
        }
        return true
    }
}

/// The captioner thread's state.
private final class Work: @unchecked Sendable {   // used by the captioner's thread only
    static let sampleRate = 16_000
    static let frameSamples = 320   // 20 ms

    let recognizer: any SpeechRecognizer
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
    /// The current utterance's samples.
    var utterance: [Float]
    var utteranceCount = 0
    var samplesAtLastPartial = 0
    var lastPartial = ""
    /// The final recognised at the start of the current pause (nil: none yet, or speech came back).
    var earlyFinal: String?
    /// Early finals voided since the counters were last brought up to date.
    var earlyFinalsDiscarded: UInt64 = 0

    init(recognizer: any SpeechRecognizer, voice: (any VoiceActivityModel)?, decoder: OpusDecoder,
         settings: StreamCaptioner.Settings, queue: PacketQueue, streamID: String, logger: Logger,
         onCaption: @escaping @Sendable (Caption) -> Void) {
        self.recognizer = recognizer
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
        utterance = [Float](repeating: 0, count: (detectorSettings.maxFrames + detectorSettings.preRollFrames + 1) * Self.frameSamples)
    }

    func run(_ stop: StopSignal, counters: SharedCounters) {
        while !stop.isStopRequested {
            _ = stop.wait(milliseconds: 200)
            var decodedSamples = 0
            var engineSeconds = 0.0
            var partials: UInt64 = 0, finals: UInt64 = 0
            while queue.pop({ packet in decodedSamples += decode(packet, engineSeconds: &engineSeconds, finals: &finals) }) {
                if stop.isStopRequested { return }
            }
            // Caught up with the stream: a partial, if a second of speech came since the last.
            if settings.partials, detector.inUtterance, detector.lastFrameWasSpeech,
               utteranceCount - samplesAtLastPartial >= Int(settings.partialInterval * Double(Self.sampleRate)) {
                samplesAtLastPartial = utteranceCount
                if let text = recognize(final: false, engineSeconds: &engineSeconds), !text.isEmpty, text != lastPartial {
                    lastPartial = text
                    partials += 1
                    onCaption(Caption(text: text, isFinal: false))
                }
            }
            if decodedSamples > 0 || engineSeconds > 0 {
                counters.value.withLock { c in
                    c.audioSeconds += Double(decodedSamples) / Double(Self.sampleRate)
                    c.engineSeconds += engineSeconds
                    c.partials += partials
                    c.finals += finals
                    c.earlyFinalsDiscarded += earlyFinalsDiscarded
                }
                earlyFinalsDiscarded = 0
            }
        }
    }

    /// Decodes one packet and feeds its frames on; returns the samples decoded.
    private func decode(_ packet: UnsafeRawBufferPointer, engineSeconds: inout Double, finals: inout UInt64) -> Int {
        let count: Int
        do {
            count = try pcm.withUnsafeMutableBufferPointer { out throws(CodecError) in try decoder.decode(packet, into: out) }
        } catch {
            logger.debug("captions: stream \(streamID): an Opus packet did not decode: \(error)")
            return 0
        }
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
                step(engineSeconds: &engineSeconds, finals: &finals)
            }
        }
        return count
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
    private func step(engineSeconds: inout Double, finals: inout UInt64) {
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
            utteranceCount = 0
            for k in 0..<preRollFrames {
                let start = ((preRollStart + k) % detectorSettings.preRollFrames) * Self.frameSamples
                append(preRoll, from: start)
            }
            preRollFrames = 0
            append(frame, from: 0)
            samplesAtLastPartial = utteranceCount
            lastPartial = ""
            earlyFinal = nil
        case .continuing:
            append(frame, from: 0)
            if detector.lastFrameWasSpeech {
                if earlyFinal != nil {
                    earlyFinal = nil
                    earlyFinalsDiscarded += 1
                }
            } else if let frames = settings.earlyFinalPauseFrames, detector.pauseFrames == frames, earlyFinal == nil {
                // The audio from here to the utterance's end is pause: the final will not change.
                earlyFinal = recognize(final: true, engineSeconds: &engineSeconds)
            }
        case .ended(let keep):
            append(frame, from: 0)
            finish(keep: keep, engineSeconds: &engineSeconds, finals: &finals)
        }
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

    /// The utterance is over: one final (if there was speech, or a partial to close).
    private func finish(keep: Bool, engineSeconds: inout Double, finals: inout UInt64) {
        var text = keep ? (earlyFinal ?? recognize(final: true, engineSeconds: &engineSeconds) ?? "") : ""
        earlyFinal = nil
        if text.isEmpty { text = lastPartial }   // the partials said something: their final says it too
        if !text.isEmpty {
            finals += 1
            onCaption(Caption(text: text, isFinal: true))
        }
        utteranceCount = 0
        samplesAtLastPartial = 0
        lastPartial = ""
    }

    private func recognize(final: Bool, engineSeconds: inout Double) -> String? {
        let started = MonotonicTimestamp.now()
        defer { engineSeconds += MonotonicTimestamp.now().seconds - started.seconds }
        do {
            let raw = try utterance.withUnsafeBufferPointer { all throws(CaptionError) in
                try recognizer.transcribe(UnsafeBufferPointer(rebasing: all[0..<utteranceCount]), final: final)
            }
            return TranscriptCleanup.clean(raw)
        } catch {
            logger.warning("captions: stream \(streamID): \(error)")
            return nil
        }
    }
}
