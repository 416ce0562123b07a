import Foundation
import Logging
import MediaTypes
import Testing
@testable import Session
@testable import WHIP
#if canImport(Glibc)
import Glibc
#endif

/// `Session.connect` against a server that upgrades the WebSocket and then says
/// nothing: `disconnect()` from another thread ends the wait for `connected`.
@Suite("Session connect: disconnect while waiting for connected")
struct SessionConnectTests {
    /// Listens on loopback, answers one WebSocket upgrade with 101, then keeps the connection silent.
    final class SilentWebSocketServer: @unchecked Sendable {   // `accepted` is set once, before `upgraded` is signalled
        let port: Int
        private let listener: Int32
        private var accepted: Int32 = -1
        let upgraded = DispatchSemaphore(value: 0)

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
            }
            guard bound, listen(fd, 1) == 0 else {
                close(fd)
                throw POSIXError(.EADDRNOTAVAIL)
            }
            listener = fd
            port = Int(UInt16(bigEndian: address.sin_port))
            Thread.detachNewThread { [self] in serve() }
        }

        deinit {
            close(listener)
            if accepted >= 0 { close(accepted) }
        }

        private func serve() {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            accepted = fd
            var head = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: head, as: UTF8.self).contains("\r\n\r\n") {
                let n = read(fd, &buffer, buffer.count)
                guard n > 0 else { return }
                head += buffer[0..<n]
            }
            let key = String(decoding: head, as: UTF8.self).split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(WebSocketConnection.acceptValue(for: key))\r\n\r\n"
            _ = Array(answer.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            upgraded.signal()
        }
    }

    @Test("disconnect() ends a connect waiting for `connected` with notConnected, long before its timeout")
    func disconnectEndsTheWait() throws {
        let server = try SilentWebSocketServer()
        let session = Session(url: "http://127.0.0.1:\(server.port)/v2/sessions/s1", token: "t", timeout: 120,
                              logger: Logger(label: "test"))
        let outcome = PThreadLocked<SessionError?>(nil)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do throws(SessionError) { try session.connect() } catch { outcome.withLock { $0 = error } }
            ended.signal()
        }
        #expect(server.upgraded.wait(timeout: .now() + 30) == .success, "the client never asked for the upgrade")
        session.disconnect()
        // A bound for the test, not a measurement: the wait would otherwise last the 120 s timeout.
        #expect(ended.wait(timeout: .now() + 60) == .success, "connect did not return after disconnect")
        let error = outcome.withLock { $0 }
        #expect(error.map { if case .notConnected = $0 { true } else { false } } == true, "\(String(describing: error))")
        #expect(session.connectionId == nil)
    }
}
