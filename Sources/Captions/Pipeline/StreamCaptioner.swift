import Encoders
import Glibc
import Logging
import MediaTypes

/// Live captions for one stream: its Opus packets in (from the router's
/// receive thread, copied into a fixed queue), caption text out. Two
/// threads of its own. The listener decodes Opus straight to 16 kHz mono
/// (libopus resamples as it decodes), splits utterances (`UtteranceDetector`,
/// with the engine's voice activity model when it has one) and asks for
/// text: a partial about once a second of speech, one final per utterance.
/// The recognizer runs those requests one at a time (`RecognitionHandoff`),
/// so listening never waits for it. The final is recognised early, when a
/// pause begins, so that it is ready when the pause has lasted long enough
/// to end the utterance; speech coming back voids it, and a partial still
/// being recognised when it is wanted is called off. Buffers are made once;
/// nothing is allocated per packet.
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
        /// ends the utterance (nil: only when it has ended). 3 (60 ms, after
        /// Silero's own ~60 ms of lag): past most gaps between words, well short of
        /// the pause that ends an utterance, so the recognition (a few hundred ms)
        /// overlaps the rest of the pause; speech coming back voids it. From the
        /// end of speech to the final, on the same day (BENCHMARKS.md § Captions):
        /// 5 frames, p50 0.72 s and max 1.00 s; 3, 0.70 s and 0.81 s; 2, no better
        /// (0.70-0.76 s, max 1.19 s) and more finals voided.
        public var earlyFinalPauseFrames: Int? = 3

        public init(partials: Bool = true) {
            self.partials = partials
            // $CAMAGENT_CAPTIONS_EARLY_FINAL_FRAMES (0: off): for measuring
            // (Benchmarks/captions.py), as the final's beam.
            if let frames = getenv("CAMAGENT_CAPTIONS_EARLY_FINAL_FRAMES").flatMap({ Int(String(cString: $0)) }) {
                earlyFinalPauseFrames = frames > 0 ? frames : nil
            }
        }
    }

    public let streamID: String
    private let queue: PacketQueue
    private let handoff: RecognitionHandoff
    private let listenerThread: StoppableThread
    private let recognizerThread: StoppableThread
    private let counters = SharedCounters()

    /// `onCaption` is called on the captioner's listening thread, in order.
    public init(streamID: String, recognizers: any SpeechRecognizerFactory, settings: Settings = Settings(),
                logger: Logger, onCaption: @escaping @Sendable (Caption) -> Void) throws(CaptionError) {
        self.streamID = streamID
        let recognizer = try recognizers.makeRecognizer()
        let voice = try recognizers.makeVoiceActivityModel()
        let decoder: OpusDecoder
        do { decoder = try OpusDecoder(channels: 1, sampleRate: 16_000) } catch { throw .decoderFailed("\(error)") }
        let queue = PacketQueue()
        self.queue = queue
        let listener = Listener(voice: voice, decoder: decoder, settings: settings, queue: queue,
                                streamID: streamID, logger: logger, onCaption: onCaption)
        handoff = listener.handoff
        let counters = self.counters
        listenerThread = StoppableThread(name: "camagent-captions") { stop in listener.run(stop, counters: counters) }
        let recognition = RecognizerLoop(recognizer: recognizer, handoff: handoff, counters: counters,
                                         streamID: streamID, logger: logger)
        recognizerThread = StoppableThread(name: "camagent-recognize") { stop in recognition.run(stop) }
        queue.wake = listenerThread.signal
        handoff.wakeListener = listenerThread.signal
        handoff.wakeRecognizer = recognizerThread.signal
        logger.info("captions: stream \(streamID) captioned (partials \(settings.partials ? "on" : "off"), voice detection \(voice == nil ? "by level" : "by model"))")
    }

    /// One Opus packet of the stream (any thread; never blocks on recognition).
    public func receive(opusPayload: UnsafeRawBufferPointer) {
        if !queue.push(opusPayload) { counters.value.withLock { $0.packetsDropped += 1 } }
    }

    /// Stops the threads (an utterance under way is dropped: the stream or its captions ended).
    public func stop() {
        listenerThread.stop()
        handoff.callOff { _ in true }
        recognizerThread.stop()
    }

    public var statistics: CaptionCounters { counters.value.withLock { $0 } }
}

/// The counters, shared by the captioner and its two threads.
final class SharedCounters: Sendable {
    let value = PThreadLocked(CaptionCounters())
}

