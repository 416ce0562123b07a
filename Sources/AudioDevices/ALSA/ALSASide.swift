#if canImport(Glibc)
import Glibc
#endif
import Logging
import MediaTypes

/// One direction of an ALSA device (capture or playback) with its own thread,
/// paced by the sound card: the thread waits on the PCM's poll descriptors,
/// never on a sleep, and moves one 10 ms chunk per wake-up or more.
final class ALSASide: @unchecked Sendable {  // `pcm` and the buffers belong to the side's thread while it runs
    let name: String
    let direction: AudioDirection
    let requested: AudioFormat
    private let system: any PCMSystem
    private let logger: Logger
    private let bus: AudioBus
    /// How often to retry a busy device before giving up, and how long to wait between tries.
    static let busyRetries = 5
    static let busyRetryInterval: Int32 = 200

    private struct State: @unchecked Sendable {  // PCMHandle is a value; the thread is joined under `stop`
        var pcm: PCMHandle?
        var configuration: PCMConfiguration?
        var thread: StoppableThread?
        var statistics = AudioStatistics()
        var failure: AudioError?
        var busyRetriesUsed = 0
    }
    private let state = PThreadLocked(State())

    /// Debug hook for tests: stop reading for this long once, after the first chunk, to provoke an overrun.
    let stallOnceMilliseconds: Int
    /// Capture: when the device goes away (unplugged, driver unbound), wait for
    /// it and go on, instead of failing.
    let reconnect: Bool
    /// How often a lost device is looked for.
    static let reconnectInterval: Int32 = 500

    init(name: String, direction: AudioDirection, requested: AudioFormat, system: any PCMSystem,
         bus: AudioBus, logger: Logger, stallOnceMilliseconds: Int = 0, reconnect: Bool = false) {
        self.reconnect = reconnect
        self.name = name
        self.direction = direction
        self.requested = requested
        self.system = system
        self.bus = bus
        self.logger = logger
        self.stallOnceMilliseconds = stallOnceMilliseconds
    }

    deinit {
        stop()
        if let pcm = state.withLock({ $0.pcm }) { system.close(pcm) }
    }

    var settings: AudioSettings? {
        state.withLock { s in
            s.configuration.map {
                AudioSettings(device: name, direction: direction, requested: requested, format: $0.format,
                              periodFrames: $0.periodFrames, bufferFrames: $0.bufferFrames)
            }
        }
    }

    var statistics: AudioStatistics { state.withLock { $0.statistics } }
    var failure: AudioError? { state.withLock { $0.failure } }
    var isRunning: Bool { state.withLock { $0.thread != nil && $0.failure == nil } }
    var busyRetriesUsed: Int { state.withLock { $0.busyRetriesUsed } }

    var estimatedDelay: Duration {
        state.withLock { s in
            guard let c = s.configuration, c.format.sampleRate > 0 else { return .zero }
            let ms = s.statistics.delayMs > 0 ? s.statistics.delayMs : Double(c.periodFrames) * 1000 / Double(c.format.sampleRate)
            return .microseconds(Int64(ms * 1000))
        }
    }

    /// Opens (retrying a busy device a few times) and negotiates.
    func initialize() throws(AudioError) {
        if state.withLock({ $0.pcm != nil }) { return }
        var attempt = 0
        var pcm: PCMHandle?
        while pcm == nil {
            switch system.open(name, direction: direction) {
            case .success(let h):
                pcm = h
            case .failure(let e):
                if e.code == EBUSY && attempt < Self.busyRetries {
                    attempt += 1
                    state.withLock { $0.busyRetriesUsed = attempt }
                    usleep(UInt32(Self.busyRetryInterval) * 1000)   // before any thread: nothing to wake it
                    continue
                }
                throw Self.openError(e.code, name: name)
            }
        }
        let handle = pcm!
        let period = requested.framesPerChunk
        switch system.configure(handle, format: requested, periodFrames: period, periods: 4, direction: direction) {
        case .success(let c):
            state.withLock {
                $0.pcm = handle
                $0.configuration = c
            }
            if c.format.sampleRate != requested.sampleRate {
                logger.notice("the device does not do the rate asked for; using the nearest", metadata: [
                    "device": "\(name)", "asked": "\(requested.sampleRate)", "granted": "\(c.format.sampleRate)",
                ])
            }
        case .failure(let e):
            system.close(handle)
            switch e {
            case .formatNotSupported(let reason):
                throw .formatNotSupported(device: name, requested: requested, reason: reason)
            case .failed(let op, let code):
                throw Self.streamError(code, name: name, operation: op)
            }
        }
    }

    static func openError(_ code: Int32, name: String) -> AudioError {
        switch code {
        case ENOENT, ENODEV, ENXIO: .noSuchDevice(device: name)
        case EBUSY: .busy(device: name)
        case EACCES, EPERM: .permissionDenied(device: name)
        default: .driverError(device: name, operation: "snd_pcm_open", code: code)
        }
    }

    static func streamError(_ code: Int32, name: String, operation: String) -> AudioError {
        switch code {
        case ENODEV, EBADFD, ENXIO, EIO: .deviceLost(device: name)
        default: .driverError(device: name, operation: operation, code: code)
        }
    }

    func start() throws(AudioError) {
        try initialize()
        let started: Bool = state.withLock { s in
            guard s.thread == nil, let pcm = s.pcm, let c = s.configuration else { return false }
            s.failure = nil
            let job = Job(pcm: pcm, configuration: c)
            s.thread = StoppableThread(name: direction == .capture ? "camagent-mic" : "camagent-spk") { [self] signal in
                if direction == .capture {
                    // A lost microphone that comes back is a new job: its buffers may differ.
                    var current = job
                    while let next = captureLoop(current, signal) { current = next }
                } else {
                    renderLoop(job, signal)
                }
            }
            return true
        }
        _ = started
    }

    func stop() {
        let thread: StoppableThread? = state.withLock { s in
            defer { s.thread = nil }
            return s.thread
        }
        guard let thread else { return }
        thread.stop()
        if let pcm = state.withLock({ $0.pcm }) {
            system.drop(pcm)
            // Prepared again so a later start works.
            _ = system.recover(pcm, error: -EPIPE)
        }
    }

    /// Lets the card play out what is queued (render side), bounded by the buffer length.
    func drain() {
        if let pcm = state.withLock({ $0.pcm }) { system.drain(pcm) }
    }

    /// Buffers for one side's thread, sized once.
    private final class Job: @unchecked Sendable {  // used by the side's thread only
        let pcm: PCMHandle
        let configuration: PCMConfiguration
        let period: UnsafeMutableBufferPointer<Int16>
        let chunk: UnsafeMutableBufferPointer<Int16>
        init(pcm: PCMHandle, configuration: PCMConfiguration) {
            self.pcm = pcm
            self.configuration = configuration
            period = .allocate(capacity: max(configuration.periodFrames, 1) * configuration.format.channels)
            chunk = .allocate(capacity: configuration.format.samplesPerChunk)
            period.initialize(repeating: 0)
            chunk.initialize(repeating: 0)
        }
        deinit {
            period.deallocate()
            chunk.deallocate()
        }
    }

    private func fail(_ error: AudioError) {
        state.withLock { $0.failure = error }
        logger.error("\(error)")
        bus.captureEvent(.failed(error))
    }

    /// Handles a negative return from read/write: true to go on.
    private func handle(_ result: Int, _ job: Job, operation: String) -> Bool {
        let code = Int32(-result)
        switch code {
        case EAGAIN:
            return true
        case EPIPE, ESTRPIPE:
            state.withLock { s in
                if code == EPIPE { s.statistics.xruns += 1 } else { s.statistics.suspends += 1 }
            }
            var r = system.recover(job.pcm, error: -code)
            // After an overrun, recover only prepares the capture PCM: it must be started again.
            if r == 0 && direction == .capture { r = system.start(job.pcm) }
            guard r == 0 else {
                fail(Self.streamError(-r, name: name, operation: "snd_pcm_recover"))
                return false
            }
            state.withLock { $0.statistics.recoveries += 1 }
            logger.info("\(direction == .capture ? "overrun" : "underrun") recovered", metadata: ["device": "\(name)"])
            bus.captureEvent(.xrunRecovered(direction: direction))
            return true
        default:
            fail(Self.streamError(code, name: name, operation: operation))
            return false
        }
    }

    /// Reads until stopped or failed (nil), or until the device is lost and
    /// back (with reconnection on): then the new device's job.
    private func captureLoop(_ job: Job, _ signal: StopSignal) -> Job? {
        let format = job.configuration.format
        let channels = format.channels
        let chunkFrames = format.framesPerChunk
        var filled = 0  // frames in the current chunk
        var chunkStart: MonotonicTimestamp?
        var firstAt: MonotonicTimestamp?
        // Chunk times follow the sample count (exactly 10 ms apart) and are
        // re-anchored to the driver's timestamps only when the two drift apart
        // by more than `reanchorAfter`: the driver's times jitter by a few ms
        // under load and must never make a chunk older than the one before.
        var nextChunkAt: MonotonicTimestamp?
        var lastChunkAt: MonotonicTimestamp?
        let chunkDuration = Duration.nanoseconds(Int64(chunkFrames) * 1_000_000_000 / Int64(format.sampleRate))
        let reanchorAfter = Duration.milliseconds(20)
        var stalled = stallOnceMilliseconds == 0
        let r = system.start(job.pcm)
        if r < 0 && r != -EBADFD {
            fail(Self.streamError(-r, name: name, operation: "snd_pcm_start"))
            return nil
        }
        while !signal.isStopRequested {
            switch system.wait(job.pcm, wakeFD: signal.event.fd, timeoutMilliseconds: 500) {
            case .woken, .timedOut:
                continue
            case .ready, .error:
                break
            }
            let n = system.read(job.pcm, into: job.period.baseAddress!, frames: job.configuration.periodFrames)
            if n < 0 {
                if reconnect, case .deviceLost = Self.streamError(Int32(-n), name: name, operation: "snd_pcm_readi") {
                    return reopen(lost: job, signal)
                }
                if !handle(n, job, operation: "snd_pcm_readi") { return nil }
                filled = 0
                chunkStart = nil
                nextChunkAt = nil   // samples were lost: take the driver's time again
                continue
            }
            // When the newest frame read was captured: the driver's timestamp minus what is still queued.
            let now = MonotonicTimestamp.now()
            var newestAt = now
            if let (available, at) = system.timestamp(job.pcm), at <= now {
                newestAt = at + .nanoseconds(-Int64(available) * 1_000_000_000 / Int64(format.sampleRate))
            }
            var offset = 0
            while offset < n {
                if filled == 0 {
                    // The first frame of this chunk, counted back from the newest one read.
                    let framesAfter = n - offset
                    chunkStart = newestAt + .nanoseconds(-Int64(framesAfter) * 1_000_000_000 / Int64(format.sampleRate))
                }
                let take = min(chunkFrames - filled, n - offset)
                (job.chunk.baseAddress! + filled * channels).update(from: job.period.baseAddress! + offset * channels,
                                                                   count: take * channels)
                filled += take
                offset += take
                if filled == chunkFrames {
                    let measured = chunkStart ?? now
                    var at = measured
                    if let expected = nextChunkAt, abs((measured - expected).nanosecondsClamped) <= reanchorAfter.nanosecondsClamped {
                        at = expected
                    }
                    if let last = lastChunkAt, at <= last { at = last + .microseconds(1) }
                    nextChunkAt = at + chunkDuration
                    lastChunkAt = at
                    let chunk = AudioChunk(timestamp: at, format: format, samples: UnsafeBufferPointer(job.chunk))
                    bus.deliverCaptured(chunk)
                    filled = 0
                    if firstAt == nil { firstAt = chunk.timestamp }
                    let delay = system.delay(job.pcm)
                    state.withLock { s in
                        s.statistics.chunks += 1
                        if let delay { s.statistics.delayMs = Double(delay) * 1000 / Double(format.sampleRate) }
                    }
                }
            }
            state.withLock { s in
                s.statistics.frames += UInt64(n)
                if let f = firstAt, now > f {
                    s.statistics.measuredRate = Double(s.statistics.frames) / (now - f).secondsDouble
                }
            }
            if !stalled {
                stalled = true
                // Test hook: stop reading so the card overruns (see --debug-stall-ms).
                signal.wait(milliseconds: Int32(stallOnceMilliseconds))
            }
        }
        return nil
    }

    /// The device is gone: closes it (a driver being unbound waits for that),
    /// says so, and opens it again every `reconnectInterval` until it is back
    /// (its job, to read on) or the side is stopped (nil).
    private func reopen(lost: Job, _ signal: StopSignal) -> Job? {
        let lostAt = MonotonicTimestamp.now()
        let error = AudioError.deviceLost(device: name)
        system.close(lost.pcm)
        state.withLock {
            $0.pcm = nil
            $0.configuration = nil
        }
        logger.warning("\(error); waiting for it to come back")
        bus.captureEvent(.deviceLost(direction: direction, reason: error.description))
        while !signal.isStopRequested {
            signal.wait(milliseconds: Self.reconnectInterval)
            if signal.isStopRequested { break }
            do { try initialize() } catch { continue }  // not back yet
            guard let (pcm, configuration) = state.withLock({ s in s.pcm.flatMap { p in s.configuration.map { (p, $0) } } })
            else { continue }
            let gap = (MonotonicTimestamp.now() - lostAt).secondsDouble
            logger.notice("audio device back", metadata: ["device": "\(name)", "after": "\(gap.formatted(decimals: 1)) s"])
            bus.captureEvent(.deviceRestored(direction: direction, description:
                "\(name) back after \(gap.formatted(decimals: 1)) s: \(configuration.format)"))
            return Job(pcm: pcm, configuration: configuration)
        }
        return nil
    }

    private func renderLoop(_ job: Job, _ signal: StopSignal) {
        let format = job.configuration.format
        let chunkFrames = format.framesPerChunk
        var pending = 0      // frames of the current chunk not yet written
        var written = 0
        var firstAt: MonotonicTimestamp?
        while !signal.isStopRequested {
            if pending == 0 {
                if !bus.readRenderChunk(into: job.chunk) {
                    state.withLock { $0.statistics.silenceInserted += 1 }
                }
                pending = chunkFrames
                written = 0
            }
            let n = system.write(job.pcm, from: job.chunk.baseAddress! + written * format.channels, frames: pending)
            if n == -Int(EAGAIN) || n == 0 {
                switch system.wait(job.pcm, wakeFD: signal.event.fd, timeoutMilliseconds: 500) {
                case .ready, .timedOut, .woken: continue
                case .error:
                    let again = system.write(job.pcm, from: job.chunk.baseAddress! + written * format.channels, frames: pending)
                    if again < 0, !handle(again, job, operation: "snd_pcm_writei") { return }
                    if again > 0 { pending -= again; written += again }
                    continue
                }
            }
            if n < 0 {
                if !handle(n, job, operation: "snd_pcm_writei") { return }
                continue
            }
            pending -= n
            written += n
            let now = MonotonicTimestamp.now()
            if firstAt == nil { firstAt = now }
            let delay = system.delay(job.pcm)
            state.withLock { s in
                s.statistics.frames += UInt64(n)
                if pending == 0 { s.statistics.chunks += 1 }
                if let delay { s.statistics.delayMs = Double(delay) * 1000 / Double(format.sampleRate) }
                if let f = firstAt, now > f, s.statistics.frames > UInt64(chunkFrames * 10) {
                    s.statistics.measuredRate = Double(s.statistics.frames) / (now - f).secondsDouble
                }
            }
        }
    }
}
