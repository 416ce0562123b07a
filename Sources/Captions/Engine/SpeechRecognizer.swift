import Synchronization

/// Speech to text for one utterance at a time: 16 kHz mono samples in
/// [-1, 1], the text out. One recognizer serves one stream's thread.
public protocol SpeechRecognizer: AnyObject {
    /// `samples` is the whole utterance so far (a partial) or all of it (a final:
    /// worth more care). Once `stop` is requested (from another thread), it
    /// gives up at its next chance and throws `.recognitionStopped`.
    func transcribe(_ samples: UnsafeBufferPointer<Float>, final: Bool, stop: RecognitionStop?) throws(CaptionError) -> String
}

extension SpeechRecognizer {
    /// A transcription that runs to its end.
    public func transcribe(_ samples: UnsafeBufferPointer<Float>, final: Bool) throws(CaptionError) -> String {
        try transcribe(samples, final: final, stop: nil)
    }
}

/// How one thread calls off a recognition running on another: a partial
/// becomes moot the moment its utterance's final is wanted. One per recognition.
public final class RecognitionStop: Sendable {
    private let requested = Atomic<Bool>(false)

    public init() {}

    public func request() { requested.store(true, ordering: .releasing) }

    public var isRequested: Bool { requested.load(ordering: .acquiring) }
}

/// Makes one recognizer per captioned stream (each has its own model state),
/// and its voice activity model, if it has one.
public protocol SpeechRecognizerFactory: Sendable {
    func makeRecognizer() throws(CaptionError) -> any SpeechRecognizer
    /// nil: utterances are found from the audio's level alone.
    func makeVoiceActivityModel() throws(CaptionError) -> (any VoiceActivityModel)?
}

extension SpeechRecognizerFactory {
    public func makeVoiceActivityModel() throws(CaptionError) -> (any VoiceActivityModel)? { nil }
}
