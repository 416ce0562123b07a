import ArgumentParser
import AudioDevices
import Dispatch
import Logging
import MediaFiles
import MediaTypes
import Foundation

/// Audio options shared by capture (and later publish).
struct AudioOptions: ParsableArguments {
    @Option(help: "Audio capture device: an ALSA name (default, hw:1,0, plughw:...), 'auto' (the default device, or silence on a box with no sound card), or 'none'.")
    var audio: String?

    @Option(help: "Sample rate in Hz (the nearest the device offers is used and reported).")
    var rate = 48_000

    @Option(help: "Channels: 1 or 2.")
    var channels = 1

    @Option(help: "Write the captured audio to this WAV file.")
    var audioOutput: String?

    @Option(help: .hidden)
    var debugStallMs = 0

    func validate() throws {
        guard [8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000].contains(rate) else {
            throw ValidationError("--rate takes a common rate such as 16000 or 48000")
        }
        guard channels == 1 || channels == 2 else { throw ValidationError("--channels takes 1 or 2") }
        if audioOutput != nil && (audio == nil || audio == "none") {
            throw ValidationError("--audio-output needs --audio")
        }
    }

    var isEnabled: Bool { audio != nil && audio != "none" }
    var format: AudioFormat { AudioFormat(sampleRate: rate, channels: channels) }
}

extension ExitCodes {
    /// No sound card on the box while a specific audio device was asked for.
    static let noSoundCard: Int32 = 72

    static func code(for error: AudioError) -> Int32 {
        switch error {
        case .noSoundCard: noSoundCard
        case .noSuchDevice: noSuchDevice
        case .busy: busy
        case .permissionDenied: permissionDenied
        case .formatNotSupported: unsupportedFormat
        case .deviceLost: deviceLost
        case .driverError: driverError
        }
    }
}

func fail(_ error: AudioError) -> ExitCode {
    printFailure("\(error)")
    return ExitCode(ExitCodes.code(for: error))
}

/// Records captured chunks to a WAV file and keeps the numbers for the summary.
final class AudioSink: AudioCaptureConsumer, Sendable {
    private struct State {
        var writer: WAVWriter?
        var firstTimestamp: MonotonicTimestamp?
        var lastTimestamp: MonotonicTimestamp?
        var chunks = 0
        var nonMonotonic = 0
        var failure: AudioError?
        var outputError: String?
        var events: [String] = []
    }
    private let state: PThreadLocked<State>
    let failed = DispatchSemaphore(value: 0)

    init(outputPath: String?, format: AudioFormat) throws {
        var s = State()
        if let outputPath { s.writer = try WAVWriter(path: outputPath, sampleRate: format.sampleRate, channels: format.channels) }
        state = PThreadLocked(s)
    }

    func consume(_ chunk: AudioChunk) {
        state.withLock { s in
            if let last = s.lastTimestamp, chunk.timestamp <= last { s.nonMonotonic += 1 }
            if s.firstTimestamp == nil { s.firstTimestamp = chunk.timestamp }
            s.lastTimestamp = chunk.timestamp
            s.chunks += 1
            if s.writer != nil, s.outputError == nil {
                do { try s.writer!.write(chunk.samples) } catch { s.outputError = "\(error)" }
            }
        }
    }

    func audioEvent(_ event: AudioEvent) {
        printError("camagent: audio: \(event)")
        let ends: Bool = state.withLock { s in
            s.events.append(event.description)
            if case .failed(let e) = event { s.failure = e; return true }
            return false
        }
        if ends { failed.signal() }
    }

    var firstTimestamp: MonotonicTimestamp? { state.withLock { $0.firstTimestamp } }

    func finish() -> (chunks: Int, monotonic: Bool, failure: AudioError?, outputError: String?, events: [String]) {
        state.withLock { s in
            if let w = s.writer {
                do { try w.close() } catch { s.outputError = "\(error)" }
                s.writer = nil
            }
            return (s.chunks, s.nonMonotonic == 0, s.failure, s.outputError, s.events)
        }
    }
}

/// The audio part of the capture summary.
struct AudioSummary: Encodable {
    var device: String
    var requestedRate: Int
    var rate: Int
    var channels: Int
    var periodFrames: Int
    var chunks: Int
    var frames: UInt64
    var xruns: UInt64
    var recoveries: UInt64
    var measuredRate: Double
    var captureDelayMs: Double
    var timestampsMonotonic: Bool
    /// First audio chunk minus first video frame, on the same clock (when both ran).
    var avOffsetMs: Double?
    var output: String?
    var events: [String]
    var error: String?

    var text: String {
        var t = "audio:     \(device) \(rate) Hz \(channels) ch, \(chunks) chunks of 10 ms, \(frames) frames, measured \(measuredRate.formatted(decimals: 1)) Hz"
        t += "\n           xruns \(xruns) (recovered \(recoveries)), capture delay \(captureDelayMs.formatted(decimals: 1)) ms"
        if let avOffsetMs { t += ", a/v offset \(avOffsetMs.formatted(decimals: 1)) ms" }
        if rate != requestedRate { t += "\n           asked \(requestedRate) Hz, the device gave \(rate) Hz" }
        if let output { t += "\naudio out: \(output)" }
        return t
    }
}
