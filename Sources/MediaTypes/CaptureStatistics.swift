/// Counters a capturer keeps while streaming.
public struct CaptureStatistics: Hashable, Sendable {
    /// Frames handed to the consumer.
    public var framesDelivered: UInt64 = 0
    /// Frames the driver dropped, seen as gaps in its sequence numbers.
    public var framesDroppedByDriver: UInt64 = 0
    /// Buffers flagged V4L2_BUF_FLAG_ERROR (dropped).
    public var framesCorrupt: UInt64 = 0
    /// Buffers with fewer bytes than the format needs (dropped).
    public var framesTooShort: UInt64 = 0
    /// MJPEG buffers with broken markers or that failed to decode (dropped).
    public var framesBadJPEG: UInt64 = 0
    /// Older buffers skipped because a newer one was already waiting.
    public var framesSkippedForNewer: UInt64 = 0
    /// Frames dropped because the consumer still held every pooled frame.
    public var framesDroppedConsumerBusy: UInt64 = 0
    /// Kernel timestamps in the future or going backwards (replaced by the arrival time).
    public var timestampsRejected: UInt64 = 0
    /// Times the device was lost and reopened.
    public var reconnects: UInt64 = 0
    /// Delivered frames per second over the whole run.
    public var measuredFramesPerSecond: Double = 0
    /// Delivered frames per second over the last window (about 1 s).
    public var recentFramesPerSecond: Double = 0
    /// Kernel timestamp to consumer callback, in nanoseconds.
    public var latencyP50Nanoseconds: Int64 = 0
    public var latencyP99Nanoseconds: Int64 = 0
    public var latencyMaxNanoseconds: Int64 = 0

    public init() {}

    /// Every frame that did not reach the consumer, whatever the reason.
    public var framesDropped: UInt64 {
        framesDroppedByDriver + framesCorrupt + framesTooShort + framesBadJPEG + framesDroppedConsumerBusy
    }
}
