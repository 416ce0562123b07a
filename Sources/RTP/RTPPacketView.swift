import WireFormat

/// The fields a forwarder reads from an RTP packet, parsed in place: no
/// arrays are made (`RTPPacket` copies the CSRCs and the extension), so the
/// router reads every packet it receives without allocating.
public struct RTPPacketView: Sendable {
    public var payloadType: UInt8
    public var marker: Bool
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    /// Where the payload sits in the parsed bytes (CSRCs, extension and padding left out).
    public var payload: Range<Int>

    public init(parsing bytes: ArraySlice<UInt8>) throws(RTPError) {
        guard bytes.count >= RTPHeader.fixedSize else { throw .tooShort(needed: RTPHeader.fixedSize, got: bytes.count) }
        let b = bytes.startIndex
        let version = bytes[b] >> 6
        guard version == 2 else { throw .badVersion(version) }
        payloadType = bytes[b + 1] & 0x7f
        marker = bytes[b + 1] & 0x80 != 0
        sequenceNumber = bytes.bigEndianUInt16(at: b + 2)
        timestamp = bytes.bigEndianUInt32(at: b + 4)
        ssrc = bytes.bigEndianUInt32(at: b + 8)
        var offset = b + RTPHeader.fixedSize + 4 * Int(bytes[b] & 0x0f)
        guard offset <= bytes.endIndex else { throw .tooShort(needed: offset - b, got: bytes.count) }
        if bytes[b] & 0x10 != 0 {
            guard bytes.endIndex - offset >= 4 else { throw .tooShort(needed: offset - b + 4, got: bytes.count) }
            offset += 4 + 4 * Int(bytes.bigEndianUInt16(at: offset + 2))
            guard offset <= bytes.endIndex else { throw .tooShort(needed: offset - b, got: bytes.count) }
        }
        var end = bytes.endIndex
        if bytes[b] & 0x20 != 0 {
            let padding = Int(bytes[end - 1])
            guard padding > 0, padding <= end - offset else { throw .badPadding }
            end -= padding
        }
        payload = offset..<end
    }
}
