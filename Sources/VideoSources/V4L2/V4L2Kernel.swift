import MediaTypes

// The V4L2 calls the capturer makes, as one protocol with typed Swift values
// instead of C structs. The real implementation (`LibV4L2Kernel`) goes through
// libv4l2; tests plug in a scripted fake kernel (in the spirit of swift-nio's
// SyscallAbstractionLayer) to produce what a real driver rarely does on
// demand: EAGAIN storms, ENODEV mid-stream, corrupt and short buffers,
// sequence gaps, drivers that adjust the format.

/// The kernel as the capturer sees it. Every call throws the errno it failed
/// with; EINTR is retried inside the real implementation and never surfaces.
protocol V4L2Kernel: Sendable {
    /// Whether `path` names a character device (stat + S_ISCHR).
    func isCharacterDevice(path: String) throws(Errno) -> Bool
    /// Opens read-write, non-blocking, close-on-exec, with libv4l2's format conversion disabled.
    func open(path: String) throws(Errno) -> Int32
    func close(_ fd: Int32)

    func queryCapabilities(_ fd: Int32) throws(Errno) -> V4L2Capabilities
    /// EINVAL past the last entry.
    func enumerateFormat(_ fd: Int32, index: UInt32) throws(Errno) -> V4L2FormatEntry
    func enumerateFrameSize(_ fd: Int32, pixelFormat: PixelFormat, index: UInt32) throws(Errno) -> V4L2FrameSizeEntry
    func enumerateFrameInterval(_ fd: Int32, pixelFormat: PixelFormat, size: FrameSize, index: UInt32) throws(Errno) -> V4L2FrameIntervalEntry

    func getFormat(_ fd: Int32) throws(Errno) -> V4L2PixFormat
    /// Sets the capture format; returns what the driver made of it.
    func setFormat(_ fd: Int32, _ format: V4L2PixFormat) throws(Errno) -> V4L2PixFormat
    func getStreamParameters(_ fd: Int32) throws(Errno) -> V4L2StreamParameters
    /// Asks for a frame interval; returns the parameters the driver settled on.
    func setFrameInterval(_ fd: Int32, _ interval: FrameInterval) throws(Errno) -> V4L2StreamParameters

    /// Asks for `count` mmap buffers (0 frees them); returns how many the driver gave.
    func requestBuffers(_ fd: Int32, count: Int) throws(Errno) -> Int
    /// Offset and length of buffer `index`, for mmap.
    func queryBuffer(_ fd: Int32, index: Int) throws(Errno) -> (offset: Int, length: Int)
    func mapBuffer(_ fd: Int32, offset: Int, length: Int) throws(Errno) -> UnsafeMutableRawPointer
    func unmapBuffer(_ address: UnsafeMutableRawPointer, length: Int)
    func queueBuffer(_ fd: Int32, index: Int) throws(Errno)
    /// Non-blocking: EAGAIN when no buffer is ready.
    func dequeueBuffer(_ fd: Int32) throws(Errno) -> V4L2DequeuedBuffer
    func streamOn(_ fd: Int32) throws(Errno)
    func streamOff(_ fd: Int32) throws(Errno)

    /// Waits up to `timeoutMilliseconds` for the device or the wake-up descriptor.
    func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) throws(Errno) -> V4L2PollResult

    func queryControl(_ fd: Int32, id: UInt32) throws(Errno) -> V4L2ControlInfo
    func getControl(_ fd: Int32, id: UInt32) throws(Errno) -> Int32
    func setControl(_ fd: Int32, id: UInt32, value: Int32) throws(Errno)

    // Output side, used by the loopback self-test's writer.
    /// Sets the format of an output node (v4l2loopback's writer side).
    func setOutputFormat(_ fd: Int32, _ format: V4L2PixFormat) throws(Errno) -> V4L2PixFormat
    /// Writes one whole frame to an output node.
    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int
}
