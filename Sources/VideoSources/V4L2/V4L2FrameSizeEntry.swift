import MediaTypes

/// One entry of VIDIOC_ENUM_FRAMESIZES.
enum V4L2FrameSizeEntry: Hashable, Sendable {
    case discrete(FrameSize)
    case stepwise(min: FrameSize, max: FrameSize, step: FrameSize)
    case continuous(min: FrameSize, max: FrameSize)
}
