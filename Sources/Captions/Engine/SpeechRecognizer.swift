/// Speech to text for one utterance at a time: 16 kHz mono samples in
/// [-1, 1], the text out. One recognizer serves one stream's thread.
public protocol SpeechRecognizer: AnyObject {
    /// `samples` is the whole utterance so far (a partial) or all of it (a final:
    /// worth more care).
    func transcribe(_ samples: UnsafeBufferPointer<Float>, final: Bool) throws(CaptionError) -> String
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
