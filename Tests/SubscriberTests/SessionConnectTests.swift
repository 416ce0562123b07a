import Foundation
import Logging
import MediaTypes
import Testing
@testable import Session
@testable import WHIP
#if canImport(Glibc)
import Glibc
#endif

/// `Session.connect` against a server that stalls it at each step of a join:
/// `disconnect()` from another thread ends the join at once, with `notConnected`,
/// instead of after the 120 s timeout.
@Suite("Session connect: disconnect during a join")
struct SessionConnectTests {
    @Test("disconnect() ends a join with notConnected, long before its timeout",
          arguments: [Stall.tcpConnect, .request, .connected])
    func disconnectEndsTheJoin(stall: Stall) throws {
        let server = try StallingServer(stall: stall)
        let session = Session(url: "http://127.0.0.1:\(server.port)/v2/sessions/s1", token: "t", timeout: 120,
                              logger: Logger(label: "test"))
        let outcome = PThreadLocked<SessionError?>(nil)
        let started = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            started.signal()
            do throws(SessionError) { try session.connect() } catch { outcome.withLock { $0 = error } }
            ended.signal()
        }
        started.wait()
        #expect(server.reached.wait(timeout: .now() + 30) == .success, "the client never got to the stall")
        // The server sees nothing of a stalled TCP connect: leave the client a moment to get into it.
        if stall == .tcpConnect { Thread.sleep(forTimeInterval: 0.5) }
        session.disconnect()
        // A bound for the test, not a measurement: the join would otherwise last the 120 s timeout.
        #expect(ended.wait(timeout: .now() + 60) == .success, "connect did not return after disconnect")
        let error = outcome.withLock { $0 }
        #expect(error.map { if case .notConnected = $0 { true } else { false } } == true, "\(String(describing: error))")
        #expect(session.connectionId == nil)
    }
}
