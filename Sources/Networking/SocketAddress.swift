#if canImport(Glibc)
import Glibc
#endif

/// A sockaddr_in or sockaddr_in6: an address in the form the kernel takes and gives,
/// kept by `TransportAddress` so a send passes it as is.
enum SocketAddress: Sendable {
    case v4(sockaddr_in)
    case v6(sockaddr_in6)

    /// Parses numeric text (inet_pton): IPv6 when it has a colon, IPv4 otherwise;
    /// nil for anything else (a host name, a scoped IPv6 address).
    init?(ip: String, port: UInt16) {
        if ip.contains(":") {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, ip, &sin6.sin6_addr) == 1 else { return nil }
            self = .v6(sin6)
        } else {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            guard inet_pton(AF_INET, ip, &sin.sin_addr) == 1 else { return nil }
            self = .v4(sin)
        }
    }

    /// From 4 (IPv4) or 16 (IPv6) bytes in network order.
    init(addressBytes bytes: [UInt8], port: UInt16) {
        precondition(bytes.count == 4 || bytes.count == 16, "IPv4 or IPv6")
        if bytes.count == 4 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: bytes) }
            self = .v4(sin)
        } else {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: bytes) }
            self = .v6(sin6)
        }
    }

    /// Reads a sockaddr_in or sockaddr_in6 the kernel wrote; nil for any other family.
    init?(_ pointer: UnsafePointer<sockaddr>) {
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET: self = .v4(UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in.self))
        case AF_INET6: self = .v6(UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in6.self))
        default: return nil
        }
    }

    var port: UInt16 {
        get {
            switch self {
            case .v4(let sin): UInt16(bigEndian: sin.sin_port)
            case .v6(let sin6): UInt16(bigEndian: sin6.sin6_port)
            }
        }
        set {
            switch self {
            case .v4(var sin): sin.sin_port = newValue.bigEndian; self = .v4(sin)
            case .v6(var sin6): sin6.sin6_port = newValue.bigEndian; self = .v6(sin6)
            }
        }
    }

    /// The address in network order: 4 or 16 bytes.
    var addressBytes: [UInt8] {
        switch self {
        case .v4(let sin): withUnsafeBytes(of: sin.sin_addr) { Array($0) }
        case .v6(let sin6): withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
        }
    }

    /// The address as inet_ntop writes it (the canonical text: `::1`, never `::0:1`).
    var text: String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN)) { buffer in
            let written = switch self {
            case .v4(var sin): inet_ntop(AF_INET, &sin.sin_addr, buffer.baseAddress, socklen_t(buffer.count))
            case .v6(var sin6): inet_ntop(AF_INET6, &sin6.sin6_addr, buffer.baseAddress, socklen_t(buffer.count))
            }
            return written.map { String(cString: $0) } ?? ""
        }
    }

    /// The sockaddr and its length, for bind and sendto.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch self {
        case .v4(let sin):
            withUnsafePointer(to: sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        case .v6(let sin6):
            withUnsafePointer(to: sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
    }
}
