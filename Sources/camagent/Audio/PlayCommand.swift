import ArgumentParser
import AudioDevices
import MediaFiles
import MediaTypes

/// `camagent play FILE.wav --audio NAME`: renders a WAV through the render side.
struct PlayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play a 16-bit WAV file through an ALSA device (the render side of the audio driver).")

    @Argument(help: "A 16-bit PCM WAV file.")
    var file: String

    @Option(help: "ALSA playback device (default, hw:0,0, plughw:...).")
    var audio = "default"

    @Flag(help: "Print the summary as one JSON object on the last line.")
    var json = false

    @OptionGroup var global: GlobalOptions

    struct Summary: Encodable {
        var device: String
        var file: String
        var rate: Int
        var channels: Int
        var framesInFile: Int
        var framesPlayed: UInt64
        var underruns: UInt64
        var silenceChunks: UInt64
        var measuredRate: Double
        var renderDelayMs: Double
    }

    func run() throws {
        let wav: WAVFile
        do throws(MediaFileError) {
            wav = try WAVFile(path: file)
        } catch {
            printError("camagent: \(error)")
            throw ExitCode(ExitCodes.usage)
        }
        guard AudioDevices.hasSoundCard else { throw fail(AudioError.noSoundCard) }
        let format = AudioFormat(sampleRate: wav.sampleRate, channels: wav.channels)
        let device = ALSAAudioDevice(captureDevice: nil, renderDevice: audio, format: format, logger: global.makeLogger())
        do throws(AudioError) {
            try device.initializeRender()
        } catch {
            throw fail(error)
        }
        if let s = device.renderSettings, s.rateChanged {
            printError("camagent: \(audio) plays at \(s.format.sampleRate) Hz, the file is \(wav.sampleRate) Hz: use plughw: to resample")
        }
        printError("camagent: playing \(file) (\(format), \((Double(wav.samples.count / wav.channels) / Double(wav.sampleRate)).formatted(decimals: 2)) s) on \(audio)…")
        // Pad to whole chunks, plus a little silence: the end of a playback can be cut short.
        var samples = wav.samples
        let chunk = format.samplesPerChunk
        samples += [Int16](repeating: 0, count: (chunk - samples.count % chunk) % chunk + 10 * chunk)
        do throws(AudioError) {
            try device.startRender()
        } catch {
            throw fail(error)
        }
        // Feed the render queue as it empties; the card sets the pace.
        var offset = 0
        let wake = WakeEvent()
        let limit = MonotonicTimestamp.now() + .seconds(Int64(samples.count / chunk / 100 + 30))
        while offset < samples.count, MonotonicTimestamp.now() < limit, device.renderFailure == nil {
            let room = 40 - device.bus.queuedRenderChunks
            if room > 0 {
                let end = min(samples.count, offset + room * chunk)
                _ = samples[offset..<end].withUnsafeBufferPointer { device.bus.queueForRender($0) }   // room was checked
                offset = end
            }
            _ = wake.wait(milliseconds: 10)
        }
        while device.bus.queuedRenderChunks > 0, MonotonicTimestamp.now() < limit, device.renderFailure == nil {
            _ = wake.wait(milliseconds: 10)
        }
        let stats = device.renderStatistics
        device.stopRender()
        if let failure = device.renderFailure { throw fail(failure) }
        let summary = Summary(device: audio, file: file, rate: device.renderSettings?.format.sampleRate ?? wav.sampleRate,
                              channels: wav.channels, framesInFile: wav.samples.count / wav.channels,
                              framesPlayed: stats.frames, underruns: stats.xruns, silenceChunks: stats.silenceInserted,
                              measuredRate: stats.measuredRate, renderDelayMs: stats.delayMs)
        print("played:    \(summary.framesPlayed) frames, underruns \(summary.underruns), measured \(summary.measuredRate.formatted(decimals: 1)) Hz, render delay \(summary.renderDelayMs.formatted(decimals: 1)) ms")
        if json { print(JSONOutput.line(summary)) }
    }
}
