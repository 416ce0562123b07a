#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// A non-blocking UDP socket bound to one local address: what a host candidate
/// sends and receives on. Driven from one thread with poll(); `close()` must not
/// race with `send`/`receive` on another thread.
public final class UDPSocket: @unchecked Sendable {
    /// The bound address, with the port the kernel chose when 0 was asked.
    public let local: TransportAddress
    private let descriptor: Atomic<Int32>

    /// The descriptor to poll for reading; -1 once closed.
    public var fileDescriptor: Int32 { descriptor.load(ordering: .relaxed) }

    /// Opens a UDP socket (non-blocking, close-on-exec; IPv6 sockets are IPv6-only) bound to `ip`:`port`.
    public init(bindingTo ip: String, port: UInt16 = 0) throws(NetworkError) {
        guard let address = TransportAddress(ip: ip, port: port).canonical else { throw .invalidAddress(ip) }
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let fd = Glibc.socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .systemCall("socket(\(family == AF_INET ? "AF_INET" : "AF_INET6"), SOCK_DGRAM)", errno: errno) }
        if family == AF_INET6 {
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        do throws(NetworkError) {
            let result = try address.withSockaddr { Glibc.bind(fd, $0, $1) }
            guard result == 0 else { throw NetworkError.systemCall("bind(\(address))", errno: errno) }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let bound: TransportAddress? = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    getsockname(fd, pointer, &length) == 0 ? TransportAddress(sockaddr: pointer) : nil
                }
            }
            guard let bound else { throw NetworkError.systemCall("getsockname(\(address))", errno: errno) }
            local = bound
        } catch {
            Glibc.close(fd)
            throw error
        }
        descriptor = Atomic(fd)
    }

    deinit { close() }

    /// Sends one datagram. A full socket buffer (EAGAIN) drops it silently, as UDP may;
    /// any other failure (unreachable network, wrong family) is thrown.
    public func send(_ bytes: UnsafeRawBufferPointer, to destination: TransportAddress) throws(NetworkError) {
        let fd = fileDescriptor
        guard fd >= 0 else { throw .socketClosed }
        while true {
            let sent = try destination.withSockaddr { Glibc.sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, $1) }
            if sent >= 0 { return }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, ENOBUFS: return
            case let code: throw .systemCall("sendto(\(destination))", errno: code)
            }
        }
    }

    /// Receives one pending datagram into `buffer` (a longer one is truncated to the
    /// buffer's size); nil when nothing is pending.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(NetworkError) -> (count: Int, from: TransportAddress)? {
        let fd = fileDescriptor
        guard fd >= 0 else { throw .socketClosed }
        var storage = sockaddr_storage()
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let (count, from): (Int, TransportAddress?) = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    let n = Glibc.recvfrom(fd, buffer.baseAddress, buffer.count, 0, pointer, &length)
                    return (n, n >= 0 ? TransportAddress(sockaddr: pointer) : nil)
                }
            }
            if count >= 0 {
                guard let from else { continue }   // not IPv4/IPv6: cannot happen on this socket
                return (count, from)
            }
            guard try retriesReceive(after: errno, call: "recvfrom") else { return nil }
        }
    }

    /// Receives the pending datagrams, as many as `batch` holds, in one call;
    /// returns how many (0 when nothing is pending). Fewer than the batch's
    /// capacity means none was left.
    @discardableResult
    public func receive(into batch: DatagramBatch) throws(NetworkError) -> Int {
        let fd = fileDescriptor
        guard fd >= 0 else { throw .socketClosed }
        batch.count = 0
        while true {
            let count = CLinux_receive_datagrams(fd, batch.buffers.baseAddress, batch.datagramSize, UInt32(batch.capacity),
                                                 batch.senders, batch.lengths)
            if count >= 0 {
                batch.count = Int(count)
                return batch.count
            }
            guard try retriesReceive(after: errno, call: "recvmmsg") else { return 0 }
        }
    }

    /// After a receive call failed with `code`: true to call again (interrupted,
    /// or an ICMP error reported for an earlier send: nothing to read, the
    /// socket is fine), false when nothing is pending; any other error is thrown.
    private func retriesReceive(after code: Int32, call: String) throws(NetworkError) -> Bool {
        switch code {
        case EINTR, ECONNREFUSED, EHOSTUNREACH, ENETUNREACH: return true
        case EAGAIN, EWOULDBLOCK: return false
        default: throw .systemCall("\(call)(\(local))", errno: code)
        }
    }

    /// Closes the descriptor (idempotent).
    public func close() {
        let fd = descriptor.exchange(-1, ordering: .relaxed)
        if fd >= 0 { Glibc.close(fd) }
    }
}
