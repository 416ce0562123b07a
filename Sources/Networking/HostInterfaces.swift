#if canImport(Glibc)
import Glibc
#endif

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
