/// A piece of caption text for one stream, as subscribers get it.
public struct Caption: Sendable, Equatable {
    public var text: String
    /// False while the utterance goes on (a partial); true once, at its end.
    public var isFinal: Bool

    public init(text: String, isFinal: Bool) {
        self.text = text
        self.isFinal = isFinal
    }
}

/// Why captions cannot run, or why recognition failed.
public enum CaptionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The speech engine's library is not installed (or does not load).
    case engineMissing(path: String, reason: String)
    /// The model file is not there or the engine cannot read it.
    case modelMissing(path: String, reason: String)
    /// The engine failed on some audio.
    case recognitionFailed(String)
    /// The recognition was called off (its `RecognitionStop`) before it ended.
    case recognitionStopped
    /// The Opus decoder for the stream's audio could not be made.
    case decoderFailed(String)
    /// $CAMAGENT_CAPTIONS_VAD names no voice detection camagent has.
    case unknownVoiceDetection(String)
    /// The voice activity model failed on some audio.
    case voiceDetectionFailed(String)

    public var description: String {
        switch self {
        case .engineMissing(let path, let reason):
            "the captions engine is not available (\(path): \(reason)); scripts/install installs it (scripts/install-captions)"
        case .modelMissing(let path, let reason):
            "the captions model is not available (\(path): \(reason)); scripts/install installs it (scripts/install-captions)"
        case .recognitionFailed(let reason): "speech recognition failed: \(reason)"
        case .recognitionStopped: "speech recognition was called off"
        case .decoderFailed(let reason): "the stream's audio cannot be decoded for captions: \(reason)"
        case .unknownVoiceDetection(let name):
            "CAMAGENT_CAPTIONS_VAD is \"\(name)\": camagent finds speech with \(VoiceDetection.allCases.map(\.rawValue).joined(separator: " or "))"
        case .voiceDetectionFailed(let reason): "voice activity detection failed: \(reason)"
        }
    }
}

/// What a captioned stream has done so far (atomics read from anywhere).
public struct CaptionCounters: Sendable, Equatable {
    public var partials: UInt64 = 0
    public var finals: UInt64 = 0
    /// Seconds of the stream's audio that went through voice detection.
    public var audioSeconds: Double = 0
    /// Seconds the engine spent recognising (partials and finals).
    public var engineSeconds: Double = 0
    /// Opus packets that arrived while the captioner's queue was full.
    public var packetsDropped: UInt64 = 0
    /// Finals recognised early, at a pause's start, that speech coming back made void.
    public var earlyFinalsDiscarded: UInt64 = 0

    public init() {}

    public static func + (a: Self, b: Self) -> Self {
        var c = a
        c.partials += b.partials
        c.finals += b.finals
        c.audioSeconds += b.audioSeconds
        c.engineSeconds += b.engineSeconds
        c.packetsDropped += b.packetsDropped
        c.earlyFinalsDiscarded += b.earlyFinalsDiscarded
        return c
    }
}
