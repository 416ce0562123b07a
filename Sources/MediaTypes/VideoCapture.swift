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
