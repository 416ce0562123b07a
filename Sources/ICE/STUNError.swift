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
