internal import COpenSSL
import WireFormat

/// A STUN message (RFC 8489) as ICE uses it (RFC 8445): binding requests,
/// success and error responses and indications, with the attributes ICE
/// needs, MESSAGE-INTEGRITY (HMAC-SHA1 over short-term credentials) and
/// FINGERPRINT (CRC-32).
public struct STUNMessage: Hashable, Sendable {
    public enum Class: UInt16, Sendable {
        case request = 0x0000, indication = 0x0010, success = 0x0100, error = 0x0110
    }

    public static let bindingMethod: UInt16 = 0x001
    public static let magicCookie: UInt32 = 0x2112_a442

    public var messageClass: Class
    public var method: UInt16
    /// 96 bits, chosen at random per transaction.
    public var transactionID: [UInt8]
    public var attributes: [STUNAttribute]

    public init(_ messageClass: Class, method: UInt16 = bindingMethod, transactionID: [UInt8],
                attributes: [STUNAttribute] = []) {
        precondition(transactionID.count == 12, "a STUN transaction ID is 96 bits")
        self.messageClass = messageClass
        self.method = method
        self.transactionID = transactionID
        self.attributes = attributes
    }

    /// A fresh random transaction ID (OpenSSL's CSPRNG: IDs must not be guessable).
    public static func randomTransactionID() -> [UInt8] {
        var id = [UInt8](repeating: 0, count: 12)
        precondition(RAND_bytes(&id, 12) == 1, "RAND_bytes failed")
        return id
    }

    var messageType: UInt16 {
        // The class bits C0 and C1 sit at bits 4 and 8, between the method's bits.
        let m = method
        return (m & 0x000f) | (m & 0x0070) << 1 | (m & 0x0f80) << 2 | messageClass.rawValue
    }
}

extension STUNMessage {
    /// The message as sent: attributes, then MESSAGE-INTEGRITY when a key is
    /// given, then FINGERPRINT when asked (ICE always asks).
    public func encoded(integrityKey: [UInt8]? = nil, fingerprint: Bool = true) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(messageType)
        out.appendBigEndian(UInt16(0))   // length, set as attributes are added
        out.appendBigEndian(Self.magicCookie)
        out += transactionID
        for attribute in attributes { attribute.write(to: &out, transactionID: transactionID) }
        if let key = integrityKey {
            Self.setLength(&out, adding: 24)
            let mac = Self.hmacSHA1(key: key, out)
            Self.appendAttribute(STUNAttribute.messageIntegrityType, mac, to: &out)
        }
        if fingerprint {
            Self.setLength(&out, adding: 8)
            var crc = [UInt8]()
            crc.appendBigEndian(CRC32.checksum(out) ^ 0x5354_554e)
            Self.appendAttribute(STUNAttribute.fingerprintType, crc, to: &out)
        }
        Self.setLength(&out, adding: 0)
        return out
    }

    /// Sets the header's length field to the attributes so far plus `adding`.
    static func setLength(_ out: inout [UInt8], adding: Int) {
        let length = out.count - 20 + adding
        out[2] = UInt8(length >> 8)
        out[3] = UInt8(length & 0xff)
    }

    static func appendAttribute(_ type: UInt16, _ value: [UInt8], to out: inout [UInt8]) {
        out.appendBigEndian(type)
        out.appendBigEndian(UInt16(value.count))
        out += value
        while out.count % 4 != 0 { out.append(0) }
    }

    static func hmacSHA1(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha1(), key, Int32(key.count), data, data.count, &mac, &length)
        return mac
    }

    /// True when the first byte pair and the cookie say STUN (RFC 7983 demultiplexing).
    public static func looksLikeSTUN(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.count >= 20 && bytes[bytes.startIndex] < 4 && bytes.bigEndianUInt32(at: bytes.startIndex + 4) == magicCookie
    }

    /// Parses a message. With `integrityKey`, MESSAGE-INTEGRITY must be present
    /// and match; FINGERPRINT, when present, must always match.
    public init(parsing bytes: [UInt8], integrityKey: [UInt8]? = nil) throws(STUNError) {
        guard Self.looksLikeSTUN(bytes[...]) else { throw .notSTUN }
        let length = Int(bytes.bigEndianUInt16(at: 2))
        guard length % 4 == 0, bytes.count >= 20 + length else { throw .truncated }
        let type = bytes.bigEndianUInt16(at: 0)
        let classBits = type & 0x0110
        let method = (type & 0x000f) | (type & 0x00e0) >> 1 | (type & 0x3e00) >> 2
        let transactionID = Array(bytes[8..<20])
        var attributes: [STUNAttribute] = []
        var sawIntegrity = false
        var i = 20
        let end = 20 + length
        while i < end {
            guard i + 4 <= end else { throw .truncated }
            let attrType = bytes.bigEndianUInt16(at: i), attrLength = Int(bytes.bigEndianUInt16(at: i + 2))
            let valueStart = i + 4, valueEnd = valueStart + attrLength
            guard valueEnd <= end else { throw .truncated }
            let value = Array(bytes[valueStart..<valueEnd])
            switch attrType {
            case STUNAttribute.messageIntegrityType where !sawIntegrity:
                guard attrLength == 20 else { throw .badAttribute(type: attrType) }
                if let key = integrityKey {
                    // HMAC over everything before this attribute, the length covering it.
                    var covered = Array(bytes[0..<i])
                    Self.setLength(&covered, adding: 24)
                    guard Self.hmacSHA1(key: key, covered) == value else { throw .integrityMismatch }
                }
                sawIntegrity = true
            case STUNAttribute.fingerprintType:
                guard attrLength == 4 else { throw .badAttribute(type: attrType) }
                var covered = Array(bytes[0..<i])
                Self.setLength(&covered, adding: 8)
                guard CRC32.checksum(covered) ^ 0x5354_554e == value.bigEndianUInt32(at: 0) else { throw .fingerprintMismatch }
            default:
                // RFC 8489 §14.5: what follows MESSAGE-INTEGRITY is not covered by it and is
                // ignored (FINGERPRINT aside): a replayed check with USE-CANDIDATE or a higher
                // PRIORITY appended must not count.
                if !sawIntegrity {
                    attributes.append(try STUNAttribute(type: attrType, value: value, transactionID: transactionID))
                }
            }
            i = valueStart + (attrLength + 3) / 4 * 4
        }
        if integrityKey != nil && !sawIntegrity { throw .integrityMissing }
        self.init(Class(rawValue: classBits)!, method: method, transactionID: transactionID, attributes: attributes)
    }
}
