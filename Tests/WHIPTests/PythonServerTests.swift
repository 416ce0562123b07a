import Foundation
import Testing
@testable import WHIP

/// Against Python's http.server and ssl module: servers nobody here wrote.
@Suite("WHIP client against Python's http.server", .serialized)
struct PythonServerTests {
    @Test func publishAndStopOverHTTP() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try PythonWHIPServer(directory: directory)
        defer { server.stop() }
        let client = try WHIPClient(endpoint: "http://127.0.0.1:\(server.port)/whip/live", token: "py-token", logger: quietLogger)

        let session = try client.publish(offer: offer)
        #expect(session.resourceURL == "http://127.0.0.1:\(server.port)/whip/session/7f3a")
        #expect(session.answerSDP.hasPrefix("v=0\r\no=- 1 1 IN IP4 127.0.0.1"))
        #expect(session.etag == "\"v1\"")
        try client.stop(session)

        let requests = server.requests
        #expect(requests.map(\.method) == ["POST", "DELETE"])
        #expect(requests.map(\.path) == ["/whip/live", "/whip/session/7f3a"])
        #expect(requests.first?.body == offer)
        #expect(requests.first?.headers["content-type"] == "application/sdp")
        #expect(requests.allSatisfy { $0.headers["authorization"] == "Bearer py-token" })
    }

    @Test func httpsWithAnUntrustedCertificateFailsThenWorksWhenAllowed() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try makeLocalhostCertificate(in: directory)
        let server = try PythonWHIPServer(directory: directory, certificate: certificate)
        defer { server.stop() }
        let endpoint = "https://localhost:\(server.port)/whip"

        let strict = try WHIPClient(endpoint: endpoint, timeout: 5, logger: quietLogger)
        let error = whipError { try strict.publish(offer: offer) }
        guard case .tls(let host, let reason) = error else {
            Issue.record("expected a TLS error, got \(String(describing: error))")
            return
        }
        #expect(host == "localhost")
        #expect(reason.contains("certificate"))
        #expect(server.requests.isEmpty)

        let lax = try WHIPClient(endpoint: endpoint, timeout: 5, allowInsecureTLS: true, logger: quietLogger)
        let session = try lax.publish(offer: offer)
        #expect(session.resourceURL == "https://localhost:\(server.port)/session/7f3a")
        #expect(session.answerSDP.hasPrefix("v=0"))
        try lax.stop(session)
        #expect(server.requests.map(\.method) == ["POST", "DELETE"])
    }

    @Test func httpsWithAPrivateCAChecksTheHostName() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try makeLocalhostCertificate(in: directory)
        let server = try PythonWHIPServer(directory: directory, certificate: certificate)
        defer { server.stop() }

        // Trusted, and the name matches: verified TLS works.
        let good = try WHIPClient(
            endpoint: "https://localhost:\(server.port)/whip", timeout: 5,
            trustedCertificatesFile: certificate.cert, logger: quietLogger)
        #expect(try good.publish(offer: offer).answerSDP.hasPrefix("v=0"))

        // Trusted, but the certificate is for "localhost", not 127.0.0.1.
        let wrongName = try WHIPClient(
            endpoint: "https://127.0.0.1:\(server.port)/whip", timeout: 5,
            trustedCertificatesFile: certificate.cert, logger: quietLogger)
        guard case .tls(let host, let reason) = whipError({ try wrongName.publish(offer: offer) }) else {
            Issue.record("expected a TLS error for the mismatched address")
            return
        }
        #expect(host == "127.0.0.1")
        #expect(reason.contains("mismatch"))
        #expect(server.requests.count == 1)
    }
}
