#if canImport(Glibc)
import Glibc
#endif
import MediaTypes

/// Capture for a box with no sound card: 10 ms chunks of silence (or, as
/// the audio twin of the test pattern, a sine tone; or a recording played
/// once, then silence), paced by the monotonic clock on an absolute
/// schedule, so it does not drift.
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
        side = SilentSide(format: format, bus: bus, tone: toneFrequency.map { ($0, level) }, clip: nil)
        name = toneFrequency.map { "test-tone \(Int($0)) Hz" } ?? "silence"
    }

    /// What happens to a recording being played.
    public enum ClipEvent: Sendable {
        /// Its first sample is in the chunk captured at this time.
        case started(MonotonicTimestamp)
        /// Its last sample is in the chunk captured at this time; silence follows.
        case ended(MonotonicTimestamp)
    }

    /// Plays `samples` (interleaved, in `format` already) once at real-time
    /// pace, then silence; `name` is what the settings show (file:PATH).
    public init(format: AudioFormat, playing samples: [Int16], name: String,
                events: @escaping @Sendable (ClipEvent) -> Void = { _ in }) {
        self.format = format
        bus = AudioBus(renderFormat: format)
        side = SilentSide(format: format, bus: bus, tone: nil, clip: (samples, events))
        self.name = name
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
        let clip: (samples: [Int16], events: @Sendable (ClipEvent) -> Void)?
        private let lock = PThreadLocked<(thread: StoppableThread?, stats: AudioStatistics)>((nil, AudioStatistics()))

        init(format: AudioFormat, bus: AudioBus, tone: (Double, Double)?,
             clip: ([Int16], @Sendable (ClipEvent) -> Void)?) {
            self.format = format
            self.bus = bus
            self.tone = tone
            self.clip = clip
        }

        var isRunning: Bool { lock.withLock { $0.thread != nil } }
        var statistics: AudioStatistics { lock.withLock { $0.stats } }

        func start() {
            lock.withLock { s in
                guard s.thread == nil else { return }
                s.thread = StoppableThread(name: "camagent-silence") { [self] signal in run(signal) }
            }
        }

        func stop() {
            let t: StoppableThread? = lock.withLock { s in
                defer { s.thread = nil }
                return s.thread
            }
            t?.stop()
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

        /// The recording's next chunk, or silence after its end.
        private func fillClip(_ samples: UnsafeMutableBufferPointer<Int16>,
                              _ clip: (samples: [Int16], events: @Sendable (ClipEvent) -> Void),
                              chunk: Int64, at due: MonotonicTimestamp) {
            let start = Int(chunk) * format.samplesPerChunk
            let end = min(start + format.samplesPerChunk, clip.samples.count)
            for i in 0..<format.samplesPerChunk { samples[i] = start + i < end ? clip.samples[start + i] : 0 }
            if chunk == 0 && !clip.samples.isEmpty { clip.events(.started(due)) }
            if start < clip.samples.count && end == clip.samples.count { clip.events(.ended(due)) }
        }

        private func run(_ signal: StopSignal) {
            let samples = UnsafeMutableBufferPointer<Int16>.allocate(capacity: format.samplesPerChunk)
            samples.initialize(repeating: 0)
            defer { samples.deallocate() }
            let start = MonotonicTimestamp.now()
            var index: Int64 = 0
            while !signal.isStopRequested {
                let due = start + .milliseconds(10 * index)
                let wait = (due - MonotonicTimestamp.now()).milliseconds
                if wait > 0 { signal.wait(milliseconds: Int32(wait.rounded(.up))); continue }
                if let tone { fillTone(samples, tone, firstFrame: index * Int64(format.framesPerChunk)) }
                if let clip { fillClip(samples, clip, chunk: index, at: due) }
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
