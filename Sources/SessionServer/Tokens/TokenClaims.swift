import FoundationEssentials
import JWTKit

/// What a verified client token says: which session, which role, the
/// connection data the token's minter attached.
public struct ClientTokenClaims: Sendable, Equatable {
    public var sessionID: String
    public var role: Role
    public var connectionData: String
    public var issuedAt: Date
    public var expiresAt: Date
    /// The `jti` claim: random, unique per token.
    public var tokenID: String
}

/// What a verified project token says (it carries no session: it is the
/// key to the REST calls that make sessions and tokens).
public struct ProjectTokenClaims: Sendable, Equatable {
    public var issuedAt: Date
    public var expiresAt: Date
    public var tokenID: String
}

/// A token that passed the signature and expiry checks.
public enum VerifiedToken: Sendable, Equatable {
    case project(ProjectTokenClaims)
    case client(ClientTokenClaims)
}

/// The JWT payload as it travels: one shape for both kinds of token, the
/// claim names of the contract (DESIGN.md "Sessions"). A project token has
/// `ist: "project"` and no session claims; a client token has `session_id`,
/// `role` and `connection_data`.
struct TokenPayload: JWTPayload, Equatable {
    var ist: String?
    var sessionID: String?
    var role: String?
    var connectionData: String?
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var jti: IDClaim

    enum CodingKeys: String, CodingKey {
        case ist
        case sessionID = "session_id"
        case role
        case connectionData = "connection_data"
        case iat, exp, jti
    }

    /// The signature is JWTKit's to check; expiry is checked by
    /// `TokenAuthority` against its own clock, so tests can move time.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
