import MediaTypes

/// A buffer the driver handed back (VIDIOC_DQBUF).
struct V4L2DequeuedBuffer: Hashable, Sendable {
    var index: Int
    var bytesUsed: Int
    var sequence: UInt32
    /// Raw V4L2_BUF_FLAG_* bits.
    var flags: UInt32
    var timestamp: MonotonicTimestamp

    static let flagError: UInt32 = 0x0000_0040
    static let flagTimestampMask: UInt32 = 0x0000_e000
    static let flagTimestampMonotonic: UInt32 = 0x0000_2000

    var isFlaggedError: Bool { flags & Self.flagError != 0 }
    var hasMonotonicTimestamp: Bool { flags & Self.flagTimestampMask == Self.flagTimestampMonotonic }
}
