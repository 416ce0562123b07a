import Foundation
import Glibc
import Logging
@testable import WHIP

/// A small HTTP server on loopback for tests: one thread, one connection at a
/// time, each answered by the next scripted reply. It records what it read.
final class ScriptedServer: @unchecked Sendable {
    enum Reply {
        /// A response with Content-Length set from the body.
        case respond(status: Int, headers: [(String, String)] = [], body: String = "")
        /// Exactly these bytes, then close.
        case raw(String)
        /// Accept and never read or answer (the connection is held until stop).
        case silent
        /// Read the request, then close without a word.
        case closeWithoutAnswer
        /// Upgrade to a WebSocket (the right Sec-WebSocket-Accept), send these bytes, then close.
        case webSocket(frames: [UInt8])
        /// Upgrade, then `frame` again and again, as fast as the client takes them, for `seconds`; then close.
        case webSocketStream(frame: [UInt8], seconds: Double)
    }

    struct Request {
        var method: String
        var target: String
        /// Lowercased names.
        var headers: [String: String]
        var body: String
    }

    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var replies: [Reply]
    private var recorded: [Request] = []
    private var held: [Int32] = []
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)

    /// nil when the address family is not available here (IPv6 in some containers).
    init?(replies: [Reply], ipv6: Bool = false) {
        self.replies = replies
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var bound: Int32
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_addr = in6addr_loopback
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            close(fd)
            return nil
        }
        listener = fd
        port = boundPort(fd)
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    deinit { stop() }

    var requests: [Request] { lock.withLock { recorded } }

    func stop() {
        let toClose: [Int32]? = lock.withLock {
            guard !stopping else { return nil }
            stopping = true
            let fds = held
            held = []
            return fds
        }
        guard let toClose else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in toClose {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
        finished.wait()
        close(listener)
    }

    private func serve() {
        defer { finished.signal() }
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else {
                if errno == EINTR { continue }
                return
            }
            let reply: Reply? = lock.withLock {
                guard !stopping else { return nil }
                held.append(connection)
                return replies.isEmpty ? .respond(status: 500, body: "script exhausted") : replies.removeFirst()
            }
            guard let reply else {
                close(connection)
                return
            }
            if case .silent = reply { continue }
            let request = readRequest(connection)
            if let request {
                lock.withLock { recorded.append(request) }
            }
            switch reply {
            case .respond(let status, let headers, let body):
                var text = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
                for (name, value) in headers { text += "\(name): \(value)\r\n" }
                text += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
                writeAll(connection, text)
            case .raw(let text):
                writeAll(connection, text)
            case .webSocket(let frames):
                upgrade(connection, request)
                writeAll(connection, frames)
            case .webSocketStream(let frame, let seconds):
                upgrade(connection, request)
                var start = timespec(), now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &start)
                repeat {
                    writeAll(connection, frame)
                    clock_gettime(CLOCK_MONOTONIC, &now)
                } while Double(now.tv_sec - start.tv_sec) + Double(now.tv_nsec - start.tv_nsec) / 1e9 < seconds
                    && !lock.withLock({ stopping })
            case .closeWithoutAnswer, .silent:
                break
            }
            let owned: Bool = lock.withLock {
                guard let i = held.firstIndex(of: connection) else { return false }
                held.remove(at: i)
                return true
            }
            if owned {
                shutdown(connection, Int32(SHUT_WR))
                close(connection)
            }
        }
    }

    private func readRequest(_ fd: Int32) -> Request? {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        func more() -> Bool {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { return false }
            data += chunk[..<n]
            return true
        }
        var headEnd: Int?
        while headEnd == nil {
            guard more() else { return nil }
            headEnd = findHeadEnd(data)
        }
        let head = String(decoding: data[..<headEnd!], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        let bodyStart = headEnd! + 4
        while data.count < bodyStart + length {
            guard more() else { break }
        }
        let body = String(decoding: data[bodyStart..<min(data.count, bodyStart + length)], as: UTF8.self)
        return Request(
            method: requestLine.count > 0 ? String(requestLine[0]) : "",
            target: requestLine.count > 1 ? String(requestLine[1]) : "",
            headers: headers, body: body)
    }
}

private func findHeadEnd(_ data: [UInt8]) -> Int? {
    guard data.count >= 4 else { return nil }
    for i in 0...(data.count - 4) where data[i] == 13 && data[i + 1] == 10 && data[i + 2] == 13 && data[i + 3] == 10 {
        return i
    }
    return nil
}

private func writeAll(_ fd: Int32, _ text: String) { writeAll(fd, Array(text.utf8)) }

/// Answers a WebSocket upgrade.
private func upgrade(_ fd: Int32, _ request: ScriptedServer.Request?) {
    let accept = WebSocketConnection.acceptValue(for: request?.headers["sec-websocket-key"] ?? "")
    writeAll(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
             + "Connection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n")
}

private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n > 0 else { return }
        offset += n
    }
}

private func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 200: "OK"
    case 201: "Created"
    case 204: "No Content"
    case 307: "Temporary Redirect"
    case 308: "Permanent Redirect"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 422: "Unprocessable Content"
    case 500: "Internal Server Error"
    case 503: "Service Unavailable"
    default: "Status"
    }
}

/// The port a bound socket got.
func boundPort(_ fd: Int32) -> Int {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    let family = Int32(storage.ss_family)
    return withUnsafePointer(to: &storage) { pointer in
        if family == AF_INET6 {
            pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
        } else {
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}

/// A TCP port that is bound (so nobody else takes it) but not listening:
/// connecting to it is refused. Close the socket when done.
func boundButNotListening() -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return (fd, boundPort(fd))
}
