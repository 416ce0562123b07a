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

/// The attributes camagent reads and writes; others are kept as raw bytes.
public enum STUNAttribute: Hashable, Sendable {
    case username(String)
    case xorMappedAddress(STUNAddress)
    case priority(UInt32)
    case useCandidate
    case iceControlled(tieBreaker: UInt64)
    case iceControlling(tieBreaker: UInt64)
    case errorCode(code: Int, reason: String)
    case software(String)
    case other(type: UInt16, value: [UInt8])

    static let usernameType: UInt16 = 0x0006, messageIntegrityType: UInt16 = 0x0008
    static let errorCodeType: UInt16 = 0x0009, xorMappedAddressType: UInt16 = 0x0020
    static let priorityType: UInt16 = 0x0024, useCandidateType: UInt16 = 0x0025
    static let softwareType: UInt16 = 0x8022, fingerprintType: UInt16 = 0x8028
    static let iceControlledType: UInt16 = 0x8029, iceControllingType: UInt16 = 0x802a
}

/// An IPv4 or IPv6 address and port, as 4 or 16 bytes in network order.
public struct STUNAddress: Hashable, Sendable, CustomStringConvertible {
    public var address: [UInt8]
    public var port: UInt16

    public init(address: [UInt8], port: UInt16) {
        precondition(address.count == 4 || address.count == 16, "IPv4 or IPv6")
        self.address = address
        self.port = port
    }

    public var description: String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") + ":\(port)" }
        let groups = stride(from: 0, to: 16, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
        return "[\(groups.joined(separator: ":"))]:\(port)"
    }
}

public enum STUNError: Error, Hashable, Sendable, CustomStringConvertible {
    case notSTUN
    case truncated
    case badAttribute(type: UInt16)
    case integrityMissing
    case integrityMismatch
    case fingerprintMismatch

    public var description: String {
        switch self {
        case .notSTUN: "not a STUN message"
        case .truncated: "STUN message truncated"
        case .badAttribute(let t): "malformed STUN attribute 0x\(String(t, radix: 16))"
        case .integrityMissing: "STUN message has no MESSAGE-INTEGRITY"
        case .integrityMismatch: "STUN MESSAGE-INTEGRITY does not match the password"
        case .fingerprintMismatch: "STUN FINGERPRINT does not match"
        }
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
            case STUNAttribute.messageIntegrityType:
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
                attributes.append(try STUNAttribute(type: attrType, value: value, transactionID: transactionID))
            }
            i = valueStart + (attrLength + 3) / 4 * 4
        }
        if integrityKey != nil && !sawIntegrity { throw .integrityMissing }
        self.init(Class(rawValue: classBits)!, method: method, transactionID: transactionID, attributes: attributes)
    }
}

extension STUNAttribute {
    func write(to out: inout [UInt8], transactionID: [UInt8]) {
        var value: [UInt8] = []
        let type: UInt16
        switch self {
        case .username(let name):
            type = Self.usernameType
            value = Array(name.utf8)
        case .xorMappedAddress(let a):
            type = Self.xorMappedAddressType
            value = [0, a.address.count == 4 ? 1 : 2]
            value.appendBigEndian(a.port ^ UInt16(STUNMessage.magicCookie >> 16))
            value += zip(a.address, Self.xorMask(transactionID)).map { $0 ^ $1 }
        case .priority(let p):
            type = Self.priorityType
            value.appendBigEndian(p)
        case .useCandidate:
            type = Self.useCandidateType
        case .iceControlled(let t), .iceControlling(let t):
            if case .iceControlled = self { type = Self.iceControlledType } else { type = Self.iceControllingType }
            value.appendBigEndian(UInt32(t >> 32))
            value.appendBigEndian(UInt32(t & 0xffff_ffff))
        case .errorCode(let code, let reason):
            type = Self.errorCodeType
            value = [0, 0, UInt8(code / 100), UInt8(code % 100)] + Array(reason.utf8)
        case .software(let s):
            type = Self.softwareType
            value = Array(s.utf8)
        case .other(let t, let v):
            type = t
            value = v
        }
        STUNMessage.appendAttribute(type, value, to: &out)
    }

    /// The magic cookie then the transaction ID: what XOR-MAPPED-ADDRESS is masked with.
    static func xorMask(_ transactionID: [UInt8]) -> [UInt8] {
        var mask: [UInt8] = []
        mask.appendBigEndian(STUNMessage.magicCookie)
        return mask + transactionID
    }

    init(type: UInt16, value: [UInt8], transactionID: [UInt8]) throws(STUNError) {
        switch type {
        case Self.usernameType:
            self = .username(String(decoding: value, as: UTF8.self))
        case Self.xorMappedAddressType:
            guard value.count >= 8, value[1] == 1 || value[1] == 2 else { throw .badAttribute(type: type) }
            let size = value[1] == 1 ? 4 : 16
            guard value.count == 4 + size else { throw .badAttribute(type: type) }
            let port = value.bigEndianUInt16(at: 2) ^ UInt16(STUNMessage.magicCookie >> 16)
            let address = zip(value[4...], Self.xorMask(transactionID)).map { $0 ^ $1 }
            self = .xorMappedAddress(STUNAddress(address: address, port: port))
        case Self.priorityType:
            guard value.count == 4 else { throw .badAttribute(type: type) }
            self = .priority(value.bigEndianUInt32(at: 0))
        case Self.useCandidateType:
            self = .useCandidate
        case Self.iceControlledType, Self.iceControllingType:
            guard value.count == 8 else { throw .badAttribute(type: type) }
            let t = UInt64(value.bigEndianUInt32(at: 0)) << 32 | UInt64(value.bigEndianUInt32(at: 4))
            self = type == Self.iceControlledType ? .iceControlled(tieBreaker: t) : .iceControlling(tieBreaker: t)
        case Self.errorCodeType:
            guard value.count >= 4 else { throw .badAttribute(type: type) }
            self = .errorCode(code: Int(value[2] & 0x07) * 100 + Int(value[3]),
                              reason: String(decoding: value[4...], as: UTF8.self))
        case Self.softwareType:
            self = .software(String(decoding: value, as: UTF8.self))
        default:
            self = .other(type: type, value: value)
        }
    }
}

/// CRC-32 (ISO 3309, the one zlib and STUN's FINGERPRINT use).
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xedb8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for b in bytes { crc = table[Int((crc ^ UInt32(b)) & 0xff)] ^ (crc >> 8) }
        return crc ^ 0xffff_ffff
    }
}
