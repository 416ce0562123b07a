#if canImport(Glibc)
import Glibc
#endif

/// Utterance boundaries over 20 ms frames of 16 kHz audio: an utterance
/// starts after a few speech frames in a row and ends after a pause, or when
/// it reaches the engine's window. Whether a frame is speech comes from a
/// voice activity model's probability (with hysteresis: a lower bar inside an
/// utterance than to start one), or from the frame's level alone (speech when
/// it stands well above the noise floor, tracked: down at once, up slowly).
/// Pure state, no audio kept: the captioner holds the samples.
public struct UtteranceDetector: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Speech frames in a row that start an utterance (3: 60 ms, so clicks do not).
        public var startFrames = 3
        /// Non-speech frames in a row that end one (20: a 400 ms pause; a sentence's
        /// commas are shorter, the gap between sentences longer).
        public var endFrames = 20
        /// Frames kept before the start (the onset is quieter than the threshold).
        public var preRollFrames = 10
        /// An utterance is finalised at this many frames even if speech goes on
        /// (450: 9 s, inside Whisper's 10 s at audio_ctx 512 and well inside 30 s).
        public var maxFrames = 450
        /// Utterances with fewer speech frames are dropped (a cough, a door).
        public var minSpeechFrames = 10
        /// Speech stands this far above the noise floor (dB)...
        public var marginDB = 12.0
        /// ...and above this level (dBFS), whatever the floor.
        public var minSpeechDBFS = -45.0
        /// How fast the floor rises through louder frames (dB per frame: 3 dB/s, so a
        /// fan switched on is noise again within seconds; pauses between words pull it
        /// back down at once, so speech does not raise it).
        public var floorRiseDB = 0.06
        /// With a model: a frame outside an utterance is speech at this probability...
        public var speechProbability: Float = 0.5
        /// ...and inside one down to this (Silero's own streaming rule: 0.15 below).
        public var holdProbability: Float = 0.35

        public init() {}

        /// For Silero: its probability falls within a few windows of speech's end and
        /// does not dip inside words, as the level does at stops and soft consonants,
        /// so a shorter pause (15 frames: 300 ms) still keeps a sentence whole.
        public static var silero: Settings {
            var settings = Settings()
            settings.endFrames = 15
            return settings
        }
    }

    public enum Step: Sendable, Equatable {
        /// Outside an utterance: the frame is only pre-roll.
        case silence
        /// An utterance starts with this frame (after the pre-roll).
        case started
        /// The frame belongs to the current utterance.
        case continuing
        /// The frame ends the current utterance (it belongs to it); `keep`:
        /// it had enough speech to recognise.
        case ended(keep: Bool)
    }

    public let settings: Settings
    /// The noise floor's estimate, dBFS.
    public private(set) var floorDB = -60.0
    public private(set) var inUtterance = false
    /// The last frame was speech (a partial then is worth it; near the end it is not).
    public private(set) var lastFrameWasSpeech = false
    private var speechRun = 0
    private var silenceRun = 0
    private var frames = 0
    private var speechFrames = 0

    public init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// Frames in the current utterance so far.
    public var utteranceFrames: Int { frames }

    /// Non-speech frames in a row at the end of the current utterance (0 outside one).
    public var pauseFrames: Int { inUtterance ? silenceRun : 0 }

    /// One frame's level, dBFS (RMS; -100 for digital silence).
    public mutating func feed(levelDB: Double) -> Step {
        let level = max(levelDB, -100)
        let speech = level > max(floorDB + settings.marginDB, settings.minSpeechDBFS)
        floorDB = level < floorDB ? level : min(floorDB + settings.floorRiseDB, level)
        return feed(isSpeech: speech)
    }

    /// One frame, with a voice activity model's speech probability for it.
    public mutating func feed(speechProbability probability: Float) -> Step {
        feed(isSpeech: probability >= (inUtterance ? settings.holdProbability : settings.speechProbability))
    }

    /// One frame, speech or not.
    public mutating func feed(isSpeech speech: Bool) -> Step {
        lastFrameWasSpeech = speech
        if !inUtterance {
            speechRun = speech ? speechRun + 1 : 0
            guard speechRun >= settings.startFrames else { return .silence }
            inUtterance = true
            frames = 1
            speechFrames = speechRun
            silenceRun = 0
            return .started
        }
        frames += 1
        if speech {
            speechFrames += 1
            silenceRun = 0
        } else {
            silenceRun += 1
        }
        if silenceRun >= settings.endFrames || frames >= settings.maxFrames {
            let keep = speechFrames >= settings.minSpeechFrames
            inUtterance = false
            speechRun = 0
            frames = 0
            speechFrames = 0
            silenceRun = 0
            return .ended(keep: keep)
        }
        return .continuing
    }

    /// The RMS level of `samples` (in [-1, 1]) in dBFS.
    public static func levelDB(_ samples: UnsafeBufferPointer<Float>) -> Double {
        guard !samples.isEmpty else { return -100 }
        var sum: Float = 0
        for s in samples { sum += s * s }
        let mean = Double(sum) / Double(samples.count)
        return mean > 1e-10 ? 10 * log10(mean) : -100
    }
}
