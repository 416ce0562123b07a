import Glibc
import Encoders
import Logging
import MediaTypes
import Testing
@testable import Captions

/// Levels in dBFS, one per 20 ms frame.
private func run(_ detector: inout UtteranceDetector, _ levels: [Double]) -> [UtteranceDetector.Step] {
    levels.map { detector.feed(levelDB: $0) }
}

@Suite struct UtteranceDetectorTests {
    @Test func speechBetweenSilencesIsOneUtteranceThatEndsAfterThePause() {
        var d = UtteranceDetector()
        let steps = run(&d, Array(repeating: -90, count: 50) + Array(repeating: -20, count: 100) + Array(repeating: -90, count: 40))
        #expect(steps.filter { $0 == .started }.count == 1)
        #expect(steps.filter { $0 == .ended(keep: true) }.count == 1)
        // Starts on the third speech frame, ends on the 20th frame of the pause.
        #expect(steps.firstIndex(of: .started) == 52)
        #expect(steps.firstIndex(of: .ended(keep: true)) == 150 + 19)
    }

    @Test func shortPausesInsideASentenceDoNotEndIt() {
        var d = UtteranceDetector()
        var levels = Array(repeating: -90.0, count: 20)
        for _ in 0..<5 { levels += Array(repeating: -20, count: 30) + Array(repeating: -90, count: 10) }
        levels += Array(repeating: -90, count: 30)
        let steps = run(&d, levels)
        #expect(steps.filter { $0 == .started }.count == 1)
        #expect(steps.filter { if case .ended = $0 { true } else { false } }.count == 1)
    }

    @Test func aClickIsNoUtteranceAndABriefNoiseIsDropped() {
        var d = UtteranceDetector()
        var steps = run(&d, Array(repeating: -90, count: 20) + [-20, -20] + Array(repeating: -90, count: 30))
        #expect(!steps.contains(.started))
        steps = run(&d, Array(repeating: -20, count: 5) + Array(repeating: -90, count: 30))
        #expect(steps.contains(.started) && steps.contains(.ended(keep: false)))
    }

    @Test func longSpeechIsFinalisedAtTheWindowAndGoesOn() {
        var d = UtteranceDetector()
        // 20 s of talk without a pause: syllables at -20 dBFS, 40 ms dips between them.
        var talk: [Double] = []
        for _ in 0..<100 { talk += Array(repeating: -20, count: 8) + [-35, -35] }
        let steps = run(&d, Array(repeating: -90, count: 10) + talk)
        #expect(steps.filter { $0 == .ended(keep: true) }.count == 2)
        #expect(steps.filter { $0 == .started }.count == 3)
    }

    @Test func aModelsProbabilityStartsAtOneBarAndHoldsAtALowerOne() {
        var d = UtteranceDetector(settings: .silero)
        // 0.45 is below the bar to start: nothing, however long.
        var steps = Array(repeating: Float(0.45), count: 50).map { d.feed(speechProbability: $0) }
        #expect(!steps.contains(.started))
        // 0.6 starts one on its third frame; then 0.4 (between the bars) holds it for as long as it lasts...
        steps = (Array(repeating: Float(0.6), count: 10) + Array(repeating: 0.4, count: 100)).map { d.feed(speechProbability: $0) }
        #expect(steps.firstIndex(of: .started) == 2)
        #expect(!steps.contains { if case .ended = $0 { true } else { false } })
        // ...and below 0.35 for Silero's pause (15 frames, 300 ms) ends it.
        steps = Array(repeating: Float(0.1), count: 20).map { d.feed(speechProbability: $0) }
        #expect(steps.firstIndex(of: .ended(keep: true)) == 14)
        #expect(UtteranceDetector.Settings.silero.endFrames < UtteranceDetector.Settings().endFrames)
    }

    @Test func aSteadyNoiseFloorIsNotSpeech() {
        var d = UtteranceDetector()
        // A fan switched on at -40 dBFS: heard as speech until the floor has risen to it...
        _ = run(&d, Array(repeating: -90, count: 10) + Array(repeating: -40, count: 1500))
        #expect(d.floorDB > -45)
        // ...then it is silence, however long it lasts.
        let steady = run(&d, Array(repeating: -40, count: 3000))
        #expect(!steady.contains(.started))
        // Speech above that noise is found.
        let more = run(&d, Array(repeating: -15, count: 50) + Array(repeating: -40, count: 30))
        #expect(more.contains(.started) && more.contains(.ended(keep: true)))
    }

    @Test func levelOfFullScaleSineAndSilence() {
        let sine = (0..<320).map { Float(sin(Double($0) * 2 * Double.pi / 32)) }
        let level = sine.withUnsafeBufferPointer { UtteranceDetector.levelDB($0) }
        #expect(abs(level - -3.01) < 0.1)
        let zeros = [Float](repeating: 0, count: 320)
        #expect(zeros.withUnsafeBufferPointer { UtteranceDetector.levelDB($0) } == -100)
    }
}

@Suite struct TranscriptCleanupTests {
    @Test func nonSpeechTagsAndSpacesGo() {
        #expect(TranscriptCleanup.clean(" Hello,  world. ") == "Hello, world.")
        #expect(TranscriptCleanup.clean("[BLANK_AUDIO]") == "")
        #expect(TranscriptCleanup.clean(" (upbeat music) the door *coughs* opens") == "the door opens")
    }

    /// A final seen in CI: the tiny model said the sentence twice.
    @Test func aRepetitionLoopIsSaidOnce() {
        let once = "The camera on the front door records every visitor after dark."
        #expect(TranscriptCleanup.clean("\(once) \(once)") == once)
        #expect(TranscriptCleanup.clean("\(once) \(once) The camera on the") == once)
        #expect(TranscriptCleanup.clean("Yes. \(once) the camera on the front door records") == "Yes. \(once)")
        // Case and punctuation do not hide a loop; what follows it stays.
        #expect(TranscriptCleanup.clean("open the back door, Open the back door then leave") == "open the back door, then leave")
    }

    @Test func shortRepeatsAreSpeech() {
        #expect(TranscriptCleanup.clean("no no no") == "no no no")
        #expect(TranscriptCleanup.clean("I think I think so") == "I think I think so")
        #expect(TranscriptCleanup.clean("one two three, one two three four") == "one two three, one two three four")
    }
}

/// Says how many samples it was given, so the test sees what each call covered.
private final class CountingRecognizer: SpeechRecognizer, @unchecked Sendable {
    let calls = PThreadLocked<[Int]>([])
    func transcribe(_ samples: UnsafeBufferPointer<Float>, final: Bool, stop: RecognitionStop?) throws(CaptionError) -> String {
        calls.withLock { $0.append(samples.count) }
        return "heard \(samples.count / 1600) tenths"
    }
}

/// A recognizer whose partials take as long as anyone lets them (up to 10 s):
/// they end only when called off. Finals are instant.
private final class StallingRecognizer: SpeechRecognizer, @unchecked Sendable {
    /// Per call: final or not, and whether it was called off.
    let calls = PThreadLocked<[(final: Bool, stopped: Bool)]>([])
    func transcribe(_ samples: UnsafeBufferPointer<Float>, final: Bool, stop: RecognitionStop?) throws(CaptionError) -> String {
        if !final {
            for _ in 0..<1000 where stop?.isRequested != true { usleep(10_000) }
        }
        let stopped = stop?.isRequested == true
        calls.withLock { $0.append((final, stopped)) }
        if stopped { throw .recognitionStopped }
        return final ? "the final" : "a partial"
    }
}

private struct OneRecognizer: SpeechRecognizerFactory {
    let recognizer: any SpeechRecognizer & Sendable
    func makeRecognizer() throws(CaptionError) -> any SpeechRecognizer { recognizer }
}

private struct MissingEngine: SpeechRecognizerFactory {
    func makeRecognizer() throws(CaptionError) -> any SpeechRecognizer {
        throw .engineMissing(path: "/nowhere/libcamagent-whisper.so", reason: "no such file")
    }
}

@Suite struct StreamCaptionerTests {
    /// 20 ms Opus packets of a 48 kHz signal: `pattern` says per packet whether it is a tone burst or silence.
    private func packets(_ pattern: [Bool]) throws -> [[UInt8]] {
        let encoder = try OpusEncoder(channels: 1)
        var out: [[UInt8]] = []
        var pcm = [Int16](repeating: 0, count: 960)
        var n = 0
        for loud in pattern {
            for i in 0..<960 {
                // A voice-like mix of 200 and 700 Hz, or nothing.
                let t: Double = Double(n + i) / 48_000
                let low: Double = 8000 * sin(2 * Double.pi * 200 * t)
                let high: Double = 4000 * sin(2 * Double.pi * 700 * t)
                pcm[i] = loud ? Int16(low + high) : 0
            }
            n += 960
            var packet: [UInt8] = []
            pcm.withUnsafeBufferPointer { samples in
                try? encoder.encode(samples) { bytes in packet = Array(bytes) }
            }
            out.append(packet)
        }
        return out
    }

    @Test func partialsComeBeforeOneFinalPerUtterance() throws {
        let recognizer = CountingRecognizer()
        let captions = PThreadLocked<[Caption]>([])
        let captioner = try StreamCaptioner(streamID: "s", recognizers: OneRecognizer(recognizer: recognizer),
                                            logger: Logger(label: "test")) { caption in
            captions.withLock { $0.append(caption) }
        }
        defer { captioner.stop() }
        // Two utterances of 3 s and 1.2 s, a second of silence around each.
        let pattern = Array(repeating: false, count: 50) + Array(repeating: true, count: 150)
            + Array(repeating: false, count: 50) + Array(repeating: true, count: 60) + Array(repeating: false, count: 50)
        for (index, packet) in try packets(pattern).enumerated() {
            packet.withUnsafeBytes { captioner.receive(opusPayload: $0) }
            // Paced as a live stream would be: partials come only while the captioner keeps up
            // (a backlog skips them), so every half second of audio it is let catch up first.
            // Waiting for the captioner, not for a time, keeps this the same on a slow or busy
            // machine (and under AddressSanitizer, where it once got no partial before the final).
            if (index + 1) % 25 == 0 {
                let sent = Double(index + 1) * 0.02
                for _ in 0..<200 where captioner.statistics.audioSeconds < sent - 0.001 { usleep(10_000) }
            }
        }
        var finals = 0
        for _ in 0..<200 {   // at most 10 s
            finals = captions.withLock { $0.filter(\.isFinal).count }
            if finals == 2 { break }
            usleep(50_000)
        }
        let all = captions.withLock { $0 }
        #expect(finals == 2, "\(all)")
        // The first utterance (3 s + pause) ends with its final; partials of it come before.
        let firstFinal = try #require(all.firstIndex { $0.isFinal })
        #expect(all[..<firstFinal].allSatisfy { !$0.isFinal })
        #expect(firstFinal >= 1, "a partial before the first final: \(all)")
        // The final covers the utterance: ~3 s of speech, its 200 ms pre-roll and the first
        // 60 ms of the closing pause, where it was recognised (early: the rest is pause).
        let final = all[firstFinal].text
        #expect(final == "heard 32 tenths" || final == "heard 33 tenths", "\(all)")
        // The counters are brought up to date after each batch of packets.
        var stats = captioner.statistics
        for _ in 0..<100 where abs(stats.audioSeconds - Double(pattern.count) * 0.02) >= 0.1 {
            usleep(50_000)
            stats = captioner.statistics
        }
        #expect(stats.finals == 2 && stats.partials == UInt64(all.count - 2))
        #expect(abs(stats.audioSeconds - Double(pattern.count) * 0.02) < 0.1, "\(stats)")
    }

    /// A pause longer than the early final's 160 ms but shorter than the 400 ms that ends
    /// an utterance: the early final is recognised, speech comes back and voids it, and the
    /// one final covers both parts. Without early finals, the final covers the whole pause.
    @Test(arguments: [8, nil] as [Int?])
    func speechAfterAnEarlyFinalVoidsIt(earlyFinalPauseFrames: Int?) throws {
        let recognizer = CountingRecognizer()
        let captions = PThreadLocked<[Caption]>([])
        var settings = StreamCaptioner.Settings(partials: false)
        settings.earlyFinalPauseFrames = earlyFinalPauseFrames
        let captioner = try StreamCaptioner(streamID: "s", recognizers: OneRecognizer(recognizer: recognizer),
                                            settings: settings, logger: Logger(label: "test")) { caption in
            captions.withLock { $0.append(caption) }
        }
        defer { captioner.stop() }
        // 1 s of speech, a 300 ms pause, 1 s of speech, then silence.
        let pattern = Array(repeating: false, count: 20) + Array(repeating: true, count: 50) + Array(repeating: false, count: 15)
            + Array(repeating: true, count: 50) + Array(repeating: false, count: 40)
        for packet in try packets(pattern) {
            packet.withUnsafeBytes { captioner.receive(opusPayload: $0) }
        }
        for _ in 0..<200 where captions.withLock({ $0.isEmpty }) { usleep(50_000) }
        for _ in 0..<100 where captioner.statistics.audioSeconds < Double(pattern.count) * 0.02 - 0.03 { usleep(50_000) }
        let all = captions.withLock { $0 }
        // 200 ms of pre-roll + 1 s + 300 ms + 1 s (and a little of Opus's tail on the tone),
        // then the closing pause: 160 ms of it with early finals, all 400 ms without.
        #expect(all == [Caption(text: earlyFinalPauseFrames == nil ? "heard 28 tenths" : "heard 26 tenths", isFinal: true)],
                "\(all)")
        #expect(captioner.statistics.earlyFinalsDiscarded == (earlyFinalPauseFrames == nil ? 0 : 1))
    }

    /// Speech ends while a partial is being recognised: the partial is called off
    /// (it says nothing) and the final is recognised at once, not after it. Meanwhile
    /// the captioner goes on listening: the audio keeps being decoded.
    @Test func aPartialUnderWayIsCalledOffForTheFinal() throws {
        let recognizer = StallingRecognizer()
        let captions = PThreadLocked<[Caption]>([])
        let captioner = try StreamCaptioner(streamID: "s", recognizers: OneRecognizer(recognizer: recognizer),
                                            logger: Logger(label: "test")) { caption in
            captions.withLock { $0.append(caption) }
        }
        defer { captioner.stop() }
        // 1.6 s of speech between silences: a partial is asked for after a second of it.
        let pattern = Array(repeating: false, count: 20) + Array(repeating: true, count: 80) + Array(repeating: false, count: 40)
        for (index, packet) in try packets(pattern).enumerated() {
            packet.withUnsafeBytes { captioner.receive(opusPayload: $0) }
            if (index + 1) % 10 == 0 {   // paced: the captioner catches up every 200 ms of audio
                let sent = Double(index + 1) * 0.02
                for _ in 0..<200 where captioner.statistics.audioSeconds < sent - 0.001 { usleep(10_000) }
                // Listening does not wait for the stalled partial (at most 2 s here, 10 s for it).
                #expect(captioner.statistics.audioSeconds >= sent - 0.001, "the captioner stopped listening at \(sent) s")
            }
        }
        for _ in 0..<200 where captions.withLock({ $0.isEmpty }) { usleep(50_000) }
        #expect(captions.withLock { $0 } == [Caption(text: "the final", isFinal: true)])
        let calls = recognizer.calls.withLock { $0 }
        #expect(calls.count == 2 && calls[0] == (false, true) && calls[1] == (true, false), "\(calls)")
        #expect(captioner.statistics.partials == 0 && captioner.statistics.finals == 1)
    }

    @Test func partialsOffMeansFinalsOnly() throws {
        let recognizer = CountingRecognizer()
        let captions = PThreadLocked<[Caption]>([])
        var settings = StreamCaptioner.Settings(partials: false)
        settings.partialInterval = 0.2
        let captioner = try StreamCaptioner(streamID: "s", recognizers: OneRecognizer(recognizer: recognizer),
                                            settings: settings, logger: Logger(label: "test")) { caption in
            captions.withLock { $0.append(caption) }
        }
        defer { captioner.stop() }
        for packet in try packets(Array(repeating: false, count: 20) + Array(repeating: true, count: 100) + Array(repeating: false, count: 40)) {
            packet.withUnsafeBytes { captioner.receive(opusPayload: $0) }
        }
        for _ in 0..<200 where captions.withLock({ $0.isEmpty }) { usleep(50_000) }
        #expect(captions.withLock { $0 } .map(\.isFinal) == [true])
    }

    @Test func aMissingEngineIsAnErrorAtStart() {
        #expect(throws: CaptionError.engineMissing(path: "/nowhere/libcamagent-whisper.so", reason: "no such file")) {
            _ = try StreamCaptioner(streamID: "s", recognizers: MissingEngine(), logger: Logger(label: "test")) { _ in }
        }
    }

    @Test func theWhisperFactoryNamesWhatIsMissing() {
        do {
            let configuration = try WhisperConfiguration(prefix: "/nonexistent/captions", voiceDetection: .silero)
            _ = try WhisperRecognizerFactory(configuration: configuration)
            Issue.record("a factory over a missing install")
        } catch {
            #expect(error == .engineMissing(path: "/nonexistent/captions/lib/libcamagent-whisper.so", reason: "no such file"))
            #expect("\(error)".contains("scripts/install-captions"))
        }
    }

    @Test func audioContextFitsTheUtterance() throws {
        let c = try WhisperConfiguration(prefix: "/x")
        #expect(c.audioContext(forSamples: 16_000) == 512)      // 1 s: 50 + 100 margin, but at least 512
        #expect(c.audioContext(forSamples: 160_000) == 640)     // 10 s: 500 + 100 → 640
        #expect(c.audioContext(forSamples: 16_000 * 40) == 1500)
        #expect(try WhisperConfiguration(prefix: "/x", audioContext: 512).audioContext(forSamples: 16_000) == 512)
    }
}
