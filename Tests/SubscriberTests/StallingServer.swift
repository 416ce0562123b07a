import Foundation
@testable import WHIP
#if canImport(Glibc)
import Glibc
#endif

/// Where a `StallingServer` leaves its client waiting.
enum Stall: Sendable {
    /// The TCP connect: the listen backlog is full, so the client's SYNs are dropped.
    case tcpConnect
    /// The response: the request's head is read (a WebSocket upgrade, a WHIP or WHEP POST) and never answered.
    case request
    /// A session's wait for `connected`: the WebSocket upgrade is answered, then nothing.
    case connected
}

/// Listens on loopback and stalls one client at `stall`: what a stop must end
/// long before the client's own timeout.
final class StallingServer: @unchecked Sendable {   // the descriptors are set before `reached` is signalled
    let port: Int
    private let listener: Int32
    private var held: [Int32] = []
    /// Signalled when the client is where the stall holds it (at once for `tcpConnect`).
    let reached = DispatchSemaphore(value: 0)

    init(stall: Stall) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        // Backlog 0 holds one connection not yet accepted; a SYN beyond it is dropped.
        guard bound, listen(fd, stall == .tcpConnect ? 0 : 1) == 0 else {
            close(fd)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        if stall == .tcpConnect {
            // The one connection the backlog holds, never accepted.
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) == 0 }
            }
            held.append(filler)
            guard connected else { throw POSIXError(.ECONNREFUSED) }
            reached.signal()
        } else {
            Thread.detachNewThread { [self] in serve(answering: stall == .connected) }
        }
    }

    deinit {
        close(listener)
        for fd in held { close(fd) }
    }

    private func serve(answering: Bool) {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        held.append(fd)
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: head, as: UTF8.self).contains("\r\n\r\n") {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { return }
            head += buffer[0..<n]
        }
        if answering {
            let key = String(decoding: head, as: UTF8.self).split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(WebSocketConnection.acceptValue(for: key))\r\n\r\n"
            _ = Array(answer.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
        reached.signal()
    }
}
