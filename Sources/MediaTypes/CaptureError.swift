/// Why a video capturer failed, always naming the device.
///
/// Each case is one thing a user can act on; the CLI maps each to its own exit
/// code (see README "Exit codes").
public enum CaptureError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Nothing at that path.
    case noSuchDevice(device: String)
    /// No camera answers to that name (a card name, a USB id, a /dev/v4l link);
    /// `available` describes the cameras there are, one per entry.
    case noMatchingDevice(name: String, available: [String])
    /// The node exists but this user may not open it.
    case permissionDenied(device: String)
    /// The node is not a V4L2 capture device (not a character device, no
    /// VIDEO_CAPTURE or STREAMING capability, an output node...).
    case notACaptureDevice(device: String, reason: String)
    /// The device only offers the multi-planar API, which camagent does not speak yet.
    case multiplanarNotSupported(device: String)
    /// Another program is streaming from the device (EBUSY).
    case busy(device: String)
    /// The requested pixel format is not offered (emulated formats do not count).
    case formatNotSupported(device: String, requested: String, available: [String])
    /// The requested size is not offered at that format.
    case sizeNotSupported(device: String, requested: FrameSize, available: [FrameSize])
    /// The requested frame rate is not offered at that format and size.
    case rateNotSupported(device: String, requested: Double, available: [Double])
    /// STREAMON said ENOSPC: the USB bus cannot carry this format (raw video at a
    /// high size or rate, often with another camera on the same bus).
    case bandwidthExceeded(device: String, format: String)
    /// The device went away while streaming (ENODEV, unplug, driver unloaded).
    case deviceLost(device: String)
    /// No usable frame (one that was not corrupt, short or undecodable) for the given number of seconds.
    case timeout(device: String, seconds: Double)
    /// A driver call failed in a way none of the cases above describes.
    case driverError(device: String, operation: String, errno: Int32)

    public var device: String {
        switch self {
        case .noSuchDevice(let d), .noMatchingDevice(let d, _), .permissionDenied(let d), .notACaptureDevice(let d, _),
             .multiplanarNotSupported(let d), .busy(let d), .bandwidthExceeded(let d, _), .formatNotSupported(let d, _, _),
             .sizeNotSupported(let d, _, _), .rateNotSupported(let d, _, _), .deviceLost(let d),
             .timeout(let d, _), .driverError(let d, _, _):
            return d
        }
    }

    public var description: String {
        switch self {
        case .noSuchDevice(let d):
            return "\(d): no such device"
        case .noMatchingDevice(let name, let available):
            let cameras = available.isEmpty ? "no camera found" : "cameras here: " + available.joined(separator: "; ")
            return "\(name): no such device: no camera has that name (\(cameras))"
        case .permissionDenied(let d):
            return "\(d): permission denied (is the user in the 'video' group?)"
        case .notACaptureDevice(let d, let reason):
            return "\(d): not a video capture device (\(reason))"
        case .multiplanarNotSupported(let d):
            return "\(d): the device only supports the multi-planar API, which camagent does not support yet"
        case .busy(let d):
            return "\(d): device is busy (another program is capturing from it)"
        case .bandwidthExceeded(let d, let format):
            return "\(d): not enough USB bandwidth to stream \(format) (ENOSPC at VIDIOC_STREAMON; another camera on the same bus takes its share): try --format mjpeg, a smaller --size or a lower --fps, or another USB port"
        case .formatNotSupported(let d, let requested, let available):
            return "\(d): pixel format \(requested) not supported; the device offers \(available.joined(separator: ", "))"
        case .sizeNotSupported(let d, let requested, let available):
            return "\(d): size \(requested) not supported; the device offers \(available.map(\.description).joined(separator: ", "))"
        case .rateNotSupported(let d, let requested, let available):
            let rates = available.map { $0.formatted(decimals: 2) }.joined(separator: ", ")
            return "\(d): \(requested.formatted(decimals: 2)) fps not supported; the device offers \(rates)"
        case .deviceLost(let d):
            return "\(d): device lost while capturing (unplugged or driver gone)"
        case .timeout(let d, let seconds):
            return "\(d): no usable frame for \(seconds.formatted(decimals: 1)) s"
        case .driverError(let d, let operation, let errno):
            return "\(d): \(operation) failed: \(SystemErrorText.describe(errno))"
        }
    }
}
