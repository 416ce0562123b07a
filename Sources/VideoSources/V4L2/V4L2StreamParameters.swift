/// Streaming parameters (VIDIOC_G_PARM): whether the driver takes a frame
/// interval at all, and the one in force.
struct V4L2StreamParameters: Hashable, Sendable {
    var supportsFrameInterval: Bool
    var frameInterval: FrameInterval
}
