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
    /// How far a token's `iat` may lie ahead of the router's clock (another
    /// machine's clock minting it may run a little fast).
    static let clockSkew = 300.0

    private let key: [UInt8]

    public init(secret: RouterSecret) {
        // HMAC pads a key shorter than SHA-256's 64-byte block with zeros (RFC 2104 §2), so the
        // key padded to 32 bytes signs exactly as the key itself does, and jwt-kit, which asserts
        // (in debug builds) on a key shorter than the hash, takes it.
        key = secret.key + [UInt8](repeating: 0, count: max(0, RouterSecret.recommendedKeyLength - secret.key.count))
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
        // JWTKit signs with the one key whatever the header names: a header that
        // says another algorithm than the one used is not this router's token.
        guard let algorithm = Self.headerAlgorithm(of: token) else { throw .malformed("no JSON header with an alg") }
        guard algorithm == "HS256" else { throw .malformed("the header's alg is \"\(algorithm.prefix(20))\", not HS256") }
        let payload: TokenPayload
        do {
            payload = try await keys().verify(token, as: TokenPayload.self)
        } catch let error as JWTError {
            switch error.errorType {
            case .signatureVerificationFailed: throw .badSignature
            default:
                // JWTKit gives a claim it could not decode as its decoder's dump: name it instead.
                if let problem = Self.claimProblem(inPayloadOf: token) { throw .malformed(problem) }
                throw .malformed(error.reason ?? error.errorType.description)
            }
        } catch {
            throw .malformed("\(error)")
        }
        guard payload.exp.value > now else { throw .expired(at: payload.exp.value) }
        // What minting allows, checked again: a hand-made token gets no more.
        guard payload.iat.value.timeIntervalSince(now) <= Self.clockSkew else {
            throw .malformed("iat lies in the future (\(unixTime(payload.iat.value)), Unix time)")
        }
        guard payload.exp.value.timeIntervalSince(payload.iat.value) <= Double(Self.maxLifetime) else {
            throw .malformed("exp is more than 30 days after iat")
        }
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

    /// The `alg` of a compact JWT's header (base64url JSON), nil when there is none.
    static func headerAlgorithm(of token: String) -> String? {
        guard let first = token.split(separator: ".", omittingEmptySubsequences: false).first, first.count <= 1024,
              let data = base64URLDecoded(first) else { return nil }
        struct Header: Decodable { var alg: String }
        return try? JSONDecoder().decode(Header.self, from: data).alg
    }

    /// Why the token's payload is not the contract's claims, in words; nil when it is.
    static func claimProblem(inPayloadOf token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        guard let data = base64URLDecoded(parts[1]) else { return "the payload is not base64url" }
        do {
            _ = try JSONDecoder().decode(TokenPayload.self, from: data)
            return nil
        } catch let error as DecodingError {
            return describe(error, document: "the payload", member: { "claim \($0)" })
        } catch {
            return nil
        }
    }

    /// One part of a compact JWT (base64url, unpadded) as bytes.
    private static func base64URLDecoded(_ part: Substring) -> Data? {
        var text = String(part.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        return Data(base64Encoded: text)
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
