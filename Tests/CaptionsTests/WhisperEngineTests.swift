import Encoders
import Foundation
import Logging
import MediaFiles
import MediaTypes
import Testing
@testable import Captions

/// whisper.cpp as scripts/install-captions installs it, on speech espeak-ng
/// says: the bridge loads, the model hears the words, and the whole
/// pipeline (Opus, voice detection, partials, one final per utterance)
/// captions two sentences. CI installs the engine, so these never skip.
@Suite struct WhisperEngineTests {
    static let sentences = ["the weather is cold and windy today", "please close the door when you leave the room"]

    /// espeak-ng's voice for `text`, as 16-bit PCM at its own rate (22050 Hz).
    private func speak(_ text: String) throws -> WAVFile {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-speech-\(UUID().uuidString).wav").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let espeak = Process()
        espeak.executableURL = URL(fileURLWithPath: "/usr/bin/espeak-ng")
        espeak.arguments = ["-v", "en-us", "-s", "160", "-w", path, text]
        try espeak.run()
        espeak.waitUntilExit()
        try #require(espeak.terminationStatus == 0, "espeak-ng failed")
        return try WAVFile(path: path)
    }

    /// Words of `heard` that are in `said` (case and punctuation aside), as a share of `said`'s.
    private func recall(_ heard: String, _ said: String) -> Double {
        func words(_ s: String) -> [String] {
            s.lowercased().split { !$0.isLetter && $0 != "'" }.map(String.init)
        }
        let got = Set(words(heard))
        let want = words(said)
        return Double(want.filter(got.contains).count) / Double(want.count)
    }

    @Test func theModelHearsASentence() throws {
        let recognizer = try WhisperRecognizer(configuration: try WhisperConfiguration())
        let speech = try speak(Self.sentences[0])
        let samples = speech.converted(toRate: 16_000, channels: 1).map { Float($0) / 32768 }
        let text = try samples.withUnsafeBufferPointer { try recognizer.transcribe($0, final: true) }
        #expect(recall(text, Self.sentences[0]) >= 0.6, "heard: \(text)")
    }

    /// A recognition called off gives up (at whisper's first check, after its encoder)
    /// and says so; the same recognizer then hears the next one in full.
    @Test func aStoppedRecognitionSaysSo() throws {
        let recognizer = try WhisperRecognizer(configuration: try WhisperConfiguration())
        let speech = try speak(Self.sentences[0])
        let samples = speech.converted(toRate: 16_000, channels: 1).map { Float($0) / 32768 }
        let stop = RecognitionStop()
        stop.request()
        #expect(throws: CaptionError.recognitionStopped) {
            _ = try samples.withUnsafeBufferPointer { try recognizer.transcribe($0, final: false, stop: stop) }
        }
        let text = try samples.withUnsafeBufferPointer { try recognizer.transcribe($0, final: false, stop: RecognitionStop()) }
        #expect(recall(text, Self.sentences[0]) >= 0.6, "heard: \(text)")
    }

    /// White noise with the RMS of `speech` (a fan, a rush of air: as loud as the voice, not a voice).
    private func noise(likeLevelOf speech: [Float], count: Int) -> [Float] {
        let rms = (speech.reduce(0) { $0 + $1 * $1 } / Float(speech.count)).squareRoot()
        var generator = SystemRandomNumberGenerator()
        // Uniform in [-a, a] has an RMS of a / sqrt(3).
        let a = rms * Float(3).squareRoot()
        return (0..<count).map { _ in Float.random(in: -a...a, using: &generator) }
    }

    /// Silero's probability for each whole window of `samples`, in order (one model, its state carried).
    private func probabilities(_ samples: [Float], _ model: SileroVoiceActivity) throws -> [Float] {
        try stride(from: 0, to: samples.count - model.windowSamples + 1, by: model.windowSamples).map { start in
            try samples[start..<start + model.windowSamples].withUnsafeBufferPointer { try model.speechProbability($0) }
        }
    }

    @Test func sileroTellsSpeechFromNoiseAsLoud() throws {
        let configuration = try WhisperConfiguration(voiceDetection: .silero)
        let speech = try speak(Self.sentences[1]).converted(toRate: 16_000, channels: 1).map { Float($0) / 32768 }
        let hiss = noise(likeLevelOf: speech, count: speech.count)
        // A fresh model for each, so neither inherits the other's state.
        let onSpeech = try probabilities(speech, SileroVoiceActivity(configuration: configuration))
        let onNoise = try probabilities(hiss, SileroVoiceActivity(configuration: configuration))
        func share(_ p: [Float]) -> Double { Double(p.filter { $0 >= 0.5 }.count) / Double(p.count) }
        // espeak's sentence is speech nearly throughout; its pauses between words are short.
        #expect(share(onSpeech) >= 0.6, "speech: \(onSpeech)")
        #expect(share(onNoise) <= 0.05, "noise: \(onNoise)")
        // The level alone cannot tell them apart: both stand the same above silence.
        let level = { (x: [Float]) in x.withUnsafeBufferPointer { UtteranceDetector.levelDB($0) } }
        #expect(abs(level(speech) - level(hiss)) < 0.5)
        // A window of the wrong size is an error, not a read past the end.
        #expect(throws: CaptionError.self) {
            try speech[0..<100].withUnsafeBufferPointer { try SileroVoiceActivity(configuration: configuration).speechProbability($0) }
        }
    }

    /// 20 ms Opus packets of 48 kHz PCM into `captioner`, faster than real time but not all at once.
    private func send(_ pcm: [Int16], to captioner: StreamCaptioner) throws {
        let encoder = try OpusEncoder(channels: 1)
        for start in stride(from: 0, to: pcm.count - 960, by: 960) {
            try pcm[start..<start + 960].withUnsafeBufferPointer { frame in
                try encoder.encode(frame) { captioner.receive(opusPayload: $0) }
            }
            usleep(2_000)
        }
    }

    /// With Silero, loud noise opens no utterance: the recognizer never runs. By level,
    /// the same noise is taken for speech and recognised (the reason Silero is the default).
    @Test(arguments: [VoiceDetection.silero, .level])
    func noiseAsLoudAsSpeech(detection: VoiceDetection) throws {
        let configuration = try WhisperConfiguration(voiceDetection: detection)
        let captioner = try StreamCaptioner(streamID: "s", recognizers: try WhisperRecognizerFactory(configuration: configuration),
                                            logger: Logger(label: "test")) { _ in }
        defer { captioner.stop() }
        let speech = try speak(Self.sentences[0]).converted(toRate: 48_000, channels: 1).map { Float($0) / 32768 }
        // Half a second of silence, 3 s of noise, a second of silence.
        let pcm = [Int16](repeating: 0, count: 24_000)
            + noise(likeLevelOf: speech, count: 144_000).map { Int16(max(-32767, min(32767, $0 * 32768))) }
            + [Int16](repeating: 0, count: 48_000)
        try send(pcm, to: captioner)
        let seconds = Double(pcm.count / 960 * 960) / 48_000
        for _ in 0..<300 where captioner.statistics.audioSeconds < seconds - 0.03 { usleep(50_000) }
        // The captioner has taken all the audio in; a recognition it started is done by now too
        // (it runs on the same thread, before the next packet).
        let stats = captioner.statistics
        #expect(stats.audioSeconds >= seconds - 0.03, "\(stats)")
        switch detection {
        case .silero: #expect(stats.engineSeconds == 0 && stats.finals == 0, "\(stats)")
        case .level: #expect(stats.engineSeconds > 0, "\(stats)")
        }
    }

    @Test(arguments: [VoiceDetection.silero, .level])
    func thePipelineCaptionsTwoUtterancesOverOpus(detection: VoiceDetection) throws {
        let captions = PThreadLocked<[Caption]>([])
        let configuration = try WhisperConfiguration(voiceDetection: detection)
        let captioner = try StreamCaptioner(streamID: "s", recognizers: try WhisperRecognizerFactory(configuration: configuration),
                                            logger: Logger(label: "test")) { caption in
            captions.withLock { $0.append(caption) }
        }
        defer { captioner.stop() }
        // Half a second of silence, a sentence, a second of silence, the other, a second of silence; at 48 kHz.
        var pcm = [Int16](repeating: 0, count: 24_000)
        for sentence in Self.sentences {
            pcm += try speak(sentence).converted(toRate: 48_000, channels: 1)
            pcm += [Int16](repeating: 0, count: 48_000)
        }
        try send(pcm, to: captioner)
        for _ in 0..<300 where captions.withLock({ $0.filter(\.isFinal).count }) < 2 { usleep(100_000) }
        let all = captions.withLock { $0 }
        let finals = all.filter(\.isFinal)
        try #require(finals.count == 2, "\(all)")
        #expect(recall(finals[0].text, Self.sentences[0]) >= 0.6, "\(all)")
        #expect(recall(finals[1].text, Self.sentences[1]) >= 0.6, "\(all)")
        // Each final closes its utterance: what comes before the first final are its partials.
        let first = all.firstIndex { $0.isFinal }!
        #expect(all[..<first].allSatisfy { !$0.isFinal })
    }
}

@Suite struct WhisperConfigurationTests {
    /// $CAMAGENT_CAPTIONS_FINAL_BEAM=3000000000 trapped on the first final (made an Int32).
    @Test(arguments: [(3_000_000_000, 16), (17, 16), (5, 5), (0, 1), (-4, 1)])
    func theFinalBeamIsBounded(asked: Int, kept: Int) throws {
        #expect(try WhisperConfiguration(prefix: "/nonexistent", finalBeamSize: asked).finalBeamSize == kept)
    }
}
