#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// True where every test must run: scripts/test sets CAMAGENT_STRICT_TESTS=1, and CI sets
/// CI (true, 1, ...). There a gated test whose peer or host facility is missing runs and
/// fails with the reason, instead of being skipped.
public let strictTestEnvironment: Bool = {
    let environment = ProcessInfo.processInfo.environment
    if environment["CAMAGENT_STRICT_TESTS"] == "1" { return true }
    guard let ci = environment["CI"]?.lowercased() else { return false }
    return !ci.isEmpty && ci != "false" && ci != "0"
}()

/// Whether this machine can bind a socket to ::1, probed with socket(2) and bind(2)
/// themselves (not with the code under test, whose failure would then read as "no IPv6").
public let ipv6LoopbackAvailable: Bool = {
    let fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
    } == 0
}()
