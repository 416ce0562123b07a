import Foundation
import JWTKit
import Testing

@testable import SessionServer

@Suite("Tokens")
struct TokenTests {
    let authority = TokenAuthority(secret: testSecret)

    @Test("a client token's claims come back as minted")
    func clientRoundTrip() async throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000.7)
        let token = try await authority.makeClientToken(
            sessionID: "session-1", role: .publisherOnly, connectionData: "name=kiosk", expireIn: 600, now: now)
        let verified = try await authority.verify(token, now: now)
        guard case .client(let claims) = verified else { Issue.record("not a client token: \(verified)"); return }
        #expect(claims.sessionID == "session-1")
        #expect(claims.role == .publisherOnly)
        #expect(claims.connectionData == "name=kiosk")
        #expect(claims.issuedAt == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(claims.expiresAt == Date(timeIntervalSince1970: 1_800_000_600))
        #expect(!claims.tokenID.isEmpty)
    }

    @Test("the payload carries the contract's claim names")
    func claimNames() async throws {
        let token = try await authority.makeClientToken(sessionID: "s", role: .moderator, connectionData: "d")
        let payload = try decodePayload(token)
        #expect(Set(payload.keys) == ["session_id", "role", "connection_data", "iat", "exp", "jti"])
        #expect(payload["role"] as? String == "moderator")
        #expect(payload["iat"] as? Int != nil)
        let project = try decodePayload(try await authority.makeProjectToken())
        #expect(Set(project.keys) == ["ist", "iat", "exp", "jti"])
        #expect(project["ist"] as? String == "project")
    }

    @Test("a project token verifies as one; the default lifetime is 24 h")
    func projectRoundTrip() async throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try await authority.makeProjectToken(now: now)
        let verified = try await authority.verify(token, now: now)
        guard case .project(let claims) = verified else { Issue.record("not a project token"); return }
        #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == 86_400)
    }

    @Test("every token has its own jti")
    func uniqueIDs() async throws {
        let a = try await authority.makeProjectToken(), b = try await authority.makeProjectToken()
        #expect(try decodePayload(a)["jti"] as? String != decodePayload(b)["jti"] as? String)
    }

    @Test("an expired token is refused as expired")
    func expiry() async throws {
        let minted = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try await authority.makeClientToken(sessionID: "s", role: .subscriber, expireIn: 60, now: minted)
        _ = try await authority.verify(token, now: minted.addingTimeInterval(59))
        await #expect(throws: TokenError.expired(at: minted.addingTimeInterval(60))) {
            try await authority.verify(token, now: minted.addingTimeInterval(60))
        }
    }

    @Test("a token signed with another secret is refused")
    func wrongSecret() async throws {
        let other = TokenAuthority(secret: otherSecret)
        let token = try await other.makeProjectToken()
        await #expect(throws: TokenError.badSignature) { try await authority.verify(token) }
    }

    @Test("garbage, a tampered payload and an empty string are refused", arguments: ["", "abc", "a.b.c", "x.y"])
    func malformed(_ text: String) async throws {
        await #expect(throws: TokenError.self) { try await authority.verify(text) }
    }

    @Test("a payload changed after signing fails the signature")
    func tampered() async throws {
        let token = try await authority.makeClientToken(sessionID: "s", role: .subscriber)
        var parts = token.split(separator: ".").map(String.init)
        var payload = try decodePayload(token)
        payload["role"] = "moderator"
        parts[1] = Data(try JSONSerialization.data(withJSONObject: payload)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        await #expect(throws: TokenError.badSignature) { try await authority.verify(parts.joined(separator: ".")) }
    }

    @Test("lifetimes of 1 s to 30 days are minted, others refused")
    func lifetimes() async throws {
        _ = try await authority.makeProjectToken(expireIn: 1)
        _ = try await authority.makeProjectToken(expireIn: 30 * 86_400)
        await #expect(throws: TokenError.lifetimeOutOfRange(seconds: 30 * 86_400 + 1, maximum: 30 * 86_400)) {
            try await authority.makeProjectToken(expireIn: 30 * 86_400 + 1)
        }
        await #expect(throws: TokenError.lifetimeOutOfRange(seconds: 0, maximum: 30 * 86_400)) {
            try await authority.makeClientToken(sessionID: "s", role: .publisher, expireIn: 0)
        }
    }

    @Test("connection data up to 1000 characters, and session ids must be URL-safe")
    func dataAndSessionLimits() async throws {
        _ = try await authority.makeClientToken(sessionID: "s", role: .publisher, connectionData: String(repeating: "é", count: 1000))
        await #expect(throws: TokenError.connectionDataTooLong(length: 1001, maximum: 1000)) {
            try await authority.makeClientToken(sessionID: "s", role: .publisher, connectionData: String(repeating: "x", count: 1001))
        }
        await #expect(throws: TokenError.badSessionID("a/b")) {
            try await authority.makeClientToken(sessionID: "a/b", role: .publisher)
        }
    }

    @Test("capabilities follow the role")
    func capabilities() {
        #expect(Role.subscriber.capabilities == Capabilities(publish: false, subscribe: true, forceDisconnect: false, captions: false))
        #expect(Role.publisher.capabilities == Capabilities(publish: true, subscribe: true, forceDisconnect: false, captions: false))
        #expect(Role.publisherOnly.capabilities == Capabilities(publish: true, subscribe: false, forceDisconnect: false, captions: false))
        #expect(Role.moderator.capabilities == Capabilities(publish: true, subscribe: true, forceDisconnect: true, captions: true))
        #expect(Role(rawValue: "publisher-only") == .publisherOnly)
    }

    private func decodePayload(_ token: String) throws -> [String: Any] {
        var part = String(token.split(separator: ".")[1])
        part = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while part.count % 4 != 0 { part += "=" }
        let data = try #require(Data(base64Encoded: part))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

@Suite("Secret file")
struct RouterSecretTests {
    @Test("a missing file is created with 64 hex digits, mode 0600, and read back the same")
    func create() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        let created = try RouterSecret.load(orCreateAt: path)
        #expect(created.wasCreated)
        #expect(created.key.count == 64)
        #expect(created.key.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let again = try RouterSecret.load(orCreateAt: path)
        #expect(!again.wasCreated)
        #expect(again.key == created.key)
        #expect(try RouterSecret.load(from: path).key == created.key)
    }

    @Test("the content is trimmed of surrounding whitespace and used as bytes")
    func trimmed() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        let key = "a passphrase of more than 32 bytes, spaces inside"
        try Data("  \(key) \n\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try RouterSecret.load(from: path).key == Array(key.utf8))
    }

    @Test("a key shorter than 32 bytes is used and flagged; where a minimum is asked (a viewer token), refused")
    func tooShort() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        try Data("short\n".utf8).write(to: URL(fileURLWithPath: path))
        let short = try RouterSecret.load(orCreateAt: path)
        #expect(short.key == Array("short".utf8) && short.isShorterThanRecommended && !short.wasCreated)
        let fresh = temporaryPath()
        defer { unlink(fresh) }
        #expect(!(try RouterSecret.load(orCreateAt: fresh)).isShorterThanRecommended)
        #expect(throws: RouterSecretError.tooShort(path: path, length: 5, minimum: 32)) {
            try RouterSecret.load(orCreateAt: path, minimumLength: RouterSecret.recommendedKeyLength)
        }
        #expect(throws: RouterSecretError.tooShort(path: path, length: 5, minimum: 32)) {
            try RouterSecret.load(from: path, minimumLength: RouterSecret.recommendedKeyLength)
        }
        #expect(throws: RouterSecretError.empty(path: "")) { try RouterSecret(key: []) }
    }

    @Test("tokens signed with a short key verify with it and not with another short key")
    func shortKeySigns() async throws {
        let authority = TokenAuthority(secret: try RouterSecret(key: Array("s3cret".utf8)))
        let token = try await authority.makeClientToken(sessionID: "s", role: .subscriber, connectionData: "", expireIn: 600)
        _ = try await authority.verify(token)
        // "s3cret" and "s3cret" plus a zero byte are the same HMAC key; one byte more of anything else is not.
        let other = TokenAuthority(secret: try RouterSecret(key: Array("s3cret!".utf8)))
        await #expect(throws: TokenError.self) { try await other.verify(token) }
    }

    @Test("reading never creates; a missing or empty file says so")
    func missingAndEmpty() throws {
        let path = temporaryPath()
        #expect(throws: RouterSecretError.missing(path: path)) { try RouterSecret.load(from: path) }
        #expect(access(path, F_OK) != 0)
        try Data(" \n".utf8).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        #expect(throws: RouterSecretError.empty(path: path)) { try RouterSecret.load(orCreateAt: path) }
    }

    @Test("a directory that does not exist cannot hold a new secret")
    func cannotCreate() {
        #expect(throws: RouterSecretError.self) { try RouterSecret.load(orCreateAt: "/nonexistent-dir-\(getpid())/secret") }
    }

    private func temporaryPath() -> String {
        NSTemporaryDirectory() + "camagent-secret-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    }
}

/// Tokens made by hand with the router's secret: what minting never makes,
/// the router must not take either.
@Suite("Hand-made tokens")
struct HandMadeTokenTests {
    let authority = TokenAuthority(secret: testSecret)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func token(header: JWTHeader = ["alg": "HS256", "typ": "JWT"], iat: Double = 0, lifetime: Double = 600) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Array("0123456789abcdef0123456789abcdef".utf8)), digestAlgorithm: .sha256)
        let payload = TokenPayload(ist: nil, sessionID: "s", role: "subscriber", connectionData: nil,
                                   iat: IssuedAtClaim(value: now.addingTimeInterval(iat)),
                                   exp: ExpirationClaim(value: now.addingTimeInterval(iat + lifetime)),
                                   jti: IDClaim(value: "j"))
        return try await keys.sign(payload, header: header)
    }

    @Test("the same claims made by hand verify, so the checks below are the only difference")
    func baseline() async throws {
        _ = try await authority.verify(try await token(), now: now)
    }

    @Test("a header naming another algorithm than HS256 is refused, though the signature is HS256's")
    func headerAlgorithm() async throws {
        let forged = try await token(header: ["alg": "HS512", "typ": "JWT"])
        await #expect(throws: TokenError.malformed("the header's alg is \"HS512\", not HS256")) {
            try await authority.verify(forged, now: now)
        }
    }

    @Test("a lifetime over 30 days, or an iat more than 5 minutes ahead, is refused")
    func claimsMintingNeverMakes() async throws {
        let long = try await token(lifetime: 30 * 86_400 + 1)
        await #expect(throws: TokenError.malformed("exp is more than 30 days after iat")) { try await authority.verify(long, now: now) }
        _ = try await authority.verify(try await token(iat: 299), now: now)
        let ahead = try await token(iat: 301)
        await #expect(throws: TokenError.self) { try await authority.verify(ahead, now: now) }
    }

    @Test("an iat too large for any clock is refused in words, not with a trap")
    func iatBeyondInt64() async throws {
        let far = try await token(iat: 1e300, lifetime: 1)
        await #expect(throws: TokenError.malformed("iat lies in the future (1e+300, Unix time)")) {
            try await authority.verify(far, now: now)
        }
    }

    @Test("a missing claim is named in words, not as the decoder's dump")
    func missingClaim() async throws {
        struct NoExpiry: JWTPayload {
            var session_id = "s", role = "subscriber", jti = "j"
            var iat = 1_800_000_000
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Array("0123456789abcdef0123456789abcdef".utf8)), digestAlgorithm: .sha256)
        let text = try await keys.sign(NoExpiry())
        await #expect(throws: TokenError.malformed("claim exp is missing")) { try await authority.verify(text, now: now) }
    }
}
