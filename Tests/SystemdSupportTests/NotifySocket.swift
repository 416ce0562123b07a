import Foundation
import Glibc

/// The manager's side of the notification protocol for the tests: a real
/// AF_UNIX datagram socket, bound to a path or an abstract name, as systemd's
/// /run/systemd/notify is. Written with libc directly, not with the code under test.
final class NotifySocket {
    let name: String   // what NOTIFY_SOCKET would hold
    private let fd: Int32
    private let path: String?

    /// A socket at a fresh path in a temporary directory, or (abstract) under a fresh '@' name.
    init(abstract: Bool) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        let unique = "camagent-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var bytes: [UInt8]
        if abstract {
            name = "@" + unique
            path = nil
            bytes = [0] + Array(unique.utf8)
        } else {
            let p = NSTemporaryDirectory() + "/" + unique + ".sock"
            name = p
            path = p
            bytes = Array(p.utf8) + [0]
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count - (abstract ? 0 : 1))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw POSIXError(.init(rawValue: errno)!) }
    }

    deinit {
        close(fd)
        if let path { unlink(path) }
    }

    /// The next datagram's text, or nil if none comes within `seconds` (a guard, not a timing assertion).
    func receive(within seconds: Double = 10) -> String? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(seconds * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n >= 0 ? String(decoding: buffer.prefix(n), as: UTF8.self) : nil
    }
}
