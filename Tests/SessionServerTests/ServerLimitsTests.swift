import Foundation
import Logging
import Testing
import TestSupport

@testable import SessionServer

/// The router on a real socket, with short limits: slow request heads are cut
/// off before any WebSocket upgrade, oversized headers refused, and an
/// upgraded signalling connection is not subject to the head deadline.
@Suite("Router limits")
struct RouterServerLimitsTests {
    let engine = FakeMediaEngine()

    /// Runs a router on 127.0.0.1 (a port the kernel picks) for the duration of `body`.
    func withRouter(_ limits: ServerLimits, _ body: (_ port: Int, _ server: SessionServer) async throws -> Void) async throws {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = SessionServer(
            configuration: SessionServerConfiguration(host: "127.0.0.1", port: 0, serverLimits: limits), secret: testSecret,
            mediaEngine: engine, logger: quietLogger(), onServerRunning: { continuation.yield($0) })
        try await whileRunning({ try await server.run() }, ports: ports) { port in try await body(port, server) }
    }

    @Test("a WebSocket handshake sent a byte at a time is closed at the head deadline; a whole one is upgraded and stays")
    func slowHandshake() async throws {
        try await withRouter(ServerLimits(requestHeadTimeout: .seconds(1))) { port, server in
            let sid = try server.registry.createSession(mediaMode: .routed).sessionID
            let token = try await server.tokens.makeClientToken(sessionID: sid, role: .publisher, connectionData: "")
            let handshake = "GET /v2/sessions/\(sid)/connect?token=\(token) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            let slowClosed = try await onOwnThread {
                let slow = try RawTCPConnection(port: port)
                for byte in Array(handshake.utf8) {
                    if case .closed = slow.read(timeout: 0.2) { return true }
                    if !slow.send([byte]) { return true }
                }
                return false
            }
            #expect(slowClosed, "a handshake dribbled over more than the deadline was upgraded")

            // A whole handshake: 101, then the connection outlives the deadline and answers a ping.
            let (upgraded, pong) = try await onOwnThread {
                let fast = try RawTCPConnection(port: port)
                _ = fast.send(handshake)
                guard case .bytes(let answer) = fast.read(timeout: 10) else { return ("", false) }
                Thread.sleep(forTimeInterval: 2)
                _ = fast.send([0x89, 0x80, 1, 2, 3, 4])  // a masked ping, no payload
                var received = answer
                let deadline = Date().addingTimeInterval(10)
                while Date() < deadline, !Self.frames(after: received).contains(0x8A) {
                    guard case .bytes(let more) = fast.read(timeout: 1) else { continue }
                    received += more
                }
                return (String(decoding: answer.prefix(12), as: UTF8.self), Self.frames(after: received).contains(0x8A))
            }
            #expect(upgraded == "HTTP/1.1 101")
            #expect(pong, "no pong after the head deadline: the upgraded connection was cut")
        }
    }

    @Test("oversized headers are refused (400 saying why, or a reset); the router goes on answering")
    func headerLimit() async throws {
        try await withRouter(ServerLimits(maxHeaderBytes: 4096)) { port, _ in
            let (big, normal) = try await onOwnThread {
                let big = try RawTCPConnection(port: port)
                _ = big.send("GET /nothing-here HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 8192) + "\r\n\r\n")
                let normal = try RawTCPConnection(port: port)
                _ = normal.send("GET /nothing-here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return (big.readToEnd(timeout: 10), normal.readToEnd(timeout: 10))
            }
            // Read whole, the request would be a 404: it was not read. The 400 may be lost to the
            // reset of a close with unread bytes; when it arrives, it says why, as JSON like every refusal.
            let answer = String(decoding: big, as: UTF8.self)
            #expect(big.isEmpty || (answer.hasPrefix("HTTP/1.1 400") && answer.contains("application/json")
                    && answer.hasSuffix(#"{"code":400,"message":"the request's header lines are over the limit (4096 bytes, 100 lines)"}"#)),
                    "\(answer.prefix(300))")
            #expect(String(decoding: normal.prefix(12), as: UTF8.self) == "HTTP/1.1 404")
        }
    }

    @Test("a head the decoder refuses, before any upgrade is decided, is closed rather than held for ever")
    func refusedHead() async throws {
        try await withRouter(ServerLimits(requestHeadTimeout: .seconds(1))) { port, _ in
            let (closed, normal) = try await onOwnThread {
                let garbage = try RawTCPConnection(port: port)
                _ = garbage.send("NOT HTTP AT ALL\r\n\r\n")
                let closed = RouterServerLimitsTests.closedWithin(garbage, seconds: 10)
                let normal = try RawTCPConnection(port: port)
                _ = normal.send("GET /nothing-here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return (closed, normal.readToEnd(timeout: 10))
            }
            #expect(closed, "a refused head held its connection (and a place under the connection limit)")
            #expect(String(decoding: normal.prefix(12), as: UTF8.self) == "HTTP/1.1 404")
        }
    }

    @Test("a plain HTTP connection left idle is closed at the idle timeout (a signalling one is not: see above)")
    func idleTimeout() async throws {
        try await withRouter(ServerLimits(idleTimeout: .seconds(1))) { port, _ in
            let (answer, closed) = try await onOwnThread {
                let connection = try RawTCPConnection(port: port)
                _ = connection.send("GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\n")
                let answer = connection.read(timeout: 10)
                return (answer, RouterServerLimitsTests.closedWithin(connection, seconds: 10))
            }
            guard case .bytes(let bytes) = answer else { Issue.record("no answer: \(answer)"); return }
            #expect(String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 404")
            #expect(closed, "an idle kept-alive connection stayed open")
        }
    }

    @Test("a REST body dribbled past its deadline is cut off, on the first request and on a later one")
    func slowBody() async throws {
        try await withRouter(ServerLimits(requestBodyTimeout: .seconds(1))) { port, server in
            let token = try await server.tokens.makeProjectToken()
            let body = Array(#"{"mediaMode": "routed", "padding": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#.utf8)
            let head = "POST /v2/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
            let results = try await onOwnThread {
                var results: [(first: RawTCPConnection.Read, closed: Bool)] = []
                for requestsBefore in 0..<2 {
                    let connection = try RawTCPConnection(port: port)
                    var first = RawTCPConnection.Read.nothing
                    if requestsBefore == 1 {
                        _ = connection.send(head)
                        _ = connection.send(body)
                        first = connection.read(timeout: 10)
                    }
                    _ = connection.send(head)
                    var closed = false
                    for byte in body {
                        if case .closed = connection.read(timeout: 0.2) { closed = true; break }
                        if !connection.send([byte]) { closed = true; break }
                    }
                    results.append((first, closed))
                }
                return results
            }
            #expect(results[0].closed, "a body on a new connection outlived its deadline")
            guard case .bytes(let bytes) = results[1].first else { Issue.record("no answer: \(results[1].first)"); return }
            #expect(String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 200")
            #expect(results[1].closed, "a later body on a kept-alive connection outlived its deadline")
        }
    }

    /// Reads until the server closes the connection or `seconds` pass.
    static func closedWithin(_ connection: RawTCPConnection, seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if case .closed = connection.read(timeout: 0.5) { return true }
        }
        return false
    }

    /// The first bytes of the WebSocket frames that follow the HTTP head in `bytes` (server frames are unmasked).
    static func frames(after bytes: [UInt8]) -> [UInt8] {
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<$0 + 4] == [13, 10, 13, 10] }) else { return [] }
        var index = end + 4
        var firsts: [UInt8] = []
        while index + 2 <= bytes.count {
            firsts.append(bytes[index])
            var length = Int(bytes[index + 1] & 0x7F)
            var header = 2
            if length == 126, index + 4 <= bytes.count {
                length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                header = 4
            } else if length == 127 {
                break
            }
            index += header + length
        }
        return firsts
    }
}
