import WireFormat

/// RTP fixed header (RFC 3550 §5.1) with CSRCs and an optional header
/// extension, packed and parsed without Foundation. Payload bytes are not
/// held here: the packetizers write header and payload into one reusable
/// buffer, so sending a packet does not allocate.
public struct RTPHeader: Hashable, Sendable {
    public var marker = false
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var csrcs: [UInt32] = []
    /// RFC 3550 §5.3.1 extension: profile-defined id and 32-bit words.
    public var extensionProfile: UInt16?
    public var extensionData: [UInt8] = []
    /// Padding bytes at the end of the packet (the last byte holds the count).
    public var paddingLength = 0
    /// One RFC 8285 one-byte header extension element, written inline (no
    /// array per packet); the publisher's only one is video orientation (CVO).
    /// Exclusive with `extensionProfile`.
    public var oneByteExtension: OneByteExtension?

    public static let fixedSize = 12

    public init(payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32, marker: Bool = false) {
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.marker = marker
    }

    /// Bytes this header takes before the payload.
    public var size: Int {
        Self.fixedSize + 4 * csrcs.count + (extensionProfile == nil ? 0 : 4 + extensionData.count)
            + (oneByteExtension == nil ? 0 : 8)
    }

    /// Appends the header to `out`.
    public func write(to out: inout [UInt8]) {
        precondition(csrcs.count < 16, "at most 15 CSRCs")
        precondition(extensionData.count % 4 == 0 && extensionData.count / 4 <= Int(UInt16.max),
                     "header extension must be whole 32-bit words")
        precondition(extensionProfile == nil || oneByteExtension == nil, "one header extension block per packet")
        var first: UInt8 = 2 << 6 | UInt8(csrcs.count)
        if paddingLength > 0 { first |= 0x20 }
        if extensionProfile != nil || oneByteExtension != nil { first |= 0x10 }
        out.append(first)
        out.append((marker ? 0x80 : 0) | (payloadType & 0x7f))
        out.appendBigEndian(sequenceNumber)
        out.appendBigEndian(timestamp)
        out.appendBigEndian(ssrc)
        for csrc in csrcs { out.appendBigEndian(csrc) }
        if let profile = extensionProfile {
            out.appendBigEndian(profile)
            out.appendBigEndian(UInt16(extensionData.count / 4))
            out.append(contentsOf: extensionData)
        }
        if let element = oneByteExtension {
            // 0xBEDE, one 32-bit word: the element (ID, length - 1 = 0, value), two padding bytes.
            out.appendBigEndian(OneByteExtension.profile)
            out.appendBigEndian(UInt16(1))
            out.append(element.id << 4)
            out.append(element.value)
            out.append(0)
            out.append(0)
        }
    }
}

public enum RTPError: Error, Hashable, Sendable, CustomStringConvertible {
    case tooShort(needed: Int, got: Int)
    case badVersion(UInt8)
    case badPadding

    public var description: String {
        switch self {
        case .tooShort(let needed, let got): "RTP packet too short: needs \(needed) bytes, has \(got)"
        case .badVersion(let v): "not RTP version 2 (version \(v))"
        case .badPadding: "RTP padding longer than the packet"
        }
    }
}

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
