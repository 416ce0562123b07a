import Foundation
import Logging
import Testing
import TestSupport

@testable import SessionServer

/// Tokens are credentials: none may reach the router's log, at any level,
/// whether it was accepted or refused, and wherever it came (an
/// `Authorization` header, a `?token=` query, a request cut off by a deadline).
@Suite("Tokens in the log")
struct TokenLoggingTests {
    @Test("no token, good or bad, reaches the router's log at trace level")
    func tokensNeverLogged() async throws {
        let (logger, log) = RecordingLogHandler.logger(label: "router")
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = SessionServer(
            configuration: SessionServerConfiguration(
                host: "127.0.0.1", port: 0, serverLimits: ServerLimits(requestBodyTimeout: .seconds(1))),
            secret: testSecret, mediaEngine: FakeMediaEngine(), logger: logger, onServerRunning: { continuation.yield($0) })
        var tokens: [String] = []
        try await whileRunning({ try await server.run() }, ports: ports) { port in
            let project = try await server.tokens.makeProjectToken()
            let sid = try server.registry.createSession(mediaMode: .routed).sessionID
            let publisher = try await server.tokens.makeClientToken(sessionID: sid, role: .publisher, connectionData: "")
            let foreign = try await TokenAuthority(secret: otherSecret).makeProjectToken()
            tokens = [project, publisher, foreign]
            let upgrade = "Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            let requests = [
                // Accepted, then refused, in the header.
                "POST /v2/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(project)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                "POST /v2/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(foreign)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                // A publish (the fake media engine takes any offer).
                "POST /v2/sessions/\(sid)/publish HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(publisher)\r\n"
                    + "Content-Type: application/sdp\r\nContent-Length: 3\r\nConnection: close\r\n\r\nv=0",
                // Signalling: refused, then upgraded, with the token in the query.
                "GET /v2/sessions/\(sid)/connect?token=\(foreign) HTTP/1.1\r\n" + upgrade,
                "GET /v2/sessions/\(sid)/connect?token=\(publisher) HTTP/1.1\r\n" + upgrade,
                // A body that never comes (refused for want of a header token, then cut off at its
                // deadline while the server drains it), with a token in the query.
                "POST /v2/sessions?token=\(project) HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
            ]
            let answers = try await onOwnThread {
                try requests.map { request -> String in
                    let connection = try RawTCPConnection(port: port)
                    _ = connection.send(request)
                    guard case .bytes(let bytes) = connection.read(timeout: 10) else { return "nothing" }
                    let status = String(decoding: bytes.prefix(12), as: UTF8.self)
                    // Every connection but the upgraded one ends: wait for it, so its last log line is in.
                    if status != "HTTP/1.1 101" { _ = connection.readToEnd(timeout: 10) }
                    return status
                }
            }
            #expect(answers == ["HTTP/1.1 200", "HTTP/1.1 401", "HTTP/1.1 201", "HTTP/1.1 401", "HTTP/1.1 101", "HTTP/1.1 401"])
        }
        let text = log.text
        // The check can fail: the router logged these requests (refusals, the cut-off body).
        #expect(text.contains("request refused") && text.contains("request body did not arrive"), "\(text.prefix(2000))")
        for token in tokens {
            #expect(!text.contains(token), "a token reached the log")
            // Its signature alone is as good as the token to a reader of the log.
            let signature = String(token.split(separator: ".").last ?? "")
            #expect(signature.count >= 20 && !text.contains(signature), "a token's signature reached the log")
        }
    }
}
