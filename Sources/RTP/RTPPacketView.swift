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
    /// The header extension block's "defined by profile" field (0: no block)
    /// and where its elements sit in the parsed bytes (RFC 8285).
    public var extensionProfile: UInt16 = 0
    public var extensionElements: Range<Int> = 0..<0

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
            extensionProfile = bytes.bigEndianUInt16(at: offset)
            let start = offset + 4
            offset = start + 4 * Int(bytes.bigEndianUInt16(at: offset + 2))
            guard offset <= bytes.endIndex else { throw .tooShort(needed: offset - b, got: bytes.count) }
            extensionElements = start..<offset
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

extension RTPPacketView {
    /// The value of header extension element `id` in `bytes` (the bytes this
    /// view parsed), in the one-byte or the two-byte form (RFC 8285); nil
    /// when the packet does not carry it. Reads in place: nothing is copied.
    public func headerExtension(_ id: UInt8, in bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        let oneByte = extensionProfile == 0xBEDE
        guard id != 0, oneByte || extensionProfile & 0xFFF0 == 0x1000 else { return nil }
        var i = extensionElements.lowerBound
        let end = extensionElements.upperBound
        while i < end {
            let elementID = bytes[i]
            if elementID == 0 { i += 1; continue }   // padding
            let length: Int, start: Int
            if oneByte {
                if elementID >> 4 == 15 { return nil }   // reserved: the rest is not to be read
                length = Int(elementID & 0x0f) + 1
                start = i + 1
                if elementID >> 4 == id, start + length <= end { return bytes[start..<start + length] }
            } else {
                guard i + 1 < end else { return nil }
                length = Int(bytes[i + 1])
                start = i + 2
                if elementID == id, start + length <= end { return bytes[start..<start + length] }
            }
            i = start + length
        }
        return nil
    }
}
