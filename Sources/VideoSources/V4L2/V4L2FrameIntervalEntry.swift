/// One entry of VIDIOC_ENUM_FRAMEINTERVALS.
enum V4L2FrameIntervalEntry: Hashable, Sendable {
    case discrete(FrameInterval)
    case stepwise(min: FrameInterval, max: FrameInterval, step: FrameInterval)
    case continuous(min: FrameInterval, max: FrameInterval)
}
