import WireFormat

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
            // Class (hundreds) and number (0-99, RFC 8489 §14.8): a number of 100 or more
            // would be read as another code than any ERROR-CODE could carry.
            guard value.count >= 4, value[3] < 100 else { throw .badAttribute(type: type) }
            self = .errorCode(code: Int(value[2] & 0x07) * 100 + Int(value[3]),
                              reason: String(decoding: value[4...], as: UTF8.self))
        case Self.softwareType:
            self = .software(String(decoding: value, as: UTF8.self))
        default:
            self = .other(type: type, value: value)
        }
    }
}
