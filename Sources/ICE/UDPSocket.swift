#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// What failed in the socket layer, named so the caller can log it as is.
public enum ICEError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not a numeric IPv4 or IPv6 address (host names and mDNS `.local` names are not resolved).
    case invalidAddress(String)
    /// A system call failed: the call and its argument, and errno.
    case systemCall(String, errno: Int32)
    /// The socket was closed.
    case socketClosed

    public var description: String {
        switch self {
        case .invalidAddress(let ip): "not a numeric IP address: \(ip)"
        case .systemCall(let call, let code): "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
        case .socketClosed: "the UDP socket is closed"
        }
    }
}

/// An IP address (numeric IPv4 or IPv6, no scope) and a UDP port.
public struct TransportAddress: Hashable, Sendable, CustomStringConvertible {
    public var ip: String
    public var port: UInt16

    public init(ip: String, port: UInt16) {
        self.ip = ip
        self.port = port
    }

    public var isIPv6: Bool { ip.contains(":") }

    /// `1.2.3.4:5` or `[::1]:5`.
    public var description: String { isIPv6 ? "[\(ip)]:\(port)" : "\(ip):\(port)" }

    /// The address in network order (4 or 16 bytes), nil when `ip` is not numeric.
    var addressBytes: [UInt8]? {
        if isIPv6 {
            var a = in6_addr()
            guard inet_pton(AF_INET6, ip, &a) == 1 else { return nil }
            return withUnsafeBytes(of: &a) { Array($0) }
        }
        var a = in_addr()
        guard inet_pton(AF_INET, ip, &a) == 1 else { return nil }
        return withUnsafeBytes(of: &a) { Array($0) }
    }

    /// From 4 or 16 bytes in network order; the text is inet_ntop's canonical form.
    init(addressBytes bytes: [UInt8], port: UInt16) {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        bytes.withUnsafeBytes { raw in
            _ = inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, raw.baseAddress, &text, socklen_t(text.count))
        }
        let length = text.firstIndex(of: 0) ?? text.count
        self.init(ip: String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self), port: port)
    }

    /// The same address with its text in canonical form (so `::0:1` and `::1` compare equal);
    /// nil when the address is not numeric.
    var canonical: TransportAddress? {
        addressBytes.map { TransportAddress(addressBytes: $0, port: port) }
    }

    init(_ stun: STUNAddress) { self.init(addressBytes: stun.address, port: stun.port) }

    var stunAddress: STUNAddress? { addressBytes.map { STUNAddress(address: $0, port: port) } }

    /// A sockaddr_in or sockaddr_in6 for this address, handed to `body` with its length.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(ICEError) -> R {
        // Parsed in place on every send: withCString and stack structs, no
        // array and no C-string copy, so sending allocates nothing.
        if isIPv6 {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            guard ip.withCString({ inet_pton(AF_INET6, $0, &sin6.sin6_addr) }) == 1 else { throw .invalidAddress(ip) }
            return withUnsafePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        guard ip.withCString({ inet_pton(AF_INET, $0, &sin.sin_addr) }) == 1 else { throw .invalidAddress(ip) }
        return withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Reads a sockaddr_in or sockaddr_in6; nil for any other family.
    init?(sockaddr pointer: UnsafePointer<sockaddr>) {
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in.self)
            self.init(addressBytes: withUnsafeBytes(of: sin.sin_addr) { Array($0) }, port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in6.self)
            self.init(addressBytes: withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }, port: UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }
}

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
    public init(bindingTo ip: String, port: UInt16 = 0) throws(ICEError) {
        guard let address = TransportAddress(ip: ip, port: port).canonical else { throw .invalidAddress(ip) }
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let fd = Glibc.socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .systemCall("socket(\(family == AF_INET ? "AF_INET" : "AF_INET6"), SOCK_DGRAM)", errno: errno) }
        if family == AF_INET6 {
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        do throws(ICEError) {
            let result = try address.withSockaddr { Glibc.bind(fd, $0, $1) }
            guard result == 0 else { throw ICEError.systemCall("bind(\(address))", errno: errno) }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let bound: TransportAddress? = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    getsockname(fd, pointer, &length) == 0 ? TransportAddress(sockaddr: pointer) : nil
                }
            }
            guard let bound else { throw ICEError.systemCall("getsockname(\(address))", errno: errno) }
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
    public func send(_ bytes: UnsafeRawBufferPointer, to destination: TransportAddress) throws(ICEError) {
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
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(ICEError) -> (count: Int, from: TransportAddress)? {
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
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return nil
            // An ICMP error reported for an earlier send: nothing to read, the socket is fine.
            case ECONNREFUSED, EHOSTUNREACH, ENETUNREACH: continue
            case let code: throw .systemCall("recvfrom(\(local))", errno: code)
            }
        }
    }

    /// Closes the descriptor (idempotent).
    public func close() {
        let fd = descriptor.exchange(-1, ordering: .relaxed)
        if fd >= 0 { Glibc.close(fd) }
    }
}

/// The machine's own addresses, for host candidates.
public enum HostInterfaces {
    /// Addresses of interfaces that are up: IPv4 first, IPv6 link-local skipped, loopback only when asked.
    public static func addresses(includeLoopback: Bool = false) -> [(interface: String, ip: String)] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var v4: [(interface: String, ip: String)] = [], v6: [(interface: String, ip: String)] = []
        var entry = list
        while let current = entry {
            entry = current.pointee.ifa_next
            let flags = current.pointee.ifa_flags
            guard flags & UInt32(IFF_UP) != 0, let sa = current.pointee.ifa_addr else { continue }
            if flags & UInt32(IFF_LOOPBACK) != 0 && !includeLoopback { continue }
            guard let address = TransportAddress(sockaddr: sa) else { continue }
            let name = String(cString: current.pointee.ifa_name)
            if address.isIPv6 {
                let bytes = address.addressBytes ?? []
                if bytes.count == 16 && bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { continue }   // fe80::/10
                if !v6.contains(where: { $0.ip == address.ip }) { v6.append((name, address.ip)) }
            } else if !v4.contains(where: { $0.ip == address.ip }) {
                v4.append((name, address.ip))
            }
        }
        return v4 + v6
    }
}
