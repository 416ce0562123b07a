import Foundation
import Testing

@testable import SessionServerTLS

/// The router's HTTPS identity: the self-signed certificate made once and loaded
/// again, and the errors for files that are missing, half there or not PEM.
@Suite("Router TLS identity")
struct RouterTLSIdentityTests {
    private func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "camagent-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    @Test("made on the first call (key mode 0600), the same certificate on the second")
    func selfSignedIsMadeOnceAndKept() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try RouterTLSIdentity.selfSigned(in: directory, hostNames: ["10.1.2.3", "kiosk.local"])
        #expect(first.created)
        #expect(first.certificateFile == directory + "/router-tls.crt")
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/router-tls.key")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let second = try RouterTLSIdentity.selfSigned(in: directory, hostNames: [])
        #expect(!second.created)
        #expect(second.identity == first.identity)
        // 32 bytes as colon-separated hex, and a base64 SHA-256 (44 characters).
        #expect(first.identity.fingerprint.split(separator: ":").count == 32)
        #expect(first.identity.publicKeyPin.count == 44)
    }

    @Test("a key without its certificate is someone's file: refused, never overwritten")
    func halfAPairIsRefused() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "mine\n".write(toFile: directory + "/router-tls.key", atomically: false, encoding: .utf8)
        #expect(throws: RouterTLSError.incomplete(present: directory + "/router-tls.key",
                                                  missing: directory + "/router-tls.crt")) {
            try RouterTLSIdentity.selfSigned(in: directory, hostNames: [])
        }
        #expect(try String(contentsOfFile: directory + "/router-tls.key", encoding: .utf8) == "mine\n")
    }

    @Test("missing files and files that are not PEM get errors that name them")
    func badFiles() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try RouterTLSIdentity.load(certificateFile: directory + "/none.crt", keyFile: directory + "/none.key")
            Issue.record("a missing certificate was loaded")
        } catch {
            #expect("\(error)".contains("cannot read the TLS certificate \(directory)/none.crt"))
        }
        try "not PEM\n".write(toFile: directory + "/bad.crt", atomically: false, encoding: .utf8)
        try "not PEM\n".write(toFile: directory + "/bad.key", atomically: false, encoding: .utf8)
        do {
            _ = try RouterTLSIdentity.load(certificateFile: directory + "/bad.crt", keyFile: directory + "/bad.key")
            Issue.record("a file that is not PEM was loaded")
        } catch {
            #expect("\(error)".contains("cannot use \(directory)/bad.crt and \(directory)/bad.key for TLS"))
        }
        // Two good files that are not a pair: the certificate with another one's key.
        let one = try RouterTLSIdentity.makeSelfSigned(hostNames: [])
        let other = try RouterTLSIdentity.makeSelfSigned(hostNames: [])
        try one.certificateChainPEM.write(toFile: directory + "/one.crt", atomically: false, encoding: .utf8)
        try other.privateKeyPEM.write(toFile: directory + "/other.key", atomically: false, encoding: .utf8)
        do {
            _ = try RouterTLSIdentity.load(certificateFile: directory + "/one.crt", keyFile: directory + "/other.key")
            Issue.record("a certificate was loaded with a key that is not its own")
        } catch {
            #expect("\(error)".contains("cannot use \(directory)/one.crt and \(directory)/other.key for TLS"))
        }
    }
}
