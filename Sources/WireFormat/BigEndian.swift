/// Network byte order for the wire formats (RTP, RTCP, STUN): appending
/// integers to a packet being built, and reading them out of one received.
/// Inlinable: called from other modules unspecialized, each `self[i]` of a
/// generic collection goes through a read coroutine that allocates its
/// frame on the heap (four allocations per UInt32, counted on the receive path).
extension Array where Element == UInt8 {
    // One append of the value's bytes, not one per byte: each `append` checks
    // the buffer's uniqueness and capacity, a runtime call, and an RTP header
    // is a dozen of them.
    @inlinable public mutating func appendBigEndian(_ value: UInt16) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    @inlinable public mutating func appendBigEndian(_ value: UInt32) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}

extension Collection where Element == UInt8, Index == Int {
    @inlinable public func bigEndianUInt16(at i: Int) -> UInt16 {
        UInt16(self[i]) << 8 | UInt16(self[i + 1])
    }

    @inlinable public func bigEndianUInt32(at i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }
}
