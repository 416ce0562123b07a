import FoundationEssentials
import JWTKit

/// Mints and verifies the router's tokens: JWTs signed with HS256 and the
/// router's secret (DESIGN.md "Sessions": claims `session_id`, `role`,
/// `connection_data`, `iat`, `exp`, `jti`; a project token has `ist:
/// "project"`). Both `camagent token` and the router use it.
public struct TokenAuthority: Sendable {
    /// A token's lifetime when none is asked for: 24 hours.
    public static let defaultLifetime = 86_400
    /// The longest lifetime a token may have: 30 days.
    public static let maxLifetime = 30 * 86_400
    /// The contract's limit on `connection_data`, in characters.
    public static let maxConnectionDataLength = 1000
    public static let maxSessionIDLength = 128
    /// A longer string is not parsed as a token at all.
    static let maxTokenLength = 8 * 1024

    private let key: [UInt8]

    public init(secret: RouterSecret) {
        key = secret.key
    }

    /// A key collection holding only this router's HS256 key. JWTKit's
    /// collection is an actor that is filled asynchronously, so each call
    /// makes its own (an HMAC key is cheap to set up).
    private func keys() async -> JWTKeyCollection {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: key), digestAlgorithm: .sha256)
        return keys
    }

    /// A project token: the key to the REST calls that make sessions and tokens.
    public func makeProjectToken(expireIn seconds: Int = defaultLifetime, now: Date = Date()) async throws(TokenError) -> String {
        try Self.checkLifetime(seconds)
        let issued = Self.wholeSeconds(now)
        let payload = TokenPayload(
            ist: "project", sessionID: nil, role: nil, connectionData: nil,
            iat: IssuedAtClaim(value: issued), exp: ExpirationClaim(value: issued + Double(seconds)),
            jti: IDClaim(value: RandomID.make()))
        return try await sign(payload)
    }

    /// A client token for one session and one role.
    public func makeClientToken(
        sessionID: String, role: Role, connectionData: String = "",
        expireIn seconds: Int = defaultLifetime, now: Date = Date()
    ) async throws(TokenError) -> String {
        try Self.checkLifetime(seconds)
        guard RandomID.isWellFormed(sessionID, maxLength: Self.maxSessionIDLength) else { throw .badSessionID(sessionID) }
        guard connectionData.count <= Self.maxConnectionDataLength else {
            throw .connectionDataTooLong(length: connectionData.count, maximum: Self.maxConnectionDataLength)
        }
        let issued = Self.wholeSeconds(now)
        let payload = TokenPayload(
            ist: nil, sessionID: sessionID, role: role.rawValue, connectionData: connectionData,
            iat: IssuedAtClaim(value: issued), exp: ExpirationClaim(value: issued + Double(seconds)),
            jti: IDClaim(value: RandomID.make()))
        return try await sign(payload)
    }

    /// Checks the signature, the claims and the expiry (against `now`).
    public func verify(_ token: String, now: Date = Date()) async throws(TokenError) -> VerifiedToken {
        let token = String(token.trimmingSpaces)
        guard !token.isEmpty else { throw .malformed("empty token") }
        guard token.utf8.count <= Self.maxTokenLength else {
            throw .malformed("longer than \(Self.maxTokenLength) bytes")
        }
        let payload: TokenPayload
        do {
            payload = try await keys().verify(token, as: TokenPayload.self)
        } catch let error as JWTError {
            switch error.errorType {
            case .signatureVerificationFailed: throw .badSignature
            default: throw .malformed(error.reason ?? error.errorType.description)
            }
        } catch {
            throw .malformed("\(error)")
        }
        guard payload.exp.value > now else { throw .expired(at: payload.exp.value) }
        if let ist = payload.ist {
            guard ist == "project" else { throw .malformed("unknown ist \"\(ist.prefix(40))\"") }
            return .project(ProjectTokenClaims(issuedAt: payload.iat.value, expiresAt: payload.exp.value, tokenID: payload.jti.value))
        }
        guard let sessionID = payload.sessionID, RandomID.isWellFormed(sessionID, maxLength: Self.maxSessionIDLength) else {
            throw .malformed("no usable session_id claim")
        }
        guard let roleName = payload.role else { throw .malformed("no role claim") }
        guard let role = Role(rawValue: roleName) else { throw .malformed("unknown role \"\(roleName.prefix(40))\"") }
        let data = payload.connectionData ?? ""
        guard data.count <= Self.maxConnectionDataLength else { throw .malformed("connection_data longer than \(Self.maxConnectionDataLength) characters") }
        return .client(ClientTokenClaims(
            sessionID: sessionID, role: role, connectionData: data,
            issuedAt: payload.iat.value, expiresAt: payload.exp.value, tokenID: payload.jti.value))
    }

    private func sign(_ payload: TokenPayload) async throws(TokenError) -> String {
        do { return try await keys().sign(payload) } catch { throw .signingFailed("\(error)") }
    }

    private static func checkLifetime(_ seconds: Int) throws(TokenError) {
        guard (1...maxLifetime).contains(seconds) else { throw .lifetimeOutOfRange(seconds: seconds, maximum: maxLifetime) }
    }

    /// `iat` and `exp` are whole seconds, as JWT readers expect.
    private static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }
}
