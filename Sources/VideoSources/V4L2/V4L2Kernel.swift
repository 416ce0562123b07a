import MediaTypes

// The V4L2 calls the capturer makes, as one protocol with typed Swift values
// instead of C structs. The real implementation (`LibV4L2Kernel`) goes through
// libv4l2; tests plug in a scripted fake kernel (in the spirit of swift-nio's
// SyscallAbstractionLayer) to produce what a real driver rarely does on
// demand: EAGAIN storms, ENODEV mid-stream, corrupt and short buffers,
// sequence gaps, drivers that adjust the format.

/// Capability bits the capturer cares about (from VIDIOC_QUERYCAP's device_caps).
public struct V4L2CapabilityFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let videoCapture = Self(rawValue: 0x0000_0001)
    public static let videoOutput = Self(rawValue: 0x0000_0002)
    public static let videoCaptureMultiplanar = Self(rawValue: 0x0000_1000)
    public static let videoOutputMultiplanar = Self(rawValue: 0x0000_2000)
    public static let videoMemoryToMemory = Self(rawValue: 0x0000_8000)
    public static let readWrite = Self(rawValue: 0x0100_0000)
    public static let streaming = Self(rawValue: 0x0400_0000)
    public static let metadataCapture = Self(rawValue: 0x0080_0000)
}

/// What VIDIOC_QUERYCAP says about a node.
public struct V4L2Capabilities: Hashable, Sendable {
    public var driver: String
    public var card: String
    public var busInfo: String
    /// The capabilities of this node (device_caps when the driver reports them).
    public var flags: V4L2CapabilityFlags

    public init(driver: String, card: String, busInfo: String, flags: V4L2CapabilityFlags) {
        self.driver = driver
        self.card = card
        self.busInfo = busInfo
        self.flags = flags
    }
}

/// One entry of VIDIOC_ENUM_FMT.
struct V4L2FormatEntry: Hashable, Sendable {
    var pixelFormat: PixelFormat
    var description: String
    var isCompressed: Bool
    /// Produced by libv4l's conversion, not by the hardware: never negotiated.
    var isEmulated: Bool
}

/// One entry of VIDIOC_ENUM_FRAMESIZES.
enum V4L2FrameSizeEntry: Hashable, Sendable {
    case discrete(FrameSize)
    case stepwise(min: FrameSize, max: FrameSize, step: FrameSize)
    case continuous(min: FrameSize, max: FrameSize)
}

/// A time per frame, as V4L2 expresses rates (1/30 s rather than 30 fps).
public struct FrameInterval: Hashable, Sendable, CustomStringConvertible {
    public var numerator: UInt32
    public var denominator: UInt32

    public init(numerator: UInt32, denominator: UInt32) {
        self.numerator = numerator
        self.denominator = denominator
    }

    /// The interval closest to 1/fps, kept exact for common rates (30 → 1/30, 29.97 → 1001/30000).
    public init(framesPerSecond fps: Double) {
        precondition(fps > 0, "a frame rate is positive")
        if fps == fps.rounded() { self.init(numerator: 1, denominator: UInt32(fps)); return }
        if (fps * 2) == (fps * 2).rounded() { self.init(numerator: 2, denominator: UInt32(fps * 2)); return }
        let ntsc = (fps * 1001).rounded()
        if abs(ntsc / 1001 - fps) < 1e-6 { self.init(numerator: 1001, denominator: UInt32(ntsc)); return }
        self.init(numerator: 1000, denominator: UInt32((fps * 1000).rounded()))
    }

    public var framesPerSecond: Double {
        numerator == 0 ? 0 : Double(denominator) / Double(numerator)
    }

    public var description: String { "\(numerator)/\(denominator) s" }
}

/// One entry of VIDIOC_ENUM_FRAMEINTERVALS.
enum V4L2FrameIntervalEntry: Hashable, Sendable {
    case discrete(FrameInterval)
    case stepwise(min: FrameInterval, max: FrameInterval, step: FrameInterval)
    case continuous(min: FrameInterval, max: FrameInterval)
}

/// The single-planar pixel format of a stream (struct v4l2_pix_format).
struct V4L2PixFormat: Hashable, Sendable {
    var pixelFormat: PixelFormat
    var width: Int
    var height: Int
    var bytesPerLine: Int
    var sizeImage: Int
}

/// Streaming parameters (VIDIOC_G_PARM): whether the driver takes a frame
/// interval at all, and the one in force.
struct V4L2StreamParameters: Hashable, Sendable {
    var supportsFrameInterval: Bool
    var frameInterval: FrameInterval
}

/// A buffer the driver handed back (VIDIOC_DQBUF).
struct V4L2DequeuedBuffer: Hashable, Sendable {
    var index: Int
    var bytesUsed: Int
    var sequence: UInt32
    /// Raw V4L2_BUF_FLAG_* bits.
    var flags: UInt32
    var timestamp: MonotonicTimestamp

    static let flagError: UInt32 = 0x0000_0040
    static let flagTimestampMask: UInt32 = 0x0000_e000
    static let flagTimestampMonotonic: UInt32 = 0x0000_2000

    var isFlaggedError: Bool { flags & Self.flagError != 0 }
    var hasMonotonicTimestamp: Bool { flags & Self.flagTimestampMask == Self.flagTimestampMonotonic }
}

/// What one wait on the device and the wake-up descriptor saw.
struct V4L2PollResult: Hashable, Sendable {
    /// A buffer can be dequeued.
    var deviceReadable: Bool
    /// POLLERR or POLLHUP on the device: it is gone or stopped streaming.
    var deviceError: Bool
    /// Someone asked the capture thread to look at its state (stop, reconfigure).
    var woken: Bool

    static let timedOut = V4L2PollResult(deviceReadable: false, deviceError: false, woken: false)
}

/// A control's range and default (VIDIOC_QUERYCTRL).
struct V4L2ControlInfo: Hashable, Sendable {
    var id: UInt32
    var name: String
    var minimum: Int32
    var maximum: Int32
    var defaultValue: Int32
    var isDisabled: Bool
}

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
