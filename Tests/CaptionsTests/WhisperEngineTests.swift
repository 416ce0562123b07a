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
        let recognizer = try WhisperRecognizer(configuration: WhisperConfiguration())
        let speech = try speak(Self.sentences[0])
        let samples = speech.converted(toRate: 16_000, channels: 1).map { Float($0) / 32768 }
        let text = try samples.withUnsafeBufferPointer { try recognizer.transcribe($0, final: true) }
        #expect(recall(text, Self.sentences[0]) >= 0.6, "heard: \(text)")
    }

    @Test func thePipelineCaptionsTwoUtterancesOverOpus() throws {
        let captions = PThreadLocked<[Caption]>([])
        let captioner = try StreamCaptioner(streamID: "s", recognizers: try WhisperRecognizerFactory(),
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
        let encoder = try OpusEncoder(channels: 1)
        for start in stride(from: 0, to: pcm.count - 960, by: 960) {
            try pcm[start..<start + 960].withUnsafeBufferPointer { frame in
                try encoder.encode(frame) { captioner.receive(opusPayload: $0) }
            }
            usleep(2_000)   // faster than real time, not all at once
        }
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
