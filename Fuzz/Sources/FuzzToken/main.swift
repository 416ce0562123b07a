// Tokens (JWT, HS256): TokenAuthority.verify, the check every REST call and
// signalling connection makes. The first byte picks what the rest is:
//   even: the token text itself (JWT structure, base64url, header, JSON);
//   odd:  a claims JSON object, sent in a token signed with the router's key,
//         so the claim checks behind the signature are reached too.
// What verifies as a client token must be one the authority would issue:
// well-formed session ID, a role, bounded connection data; re-issuing it
// with makeClientToken verifies to the same claims.
import Crypto
import FoundationEssentials
import FuzzSupport
@testable import SessionServer

private let key = Array("fuzz-secret-fuzz-secret-fuzz-secret!".utf8)
private let authority = TokenAuthority(secret: try! RouterSecret(key: key))
/// Claims are judged at a fixed time, so an input means the same on every run.
private let now = Date(timeIntervalSince1970: 1_800_000_000)

private func base64URL(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

private func signed(claims: [UInt8]) -> String {
    let input = base64URL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + base64URL(claims)
    let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: key))
    return input + "." + base64URL(mac)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    guard let mode = input.first else { return 0 }
    let rest = Array(input.dropFirst())
    let token = mode & 1 == 0 ? String(decoding: rest, as: UTF8.self) : signed(claims: rest)
    runBlocking {
        guard let verified = try? await authority.verify(token, now: now) else { return }
        guard case .client(let claims) = verified else { return }
        check(RandomID.isWellFormed(claims.sessionID, maxLength: TokenAuthority.maxSessionIDLength), "session ID \(claims.sessionID)")
        check(claims.connectionData.count <= TokenAuthority.maxConnectionDataLength, "connection data of \(claims.connectionData.count)")
        check(claims.expiresAt > now, "an expired token verified")
        let again: String
        do {
            again = try await authority.makeClientToken(sessionID: claims.sessionID, role: claims.role,
                                                        connectionData: claims.connectionData, now: now)
        } catch { fatalError("claims that verified cannot be issued: \(error)") }
        guard case .client(let back)? = try? await authority.verify(again, now: now) else {
            fatalError("a token we issued does not verify")
        }
        check(back.sessionID == claims.sessionID && back.role == claims.role && back.connectionData == claims.connectionData,
              "re-issued claims differ: \(claims) → \(back)")
    }
    return 0
}

runFuzzer()
