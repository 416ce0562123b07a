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
