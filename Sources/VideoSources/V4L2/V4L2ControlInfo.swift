/// A control's range and default (VIDIOC_QUERYCTRL).
struct V4L2ControlInfo: Hashable, Sendable {
    var id: UInt32
    var name: String
    var minimum: Int32
    var maximum: Int32
    var defaultValue: Int32
    var isDisabled: Bool
}
