#if canImport(Glibc)
import Glibc
#endif

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
    package var addressBytes: [UInt8]? {
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
    package init(addressBytes bytes: [UInt8], port: UInt16) {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        bytes.withUnsafeBytes { raw in
            _ = inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, raw.baseAddress, &text, socklen_t(text.count))
        }
        let length = text.firstIndex(of: 0) ?? text.count
        self.init(ip: String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self), port: port)
    }

    /// The same address with its text in canonical form (so `::0:1` and `::1` compare equal);
    /// nil when the address is not numeric.
    package var canonical: TransportAddress? {
        addressBytes.map { TransportAddress(addressBytes: $0, port: port) }
    }

    /// A sockaddr_in or sockaddr_in6 for this address, handed to `body` with its length.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(NetworkError) -> R {
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
