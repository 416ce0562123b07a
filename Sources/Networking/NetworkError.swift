#if canImport(Glibc)
import Glibc
#endif

/// What failed in the socket layer, named so the caller can log it as is.
public enum NetworkError: Error, Hashable, Sendable, CustomStringConvertible {
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
