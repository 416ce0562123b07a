import MediaTypes

// The ALSA PCM calls the audio sides make, behind one protocol with Swift
// values, so unit tests can play the sound card (as the video side's fake
// kernel does): odd period sizes, overruns, busy devices, unplugs.

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
