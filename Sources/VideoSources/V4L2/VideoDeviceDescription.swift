import MediaTypes

/// A video capture node as `camagent devices` shows it: identity, and every
/// format with its sizes and frame rates (all three V4L2 enumeration kinds).
public struct VideoDeviceDescription: Codable, Hashable, Sendable {
    public var path: String
    public var card: String
    public var driver: String
    public var busInfo: String
    /// /dev/v4l/by-id and by-path names for this node (where udev made them).
    public var stableNames: [String]
    /// `usb:VID:PID[:SERIAL]` of the USB device the node belongs to (nil for platform drivers).
    public var usbID: String?
    /// Every `--device` name that selects this camera whatever its node number:
    /// the links, the USB id, and the card name when no other camera has it.
    public var names: [String]
    public var formats: [Format]

    public struct Format: Codable, Hashable, Sendable {
        /// FourCC, e.g. "YUYV".
        public var fourcc: String
        public var description: String
        public var compressed: Bool
        /// Emulated by libv4l; listed but never negotiated.
        public var emulated: Bool
        public var sizes: [Size]
    }

    public struct Size: Codable, Hashable, Sendable {
        /// "discrete", "stepwise" or "continuous".
        public var kind: String
        public var width: Int
        public var height: Int
        /// For stepwise and continuous sizes: the largest size and the step.
        public var maxWidth: Int?
        public var maxHeight: Int?
        public var stepWidth: Int?
        public var stepHeight: Int?
        /// Intervals at this size (at the largest size for ranges).
        public var intervals: [Interval]
    }

    public struct Interval: Codable, Hashable, Sendable {
        public var kind: String
        /// Time per frame as a fraction of a second, and the rate it means.
        public var numerator: UInt32
        public var denominator: UInt32
        public var fps: Double
        /// For stepwise and continuous intervals: the slowest end and the step.
        public var maxNumerator: UInt32?
        public var maxDenominator: UInt32?
        public var minFps: Double?
        public var stepNumerator: UInt32?
        public var stepDenominator: UInt32?
    }
}
