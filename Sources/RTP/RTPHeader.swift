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
        // Whole 32-bit words: each append is a runtime call (uniqueness, capacity), so not a byte at a time.
        out.appendBigEndian(UInt32(first) << 24 | UInt32((marker ? 0x80 : 0) | (payloadType & 0x7f)) << 16
                            | UInt32(sequenceNumber))
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
            out.appendBigEndian(UInt32(OneByteExtension.profile) << 16 | 1)
            out.appendBigEndian(UInt32(element.id << 4) << 24 | UInt32(element.value) << 16)
        }
    }
}
