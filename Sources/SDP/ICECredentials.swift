/// The limits RFC 8839 §5.4 puts on a peer's ICE credentials: at most 256
/// characters each. Beyond them a connectivity check's USERNAME ("theirs:ours")
/// would not fit a STUN attribute's 16-bit length. The lower bounds (4 and 22)
/// are not enforced: a short credential does no harm, and some peers use one.
enum ICECredentials {
    static let maxLength = 256

    static func areWithinLimits(ufrag: String, password: String) -> Bool {
        ufrag.utf8.count <= maxLength && password.utf8.count <= maxLength
    }

    static let beyondLimits = SDPError.missing("ICE credentials of at most \(maxLength) bytes each (a=ice-ufrag, a=ice-pwd)")
}
