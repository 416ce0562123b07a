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
