/// How a captioner finds utterances in a stream's audio.
public enum VoiceDetection: String, Sendable, Equatable, CaseIterable {
    /// Silero's voice activity model (whisper.cpp's ggml port): tells speech
    /// from other sound, so a fan, music or a door does not open an utterance,
    /// and the pause that ends one can be shorter.
    case silero
    /// The audio's level against a tracked noise floor: no model, but any
    /// loud enough sound counts as speech.
    case level
}

/// A model that says how likely a window of 16 kHz audio holds speech, one
/// window after the other (it may keep state from window to window). One
/// model serves one stream's thread.
public protocol VoiceActivityModel: AnyObject {
    /// Samples per window.
    var windowSamples: Int { get }
    /// The speech probability, in [0, 1], of `window` (`windowSamples` samples in [-1, 1]).
    func speechProbability(_ window: UnsafeBufferPointer<Float>) throws(CaptionError) -> Float
}

/// Silero through camagent's whisper bridge: one model context per stream,
/// its recurrent state carried from window to window.
public final class SileroVoiceActivity: VoiceActivityModel {
    private let library: WhisperLibrary
    private let detector: UnsafeMutableRawPointer
    public let windowSamples: Int

    public init(configuration: WhisperConfiguration) throws(CaptionError) {
        let library = try WhisperLibrary.load(configuration.libraryPath)
        self.library = library
        try configuration.checkModelReadable()
        // One thread: a window is 32 ms of audio and takes well under a millisecond.
        detector = try library.openModel(library.voiceOpen, path: configuration.voiceModelPath, threads: 1)
        windowSamples = library.voiceWindow
    }

    deinit { library.voiceClose(detector) }

    public func speechProbability(_ window: UnsafeBufferPointer<Float>) throws(CaptionError) -> Float {
        guard window.count == windowSamples else {
            throw .voiceDetectionFailed("a window of \(window.count) samples, the model takes \(windowSamples)")
        }
        var probability: Float = 0
        guard library.voiceProbability(detector, window.baseAddress, Int32(window.count), &probability) == 0 else {
            throw .voiceDetectionFailed("whisper's Silero model failed on a window")
        }
        return probability
    }
}
