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
