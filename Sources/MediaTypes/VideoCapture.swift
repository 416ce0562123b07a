/// What a capturer really negotiated with its device: read back from the
/// driver, never just what was asked for.
public struct CaptureSettings: Hashable, Sendable {
    /// Device path, or "test-pattern".
    public var device: String
    /// Card name, driver and bus info as the driver reports them.
    public var card: String
    public var driver: String
    public var busInfo: String
    /// What the driver delivers (e.g. YUYV 640x480, 1280 bytes per row).
    public var deviceFormat: VideoFormat
    /// What the consumer receives: always NV12.
    public var outputFormat: VideoFormat
    public var requestedSize: FrameSize
    public var requestedFramesPerSecond: Double
    /// The rate the driver granted (VIDIOC_G_PARM after VIDIOC_S_PARM).
    public var grantedFramesPerSecond: Double
    public var bufferCount: Int
    public var orientation: VideoOrientation
    /// True when pixels are rotated/mirrored before delivery (`--rotate-pixels`).
    public var rotatesPixels: Bool

    public init(device: String, card: String, driver: String, busInfo: String,
                deviceFormat: VideoFormat, outputFormat: VideoFormat,
                requestedSize: FrameSize, requestedFramesPerSecond: Double,
                grantedFramesPerSecond: Double, bufferCount: Int,
                orientation: VideoOrientation, rotatesPixels: Bool) {
        self.device = device
        self.card = card
        self.driver = driver
        self.busInfo = busInfo
        self.deviceFormat = deviceFormat
        self.outputFormat = outputFormat
        self.requestedSize = requestedSize
        self.requestedFramesPerSecond = requestedFramesPerSecond
        self.grantedFramesPerSecond = grantedFramesPerSecond
        self.bufferCount = bufferCount
        self.orientation = orientation
        self.rotatesPixels = rotatesPixels
    }
}

/// Something a capturer reports besides frames.
public enum CaptureEvent: Sendable, CustomStringConvertible {
    /// The device went away; with reconnection on, the capturer now waits for it.
    case deviceLost(CaptureError)
    /// The device is back and renegotiated; `gap` is how long no frame flowed.
    case reconnected(CaptureSettings, gap: Duration)
    /// The delivered rate stayed well below the granted one.
    case rateBelowGranted(delivered: Double, granted: Double, seconds: Double)
    /// The frame-rate governor changed something to get the rate back.
    case adapted(action: String)
    /// Capture stopped for good with this error.
    case failed(CaptureError)

    public var description: String {
        switch self {
        case .deviceLost(let e): return "device lost: \(e)"
        case .reconnected(let s, let gap):
            return "reconnected to \(s.device) after \(gap.secondsDouble.formatted(decimals: 2)) s: \(s.deviceFormat)"
        case .rateBelowGranted(let d, let g, let s):
            return "delivered \(d.formatted(decimals: 1)) fps for \(s.formatted(decimals: 0)) s, granted \(g.formatted(decimals: 1)) fps"
        case .adapted(let action): return "adapted: \(action)"
        case .failed(let e): return "capture failed: \(e)"
        }
    }
}

/// Receives frames from a ``VideoCapture`` (OpenTok's `OTVideoCaptureConsumer`).
///
/// `consume` is called on the capturer's thread: return quickly, and keep a
/// reference to the frame for as long as it is needed (the pool reuses it
/// only after the last reference goes away).
public protocol VideoCaptureConsumer: AnyObject, Sendable {
    func consume(_ frame: VideoFrame)
    func captureEvent(_ event: CaptureEvent)
}

extension VideoCaptureConsumer {
    public func captureEvent(_ event: CaptureEvent) {}
}

/// A video source in the shape of OpenTok's custom video capturer:
/// `initialize` opens and negotiates, `start`/`stop` stream, `release` closes.
public protocol VideoCapture: AnyObject, Sendable {
    /// The device path, or "test-pattern".
    var name: String { get }
    /// Opens the device and negotiates format, size and rate.
    func initialize() throws(CaptureError)
    /// Starts delivering frames to the consumer.
    func start() throws(CaptureError)
    /// Stops streaming; the device stays open and negotiated.
    func stop()
    /// Stops if needed and closes the device.
    func release()
    var isCaptureStarted: Bool { get }
    /// What was really negotiated; nil before `initialize`.
    var captureSettings: CaptureSettings? { get }
    /// Counters and measured rates so far.
    var statistics: CaptureStatistics { get }
    func setConsumer(_ consumer: (any VideoCaptureConsumer)?)
}
