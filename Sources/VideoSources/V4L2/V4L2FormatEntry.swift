import MediaTypes

/// One entry of VIDIOC_ENUM_FMT.
struct V4L2FormatEntry: Hashable, Sendable {
    var pixelFormat: PixelFormat
    var description: String
    var isCompressed: Bool
    /// Produced by libv4l's conversion, not by the hardware: never negotiated.
    var isEmulated: Bool
}
