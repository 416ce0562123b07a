import ArgumentParser
import AudioDevices
import Dispatch
import Logging
import MediaFiles
import MediaTypes
import SystemdSupport
import VideoSources

/// `camagent capture`: capture from a camera or the test pattern, optionally
/// into a Y4M file, and print what was negotiated and a summary.
struct CaptureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "Capture video (to a Y4M file if asked) and print a summary.")

    @OptionGroup var video: VideoSourceOptions
    @OptionGroup var audioOptions: AudioOptions

    @Option(help: "Stop after this many frames.")
    var frames: Int?

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "Write the frames to this Y4M file (4:2:0 planar; ffmpeg and players read it).")
    var output: String?

    @Flag(help: "End with the summary as one JSON object on the last line.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if video.devices.count > 1 { throw ValidationError("capture takes one --device (publish takes several, one stream each)") }
        if let frames, frames < 1 { throw ValidationError("--frames must be at least 1") }
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
        if output != nil && !videoEnabled { throw ValidationError("--output writes video: give --device too") }
    }

    /// Video runs unless `--device none`, or audio is asked for with no `--device`.
    var videoEnabled: Bool {
        if video.device == "none" { return false }
        return !(audioOptions.isEnabled && video.device == nil)
    }

    func run() throws {
        let logger = global.makeLogger()
        guard videoEnabled || audioOptions.isEnabled else {
            throw ValidationError("nothing to capture: --device none without --audio")
        }

        // Audio first: a missing sound card should fail before the camera opens.
        var audioDevice: (any AudioDevice)?
        var audioSink: AudioSink?
        if audioOptions.isEnabled {
            do throws(AudioError) {
                let (device, warning) = try AudioCaptureChoice.make(
                    name: audioOptions.audio!, format: audioOptions.format, logger: logger,
                    debugStallMilliseconds: audioOptions.debugStallMs, reconnect: video.reconnect)
                if let warning { printError("camagent: \(warning)") }
                try device.initializeCapture()
                audioDevice = device
            } catch {
                throw fail(error)
            }
            do {
                audioSink = try AudioSink(outputPath: audioOptions.audioOutput, format: audioDevice!.captureSettings!.format)
            } catch {
                printError("camagent: \(error)")
                throw ExitCode(ExitCodes.outputError)
            }
            audioDevice!.bus.setCaptureConsumer(audioSink)
            if let s = audioDevice!.captureSettings {
                print("audio:     \(s.device): \(s.format), period \(s.periodFrames) frames, buffer \(s.bufferFrames) frames"
                      + (s.rateChanged ? " (asked \(s.requested.sampleRate) Hz)" : ""))
            }
        }

        var capture: (any VideoCapture)?
        var settings: CaptureSettings?
        if videoEnabled {
            let device = video.resolvedDevice(logger: logger)
            let c = video.makeCapture(device: device, logger: logger)
            do throws(CaptureError) {
                try c.initialize()
            } catch {
                throw fail(error)
            }
            capture = c
            settings = c.captureSettings
            if let settings { print(settings.negotiationText) }
        }

        let sink: CaptureSink
        do {
            sink = try CaptureSink(outputPath: output, format: settings?.outputFormat ?? .nv12(width: 2, height: 2, framesPerSecond: 0),
                                   frameLimit: videoEnabled ? frames : nil,
                                   fullRange: settings?.deviceFormat.pixelFormat.isCompressed ?? false)
        } catch {
            printError("camagent: \(error)")
            throw ExitCode(ExitCodes.outputError)
        }
        capture?.setConsumer(sink)
        let stopOnSignal = SignalStop { sink.finish() }
        let audioFailed = audioSink?.failed
        if let audioFailed {
            // An audio failure ends the whole capture, as a video failure does.
            DispatchQueue.global().async { audioFailed.wait(); sink.finish() }
        }
        do throws(AudioError) {
            try audioDevice?.startCapture()
        } catch {
            throw fail(error)
        }
        do throws(CaptureError) {
            try capture?.start()
        } catch {
            audioDevice?.stopCapture()
            throw fail(error)
        }
        let target = frames.map { "\($0) frames" } ?? duration.map { "\($0.formatted(decimals: 1)) s" } ?? "until interrupted"
        printError("camagent: capturing (\(target))…")
        sink.waitUntilFinished(duration: duration, frames: videoEnabled ? frames : nil,
                               framesPerSecond: settings?.grantedFramesPerSecond ?? 30, frameTimeout: video.frameTimeout)
        capture?.stop()
        capture?.release()
        audioDevice?.stopCapture()
        _ = stopOnSignal

        var report = CaptureReport()
        if let capture, let settings {
            report.video = sink.summary(settings: capture.captureSettings ?? settings, statistics: capture.statistics)
        } else {
            sink.closeWithoutSummary()
        }
        if let audioDevice, let audioSink, let s = audioDevice.captureSettings {
            let finished = audioSink.finish()
            let stats = audioDevice.captureStatistics
            var offset: Double?
            if let a = audioSink.firstTimestamp, let v = sink.firstTimestamp { offset = (a - v).milliseconds }
            report.audio = AudioSummary(
                device: s.device, requestedRate: s.requested.sampleRate, rate: s.format.sampleRate,
                channels: s.format.channels, periodFrames: s.periodFrames, chunks: finished.chunks, frames: stats.frames,
                xruns: stats.xruns, recoveries: stats.recoveries, measuredRate: stats.measuredRate,
                captureDelayMs: audioDevice.estimatedCaptureDelay.milliseconds, timestampsMonotonic: finished.monotonic,
                avOffsetMs: offset, output: audioOptions.audioOutput, events: finished.events,
                error: finished.failure?.description)
            report.audioFailure = finished.failure
            report.audioOutputError = finished.outputError
        }
        if let v = report.video { print(v.text) }
        if let a = report.audio { print(a.text) }
        if json { print(JSONOutput.line(report)) }
        if let error = report.video?.captureError { throw ExitCode(ExitCodes.code(for: error)) }
        if let error = report.audioFailure { throw ExitCode(ExitCodes.code(for: error)) }
        if let message = report.video?.outputError ?? report.audioOutputError {
            printError("camagent: \(message)")
            throw ExitCode(ExitCodes.outputError)
        }
    }
}

/// The capture summary: video keys at the top level, audio under "audio".
struct CaptureReport: Encodable {
    var video: CaptureSummary?
    var audio: AudioSummary?
    var audioFailure: AudioError?
    var audioOutputError: String?

    enum Keys: String, CodingKey { case audio }

    func encode(to encoder: any Encoder) throws {
        try video?.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(audio, forKey: .audio)
    }
}

/// The capture command's consumer: counts frames, checks timestamps, writes
/// the Y4M file, and tells the main thread when to stop.
final class CaptureSink: VideoCaptureConsumer, @unchecked Sendable {  // mutable state behind `state`
    private struct State {
        var writer: Y4MWriter?
        var frames = 0
        var firstTimestamp: MonotonicTimestamp?
        var lastTimestamp: MonotonicTimestamp?
        var nonMonotonic = 0
        var events: [String] = []
        var captureError: CaptureError?
        var outputError: String?
        var finished = false
    }
    private let state: PThreadLocked<State>
    private let frameLimit: Int?
    private let done = DispatchSemaphore(value: 0)
    let outputPath: String?
    private let startedAt = MonotonicTimestamp.now()

    init(outputPath: String?, format: VideoFormat, frameLimit: Int?, fullRange: Bool) throws {
        self.outputPath = outputPath
        self.frameLimit = frameLimit
        var initial = State()
        if let outputPath {
            initial.writer = try Y4MWriter(path: outputPath, width: format.width, height: format.height,
                                           framesPerSecond: format.estimatedFramesPerSecond, fullRange: fullRange)
        }
        state = PThreadLocked(initial)
    }

    func consume(_ frame: VideoFrame) {
        let reachedLimit: Bool = state.withLock { s in
            guard !s.finished else { return false }
            if let last = s.lastTimestamp, frame.timestamp <= last { s.nonMonotonic += 1 }
            if s.firstTimestamp == nil { s.firstTimestamp = frame.timestamp }
            s.lastTimestamp = frame.timestamp
            if s.writer != nil {
                do {
                    try s.writer!.write(frame)
                } catch {
                    s.outputError = "\(error)"
                    s.finished = true
                    return true
                }
            }
            s.frames += 1
            if let limit = frameLimit, s.frames >= limit {
                s.finished = true
                return true
            }
            return false
        }
        if reachedLimit { done.signal() }
    }

    func captureEvent(_ event: CaptureEvent) {
        printError("camagent: \(event)")
        let ends: Bool = state.withLock { s in
            s.events.append(event.description)
            if case .failed(let error) = event {
                s.captureError = error
                s.finished = true
                return true
            }
            return false
        }
        if ends { done.signal() }
    }

    /// Ends the capture early (Ctrl-C).
    func finish() {
        state.withLock { $0.finished = true }
        done.signal()
    }

    /// Blocks until the duration passes, the frame limit is reached, capture
    /// fails, or the run is interrupted. Never forever: a frame limit alone
    /// waits at most ten times its nominal length plus a minute.
    func waitUntilFinished(duration: Double?, frames: Int?, framesPerSecond: Double, frameTimeout: Double) {
        let seconds: Double
        if let duration {
            seconds = duration
        } else if let frames {
            seconds = Double(frames) / max(framesPerSecond, 1) * 10 + frameTimeout + 60
        } else {
            done.wait()
            return
        }
        // At most ten years: a huge --duration or --frames must not overflow the Int of milliseconds.
        _ = done.wait(timeout: .now() + .milliseconds(Int(min(seconds, 10 * 365 * 86_400) * 1000)))
        state.withLock { $0.finished = true }
    }

    /// The first frame's timestamp, for the audio/video offset.
    var firstTimestamp: MonotonicTimestamp? { state.withLock { $0.firstTimestamp } }

    /// Closes the output without a video summary (audio-only runs).
    func closeWithoutSummary() {
        state.withLock { s in
            if let writer = s.writer { try? writer.close(); s.writer = nil }
        }
    }

    func summary(settings: CaptureSettings, statistics: CaptureStatistics) -> CaptureSummary {
        state.withLock { s in
            if let writer = s.writer {
                do { try writer.close() } catch { s.outputError = "\(error)" }
                s.writer = nil
            }
            return CaptureSummary(
                device: settings.device, card: settings.card, driver: settings.driver, busInfo: settings.busInfo,
                format: settings.deviceFormat.pixelFormat.name, outputFormat: "NV12",
                width: settings.outputFormat.width, height: settings.outputFormat.height,
                requestedFps: settings.requestedFramesPerSecond, grantedFps: settings.grantedFramesPerSecond,
                frames: s.frames, measuredFps: statistics.measuredFramesPerSecond,
                dropped: statistics.framesDropped + statistics.framesSkippedForNewer,
                droppedByDriver: statistics.framesDroppedByDriver, corrupt: statistics.framesCorrupt,
                tooShort: statistics.framesTooShort, badJPEG: statistics.framesBadJPEG,
                skippedForNewer: statistics.framesSkippedForNewer, consumerBusy: statistics.framesDroppedConsumerBusy,
                timestampsRejected: statistics.timestampsRejected, timestampsMonotonic: s.nonMonotonic == 0,
                reconnects: statistics.reconnects,
                latencyP50Ms: Double(statistics.latencyP50Nanoseconds) / 1e6,
                latencyP99Ms: Double(statistics.latencyP99Nanoseconds) / 1e6,
                durationSeconds: (MonotonicTimestamp.now() - startedAt).secondsDouble,
                rotation: settings.orientation.rotation.rawValue, mirrored: settings.orientation.mirrored,
                output: outputPath, events: s.events, error: s.captureError?.description,
                captureError: s.captureError, outputError: s.outputError)
        }
    }
}

/// What `capture` prints at the end (and as JSON with --json).
struct CaptureSummary: Encodable {
    var device, card, driver, busInfo, format, outputFormat: String
    var width, height: Int
    var requestedFps, grantedFps: Double
    var frames: Int
    var measuredFps: Double
    var dropped, droppedByDriver, corrupt, tooShort, badJPEG, skippedForNewer, consumerBusy, timestampsRejected: UInt64
    var timestampsMonotonic: Bool
    var reconnects: UInt64
    var latencyP50Ms, latencyP99Ms, durationSeconds: Double
    var rotation: Int
    var mirrored: Bool
    var output: String?
    var events: [String]
    var error: String?
    var captureError: CaptureError?
    var outputError: String?

    enum CodingKeys: String, CodingKey {
        case device, card, driver, busInfo, format, outputFormat, width, height, requestedFps, grantedFps, frames
        case measuredFps, dropped, droppedByDriver, corrupt, tooShort, badJPEG, skippedForNewer, consumerBusy
        case timestampsRejected, timestampsMonotonic, reconnects, latencyP50Ms, latencyP99Ms, durationSeconds
        case rotation, mirrored, output, events, error, outputError
    }

    var text: String {
        """
        frames:    \(frames) in \(durationSeconds.formatted(decimals: 2)) s, measured \(measuredFps.formatted(decimals: 2)) fps
        dropped:   \(dropped) (driver gaps \(droppedByDriver), corrupt \(corrupt), short \(tooShort), bad JPEG \(badJPEG), skipped for newer \(skippedForNewer), consumer busy \(consumerBusy))
        latency:   kernel timestamp → consumer p50 \(latencyP50Ms.formatted(decimals: 3)) ms, p99 \(latencyP99Ms.formatted(decimals: 3)) ms
        """ + (reconnects > 0 ? "\nreconnects: \(reconnects)" : "") + (output.map { "\noutput:    \($0)" } ?? "")
    }
}

#if canImport(Glibc)
import Glibc
#endif
