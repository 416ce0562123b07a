import MediaTypes

// The ALSA PCM calls the audio sides make, behind one protocol with Swift
// values, so unit tests can play the sound card (as the video side's fake
// kernel does): odd period sizes, overruns, busy devices, unplugs.

/// An open PCM (the real one keeps the snd_pcm_t pointer's bits).
struct PCMHandle: Hashable, Sendable {
    let raw: UInt
}

/// snd_pcm_open's failure, as a positive errno.
struct PCMOpenError: Error, Hashable, Sendable {
    let code: Int32
}

/// What a PCM was configured to.
struct PCMConfiguration: Hashable, Sendable {
    var format: AudioFormat
    var periodFrames: Int
    var bufferFrames: Int
}

/// Why configuring a PCM failed.
enum PCMConfigurationError: Error, Hashable {
    case formatNotSupported(String)
    case failed(operation: String, code: Int32)
}

/// What one wait on the PCM and the wake-up descriptor saw.
enum PCMWaitResult: Hashable, Sendable {
    case ready
    case timedOut
    case woken
    /// The PCM's poll reported an error state (xrun, suspend, unplug): the next read or write says which.
    case error
}

protocol PCMSystem: Sendable {
    /// Opens a PCM by ALSA name, non-blocking. Negative errno on failure.
    func open(_ name: String, direction: AudioDirection) -> Result<PCMHandle, PCMOpenError>
    func close(_ pcm: PCMHandle)
    /// S16LE interleaved, `format.channels` exactly, the rate nearest `format.sampleRate`,
    /// a period near `periodFrames`, a buffer of about `periods` periods, monotonic timestamps.
    func configure(_ pcm: PCMHandle, format: AudioFormat, periodFrames: Int, periods: Int,
                   direction: AudioDirection) -> Result<PCMConfiguration, PCMConfigurationError>
    func start(_ pcm: PCMHandle) -> Int32
    func drop(_ pcm: PCMHandle)
    /// Lets queued playback finish (bounded by the caller's timeout on the buffer length).
    func drain(_ pcm: PCMHandle)
    /// Waits for the PCM (its poll descriptors) or the wake-up eventfd.
    func wait(_ pcm: PCMHandle, wakeFD: Int32, timeoutMilliseconds: Int32) -> PCMWaitResult
    /// Frames read, or a negative errno (-EAGAIN, -EPIPE overrun, -ESTRPIPE suspended, -ENODEV...).
    func read(_ pcm: PCMHandle, into buffer: UnsafeMutablePointer<Int16>, frames: Int) -> Int
    /// Frames written, or a negative errno.
    func write(_ pcm: PCMHandle, from buffer: UnsafePointer<Int16>, frames: Int) -> Int
    /// snd_pcm_recover: 0 when recovered.
    func recover(_ pcm: PCMHandle, error: Int32) -> Int32
    /// Frames between the application and the converter (snd_pcm_delay).
    func delay(_ pcm: PCMHandle) -> Int?
    /// Frames available and when the driver last updated that (CLOCK_MONOTONIC).
    func timestamp(_ pcm: PCMHandle) -> (available: Int, at: MonotonicTimestamp)?
}
