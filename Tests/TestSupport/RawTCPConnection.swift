#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a loopback port, for tests that must send bytes
/// no HTTP client would (half a request head, a byte at a time, oversized
/// headers) and see exactly what the server does. Every read has a timeout.
/// Blocking: call it from `onOwnThread`, one caller at a time.
public final class RawTCPConnection: @unchecked Sendable {
    public enum Failure: Error { case socket(Int32), connect(Int32) }

    /// What a read saw.
    public enum Read: Equatable, Sendable {
        case bytes([UInt8])
        /// The server closed the connection (or reset it).
        case closed
        /// Nothing within the timeout.
        case nothing
    }

    private let fd: Int32

    public init(port: Int) throws {
        // The socket is made and connected before `fd` is set: a class whose
        // stored properties are all set runs its deinit when its init throws,
        // and closing here as well would close the number twice (by then maybe
        // another socket of the test process, a server's under test).
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { throw Failure.socket(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(socketFD)
            throw Failure.connect(code)
        }
        fd = socketFD
    }

    deinit { close(fd) }

    /// Sends what it can; false once the server has closed or reset (it may answer before reading everything).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// One read of whatever has arrived, waiting at most `timeout` seconds.
    public func read(timeout: Double) -> Read {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) > 0 else { return .nothing }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? .bytes(Array(chunk[0..<n])) : .closed
    }

    /// Everything until the server closes, each read waiting at most `timeout` seconds.
    public func readToEnd(timeout: Double) -> [UInt8] {
        var received: [UInt8] = []
        while case .bytes(let bytes) = read(timeout: timeout) { received += bytes }
        return received
    }
}

#if canImport(Foundation)
import Foundation
#endif

/// Runs blocking work (socket calls) on a thread of its own: blocking the few
/// threads of the concurrency pool would starve the server under test.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
