#if canImport(Glibc)
import Glibc
#endif
internal import CALSA
import MediaTypes

/// The real PCM layer: libasound.
struct LibASoundPCM: PCMSystem {
    init() {
        calsa_silence_library_errors()
    }

    private func pointer(_ h: PCMHandle) -> OpaquePointer { OpaquePointer(bitPattern: h.raw)! }

    func open(_ name: String, direction: AudioDirection) -> Result<PCMHandle, PCMOpenError> {
        var pcm: OpaquePointer?
        let stream = direction == .capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK
        let r = snd_pcm_open(&pcm, name, stream, SND_PCM_NONBLOCK)
        guard r == 0, let pcm else { return .failure(PCMOpenError(code: -r)) }
        return .success(PCMHandle(raw: UInt(bitPattern: pcm)))
    }

    func close(_ pcm: PCMHandle) { snd_pcm_close(pointer(pcm)) }

    func configure(_ h: PCMHandle, format: AudioFormat, periodFrames: Int, periods: Int,
                   direction: AudioDirection) -> Result<PCMConfiguration, PCMConfigurationError> {
        let pcm = pointer(h)
        var hw: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hw) == 0, let hw else { return .failure(.failed(operation: "snd_pcm_hw_params_malloc", code: ENOMEM)) }
        defer { snd_pcm_hw_params_free(hw) }
        var r = snd_pcm_hw_params_any(pcm, hw)
        if r < 0 { return .failure(.failed(operation: "snd_pcm_hw_params_any", code: -r)) }
        if snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED) < 0 {
            return .failure(.formatNotSupported("no interleaved read/write access"))
        }
        if snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE) < 0 {
            return .failure(.formatNotSupported("the device does not take S16LE samples"))
        }
        if snd_pcm_hw_params_set_channels(pcm, hw, UInt32(format.channels)) < 0 {
            var lo: UInt32 = 0, hi: UInt32 = 0
            snd_pcm_hw_params_get_channels_min(hw, &lo)
            snd_pcm_hw_params_get_channels_max(hw, &hi)
            return .failure(.formatNotSupported("\(format.channels) channels not offered (the device does \(lo)-\(hi))"))
        }
        var rate = UInt32(format.sampleRate)
        var dir: Int32 = 0
        r = snd_pcm_hw_params_set_rate_near(pcm, hw, &rate, &dir)
        if r < 0 { return .failure(.formatNotSupported("no sample rate near \(format.sampleRate) Hz")) }
        var period = snd_pcm_uframes_t(periodFrames)
        snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir)
        var buffer = snd_pcm_uframes_t(periodFrames * periods)
        snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer)
        r = snd_pcm_hw_params(pcm, hw)
        if r < 0 { return .failure(.failed(operation: "snd_pcm_hw_params", code: -r)) }
        snd_pcm_hw_params_get_period_size(hw, &period, &dir)
        snd_pcm_hw_params_get_buffer_size(hw, &buffer)

        var sw: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&sw) == 0, let sw else { return .failure(.failed(operation: "snd_pcm_sw_params_malloc", code: ENOMEM)) }
        defer { snd_pcm_sw_params_free(sw) }
        snd_pcm_sw_params_current(pcm, sw)
        // Capture is started explicitly; playback starts once two periods are queued,
        // so the first underrun does not come straight away.
        let threshold = direction == .capture ? snd_pcm_uframes_t(1) : min(buffer, period * 2)
        snd_pcm_sw_params_set_start_threshold(pcm, sw, threshold)
        snd_pcm_sw_params_set_avail_min(pcm, sw, period)
        // Status timestamps on CLOCK_MONOTONIC: the clock video frames carry.
        snd_pcm_sw_params_set_tstamp_mode(pcm, sw, SND_PCM_TSTAMP_ENABLE)
        snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC)
        r = snd_pcm_sw_params(pcm, sw)
        if r < 0 { return .failure(.failed(operation: "snd_pcm_sw_params", code: -r)) }
        r = snd_pcm_prepare(pcm)
        if r < 0 { return .failure(.failed(operation: "snd_pcm_prepare", code: -r)) }
        return .success(PCMConfiguration(format: AudioFormat(sampleRate: Int(rate), channels: format.channels),
                                          periodFrames: Int(period), bufferFrames: Int(buffer)))
    }

    func start(_ pcm: PCMHandle) -> Int32 { snd_pcm_start(pointer(pcm)) }
    func drop(_ pcm: PCMHandle) { snd_pcm_drop(pointer(pcm)) }

    func drain(_ pcm: PCMHandle) {
        // A non-blocking PCM returns -EAGAIN from drain: let it block for this one call.
        snd_pcm_nonblock(pointer(pcm), 0)
        snd_pcm_drain(pointer(pcm))
        snd_pcm_nonblock(pointer(pcm), 1)
    }

    func wait(_ h: PCMHandle, wakeFD: Int32, timeoutMilliseconds: Int32) -> PCMWaitResult {
        let pcm = pointer(h)
        // At most 7 PCM descriptors plus the wake-up one, on the stack.
        var fds = (pollfd(), pollfd(), pollfd(), pollfd(), pollfd(), pollfd(), pollfd(), pollfd())
        return withUnsafeMutableBytes(of: &fds) { raw -> PCMWaitResult in
            let p = raw.baseAddress!.assumingMemoryBound(to: pollfd.self)
            let count = Int(snd_pcm_poll_descriptors(pcm, p, 7))
            guard count > 0 else { return .error }
            p[count] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            let n = Glibc.poll(p, nfds_t(count + 1), timeoutMilliseconds)
            if n < 0 { return errno == EINTR ? .timedOut : .error }
            if n == 0 { return .timedOut }
            if p[count].revents & Int16(POLLIN) != 0 { return .woken }
            var revents: UInt16 = 0
            snd_pcm_poll_descriptors_revents(pcm, p, UInt32(count), &revents)
            if revents & UInt16(POLLERR) != 0 { return .error }
            if revents & UInt16(POLLIN | POLLOUT) != 0 { return .ready }
            return .timedOut
        }
    }

    func read(_ pcm: PCMHandle, into buffer: UnsafeMutablePointer<Int16>, frames: Int) -> Int {
        Int(snd_pcm_readi(pointer(pcm), buffer, snd_pcm_uframes_t(frames)))
    }

    func write(_ pcm: PCMHandle, from buffer: UnsafePointer<Int16>, frames: Int) -> Int {
        Int(snd_pcm_writei(pointer(pcm), buffer, snd_pcm_uframes_t(frames)))
    }

    func recover(_ pcm: PCMHandle, error: Int32) -> Int32 {
        snd_pcm_recover(pointer(pcm), error, 1)
    }

    func delay(_ pcm: PCMHandle) -> Int? {
        var d: snd_pcm_sframes_t = 0
        return snd_pcm_delay(pointer(pcm), &d) == 0 ? Int(d) : nil
    }

    func timestamp(_ pcm: PCMHandle) -> (available: Int, at: MonotonicTimestamp)? {
        var avail: snd_pcm_uframes_t = 0
        var ts = timespec()
        guard snd_pcm_htimestamp(pointer(pcm), &avail, &ts) == 0, ts.tv_sec != 0 || ts.tv_nsec != 0 else { return nil }
        return (Int(avail), MonotonicTimestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)))
    }
}
