import FoundationEssentials

/// Why a token could not be minted or was not accepted.
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Minting: the lifetime asked for is not 1 s to 30 days.
    case lifetimeOutOfRange(seconds: Int, maximum: Int)
    /// Minting: `connection_data` longer than the contract's 1000 characters.
    case connectionDataTooLong(length: Int, maximum: Int)
    /// Minting: a session id that is empty, too long or not URL-safe.
    case badSessionID(String)
    /// Minting: a role the contract does not know.
    case unknownRole(String)
    /// Minting: the JWT library failed (should not happen with an HMAC key).
    case signingFailed(String)
    /// Verifying: not a JWT, or its claims are not the contract's.
    case malformed(String)
    /// Verifying: the signature does not match this router's secret.
    case badSignature
    /// Verifying: `exp` has passed.
    case expired(at: Date)

    public var description: String {
        switch self {
        case .lifetimeOutOfRange(let seconds, let maximum):
            "a token's lifetime must be 1 to \(maximum) seconds (30 days); \(seconds) was asked for"
        case .connectionDataTooLong(let length, let maximum):
            "connection data is \(length) characters long; at most \(maximum) are allowed"
        case .badSessionID(let id):
            "\"\(id.prefix(80))\" is not a session id (1 to \(TokenAuthority.maxSessionIDLength) characters of A-Z a-z 0-9 - _)"
        case .unknownRole(let role):
            "unknown role \"\(role.prefix(40))\": the roles are \(Role.allCases.map(\.rawValue).joined(separator: ", "))"
        case .signingFailed(let why): "could not sign the token: \(why)"
        case .malformed(let why): "the token is malformed: \(why)"
        case .badSignature: "the token's signature does not match this router's secret"
        case .expired(let at): "the token expired at \(unixTime(at)) (Unix time)"
        }
    }
}

/// Whole Unix seconds for a message. A signed token may still carry a time no Int64 holds
/// (iat 1e300): that is printed as the Double it is, never converted with a trap.
func unixTime(_ date: Date) -> String {
    let seconds = date.timeIntervalSince1970.rounded(.down)
    return Int64(exactly: seconds).map(String.init) ?? "\(seconds)"
}
