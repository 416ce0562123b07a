import Foundation
import MediaTypes
import Testing

@testable import SessionServer

/// Sessions left without a connection are let go after the idle timeout, so a
/// long-running router does not fill its session limit with sessions nobody uses.
@Suite("Session expiry")
struct SessionExpiryTests {
    /// A clock the test moves.
    final class TestClock: Sendable {
        private let time = PThreadLocked(Date(timeIntervalSince1970: 1_700_000_000))
        var now: Date { time.withLock { $0 } }
        func advance(hours: Double) { time.withLock { $0 += hours * 3600 } }
    }

    @Test("idle for the timeout: removed (and its place under the limit freed); a connection keeps it; idle time starts again when it empties")
    func expiry() throws {
        let clock = TestClock()
        let registry = SessionRegistry(limits: RegistryLimits(maxSessions: 2, sessionIdleTimeout: .seconds(24 * 3600)),
                                       now: { clock.now })
        let unused = try registry.createSession(mediaMode: .routed).sessionID
        let used = try registry.createSession(mediaMode: .routed).sessionID
        #expect(throws: RegistryError.self) { try registry.createSession(mediaMode: .routed) }

        clock.advance(hours: 1)
        let connection = try registry.connect(sessionID: used, role: .publisher, data: "", outbox: Outbox())
        clock.advance(hours: 22)
        #expect(registry.expireIdleSessions() == [])          // 23 h: not yet
        clock.advance(hours: 1.5)
        #expect(registry.expireIdleSessions() == [unused])    // 24.5 h without a connection
        #expect(registry.session(unused) == nil)
        #expect(throws: RegistryError.self) { try registry.streams(sessionID: unused) }
        #expect(registry.session(used) != nil)                // it has a connection
        let third = try registry.createSession(mediaMode: .routed).sessionID   // the freed place

        // Its connection leaves: its idle time starts at the next look, not at its creation.
        _ = registry.disconnect(sessionID: used, connectionID: connection.connectionId, reason: .clientDisconnected)
        #expect(registry.expireIdleSessions() == [])
        clock.advance(hours: 23.9)
        #expect(registry.expireIdleSessions() == [])
        clock.advance(hours: 0.2)
        // The third, made at 24.5 h and never joined, goes too.
        #expect(registry.expireIdleSessions() == [used, third].sorted())
    }

    @Test("no timeout: sessions stay")
    func never() throws {
        let clock = TestClock()
        let registry = SessionRegistry(limits: RegistryLimits(sessionIdleTimeout: nil), now: { clock.now })
        let id = try registry.createSession(mediaMode: .routed).sessionID
        clock.advance(hours: 24 * 365)
        #expect(registry.expireIdleSessions() == [])
        #expect(registry.session(id) != nil)
    }
}
