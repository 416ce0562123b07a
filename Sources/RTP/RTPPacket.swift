import WireFormat

/// A parsed RTP packet: the header, and where the payload sits in the bytes.
public struct RTPPacket: Sendable {
    public var header: RTPHeader
    public var payload: ArraySlice<UInt8>

    public init(parsing bytes: ArraySlice<UInt8>) throws(RTPError) {
        guard bytes.count >= RTPHeader.fixedSize else { throw .tooShort(needed: RTPHeader.fixedSize, got: bytes.count) }
        let b = bytes.startIndex
        let version = bytes[b] >> 6
        guard version == 2 else { throw .badVersion(version) }
        let csrcCount = Int(bytes[b] & 0x0f)
        var header = RTPHeader(payloadType: bytes[b + 1] & 0x7f, sequenceNumber: bytes.bigEndianUInt16(at: b + 2),
                               timestamp: bytes.bigEndianUInt32(at: b + 4), ssrc: bytes.bigEndianUInt32(at: b + 8),
                               marker: bytes[b + 1] & 0x80 != 0)
        var offset = b + RTPHeader.fixedSize
        guard bytes.endIndex - offset >= 4 * csrcCount else { throw .tooShort(needed: offset - b + 4 * csrcCount, got: bytes.count) }
        for i in 0..<csrcCount { header.csrcs.append(bytes.bigEndianUInt32(at: offset + 4 * i)) }
        offset += 4 * csrcCount
        if bytes[b] & 0x10 != 0 {
            guard bytes.endIndex - offset >= 4 else { throw .tooShort(needed: offset - b + 4, got: bytes.count) }
            header.extensionProfile = bytes.bigEndianUInt16(at: offset)
            let words = Int(bytes.bigEndianUInt16(at: offset + 2))
            offset += 4
            guard bytes.endIndex - offset >= 4 * words else { throw .tooShort(needed: offset - b + 4 * words, got: bytes.count) }
            header.extensionData = Array(bytes[offset..<(offset + 4 * words)])
            offset += 4 * words
        }
        var end = bytes.endIndex
        if bytes[b] & 0x20 != 0 {
            let padding = Int(bytes[end - 1])
            guard padding > 0, padding <= end - offset else { throw .badPadding }
            header.paddingLength = padding
            end -= padding
        }
        self.header = header
        payload = bytes[offset..<end]
    }
}

/// Sequence numbers are 16 bits and wrap: a is newer than b when it is ahead
/// by less than half the space (RFC 3550 appendix A.1).
public func isNewer(_ a: UInt16, than b: UInt16) -> Bool {
    a != b && a &- b < 0x8000
}
