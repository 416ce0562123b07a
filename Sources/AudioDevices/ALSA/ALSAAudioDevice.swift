import Logging
import MediaTypes

/// An ALSA sound card as an OpenTok-style audio device: a capture side and a
/// render side, each opened by ALSA name ("default", "hw:1,0", "plughw:...",
/// "hw:Loopback,1,0") and run on its own thread paced by the card.
public final class ALSAAudioDevice: AudioDevice {
    public let bus: AudioBus
    private let capture: ALSASide?
    private let render: ALSASide?

    /// `captureDevice` / `renderDevice`: ALSA names, or nil for a side not used.
    public convenience init(captureDevice: String?, renderDevice: String?, format: AudioFormat,
                            logger: Logger, debugStallMilliseconds: Int = 0) {
        self.init(captureDevice: captureDevice, renderDevice: renderDevice, format: format,
                  system: LibASoundPCM(), logger: logger, debugStallMilliseconds: debugStallMilliseconds)
    }

    init(captureDevice: String?, renderDevice: String?, format: AudioFormat, system: any PCMSystem,
         logger: Logger, debugStallMilliseconds: Int = 0) {
        let bus = AudioBus(renderFormat: format)
        self.bus = bus
        capture = captureDevice.map {
            ALSASide(name: $0, direction: .capture, requested: format, system: system, bus: bus, logger: logger,
                     stallOnceMilliseconds: debugStallMilliseconds)
        }
        render = renderDevice.map {
            ALSASide(name: $0, direction: .playback, requested: format, system: system, bus: bus, logger: logger)
        }
    }

    public var captureSettings: AudioSettings? { capture?.settings }
    public var renderSettings: AudioSettings? { render?.settings }

    public func initializeCapture() throws(AudioError) {
        guard let capture else { throw .noSuchDevice(device: "(no capture device given)") }
        try capture.initialize()
    }

    public func startCapture() throws(AudioError) {
        guard let capture else { throw .noSuchDevice(device: "(no capture device given)") }
        try capture.start()
    }

    public func stopCapture() { capture?.stop() }
    public var isCapturing: Bool { capture?.isRunning ?? false }

    public func initializeRender() throws(AudioError) {
        guard let render else { throw .noSuchDevice(device: "(no render device given)") }
        try render.initialize()
    }

    public func startRender() throws(AudioError) {
        guard let render else { throw .noSuchDevice(device: "(no render device given)") }
        try render.start()
    }

    public func stopRender() { render?.stop() }
    public var isRendering: Bool { render?.isRunning ?? false }

    /// Waits for queued playback to reach the speaker.
    public func drainRender() { render?.drain() }

    public var estimatedCaptureDelay: Duration { capture?.estimatedDelay ?? .zero }
    public var estimatedRenderDelay: Duration { render?.estimatedDelay ?? .zero }
    public var captureStatistics: AudioStatistics { capture?.statistics ?? AudioStatistics() }
    public var renderStatistics: AudioStatistics { render?.statistics ?? AudioStatistics() }
    /// Why capture or render stopped on its own, if it did.
    public var captureFailure: AudioError? { capture?.failure }
    public var renderFailure: AudioError? { render?.failure }
}

/// Capture for a box with no sound card: 10 ms chunks of silence (or, as
/// the audio twin of the test pattern, a sine tone), paced by the monotonic
/// clock on an absolute schedule, so it does not drift.
public final class SilentAudioCapture: AudioDevice {
    public let bus: AudioBus
    private let format: AudioFormat
    private let side: SilentSide
    private let name: String

    /// `toneFrequency`: a sine at that frequency and `level` (0...1 of full
    /// scale) instead of silence.
    public init(format: AudioFormat, toneFrequency: Double? = nil, level: Double = 0.25) {
        self.format = format
        bus = AudioBus(renderFormat: format)
        side = SilentSide(format: format, bus: bus, tone: toneFrequency.map { ($0, level) })
        name = toneFrequency.map { "test-tone \(Int($0)) Hz" } ?? "silence"
    }

    public var captureSettings: AudioSettings? {
        AudioSettings(device: name, direction: .capture, requested: format, format: format,
                      periodFrames: format.framesPerChunk, bufferFrames: format.framesPerChunk)
    }
    public var renderSettings: AudioSettings? { nil }
    public func initializeCapture() throws(AudioError) {}
    public func startCapture() throws(AudioError) { side.start() }
    public func stopCapture() { side.stop() }
    public var isCapturing: Bool { side.isRunning }
    public func initializeRender() throws(AudioError) { throw .noSoundCard }
    public func startRender() throws(AudioError) { throw .noSoundCard }
    public func stopRender() {}
    public var isRendering: Bool { false }
    public var estimatedCaptureDelay: Duration { .zero }
    public var estimatedRenderDelay: Duration { .zero }
    public var captureStatistics: AudioStatistics { side.statistics }
    public var renderStatistics: AudioStatistics { AudioStatistics() }

    private final class SilentSide: @unchecked Sendable {  // thread and counters behind `lock`
        let format: AudioFormat
        let bus: AudioBus
        let tone: (frequency: Double, level: Double)?
        let wake = WakeEvent()
        private let lock = Synchronization.Mutex<(thread: DeviceThread?, stats: AudioStatistics, stop: Bool)>((nil, AudioStatistics(), false))

        init(format: AudioFormat, bus: AudioBus, tone: (Double, Double)?) {
            self.format = format
            self.bus = bus
            self.tone = tone
        }

        var isRunning: Bool { lock.withLock { $0.thread != nil } }
        var statistics: AudioStatistics { lock.withLock { $0.stats } }

        func start() {
            lock.withLock { s in
                guard s.thread == nil else { return }
                s.stop = false
                s.thread = DeviceThread(name: "camagent-silence") { [self] in run() }
            }
        }

        func stop() {
            let t: DeviceThread? = lock.withLock { s in
                s.stop = true
                defer { s.thread = nil }
                return s.thread
            }
            wake.signal()
            if let t, !t.isCurrent { t.join() }
        }

        /// One chunk of the sine, the same value on every channel; phase from
        /// the absolute frame index, so chunks join without clicks.
        private func fillTone(_ samples: UnsafeMutableBufferPointer<Int16>, _ tone: (frequency: Double, level: Double),
                              firstFrame: Int64) {
            let step = 2 * Double.pi * tone.frequency / Double(format.sampleRate)
            let amplitude = 32767 * min(max(tone.level, 0), 1)
            for frame in 0..<format.framesPerChunk {
                let phase = (Double((firstFrame + Int64(frame)) % Int64(format.sampleRate))) * step
                let value = Int16(amplitude * sin(phase))
                for channel in 0..<format.channels { samples[frame * format.channels + channel] = value }
            }
        }

        private func run() {
            let samples = UnsafeMutableBufferPointer<Int16>.allocate(capacity: format.samplesPerChunk)
            samples.initialize(repeating: 0)
            defer { samples.deallocate() }
            let start = MonotonicTimestamp.now()
            var index: Int64 = 0
            while !lock.withLock({ $0.stop }) {
                let due = start + .milliseconds(10 * index)
                let wait = (due - MonotonicTimestamp.now()).milliseconds
                if wait > 0 { _ = wake.wait(milliseconds: Int32(wait.rounded(.up))); continue }
                if let tone { fillTone(samples, tone, firstFrame: index * Int64(format.framesPerChunk)) }
                bus.deliverCaptured(AudioChunk(timestamp: due, format: format, samples: UnsafeBufferPointer(samples)))
                index += 1
                let now = MonotonicTimestamp.now()
                lock.withLock { s in
                    s.stats.chunks += 1
                    s.stats.frames += UInt64(format.framesPerChunk)
                    // The first chunk is due at the start: rate over the chunks after it.
                    if now > start { s.stats.measuredRate = Double(s.stats.frames - UInt64(format.framesPerChunk)) / (now - start).secondsDouble }
                }
            }
        }
    }
}

import Synchronization
#if canImport(Glibc)
import Glibc
#endif
