#if canImport(Glibc)
import Glibc
#endif

/// An IP address (numeric IPv4 or IPv6, no scope) and a UDP port. The text is parsed
/// once, when the address is made or its `ip` set, and the socket address kept, so
/// sending to it parses nothing. An address the kernel gave (a datagram's sender) is made into
/// text only when asked: a router receives thousands of RTP packets a second and
/// needs the sender's address only for STUN. Two addresses are equal when their
/// text and port are.
public struct TransportAddress: Hashable, Sendable, CustomStringConvertible {
    /// The text as given; nil for an address the kernel gave (`ip` makes it).
    private var givenText: String?
    public var port: UInt16 {
        didSet { socketAddress?.port = port }
    }
    /// The address as the kernel takes it; nil when the given text is not numeric.
    private var socketAddress: SocketAddress?

    public init(ip: String, port: UInt16) {
        givenText = ip
        self.port = port
        socketAddress = SocketAddress(ip: ip, port: port)
    }

    /// A socket address the kernel gave; its text is inet_ntop's canonical form.
    init(_ socketAddress: SocketAddress) {
        givenText = nil
        port = socketAddress.port
        self.socketAddress = socketAddress
    }

    /// The address as text: as given, or inet_ntop's canonical form.
    public var ip: String {
        get { givenText ?? socketAddress?.text ?? "" }
        set {
            givenText = newValue
            socketAddress = SocketAddress(ip: newValue, port: port)
        }
    }

    public var isIPv6: Bool {
        switch socketAddress {
        case .v6?: true
        case .v4?: false
        case nil: givenText?.contains(":") ?? false
        }
    }

    /// `1.2.3.4:5` or `[::1]:5`.
    public var description: String { isIPv6 ? "[\(ip)]:\(port)" : "\(ip):\(port)" }

    public static func == (a: TransportAddress, b: TransportAddress) -> Bool { a.ip == b.ip && a.port == b.port }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ip)
        hasher.combine(port)
    }

    /// The address in network order (4 or 16 bytes), nil when `ip` is not numeric.
    package var addressBytes: [UInt8]? { socketAddress?.addressBytes }

    /// From 4 or 16 bytes in network order; the text is inet_ntop's canonical form.
    package init(addressBytes bytes: [UInt8], port: UInt16) {
        self.init(SocketAddress(addressBytes: bytes, port: port))
    }

    /// The same address with its text in canonical form (so `::0:1` and `::1` compare equal);
    /// nil when the address is not numeric.
    package var canonical: TransportAddress? { socketAddress.map(TransportAddress.init) }

    /// The sockaddr_in or sockaddr_in6 parsed at creation, handed to `body` with its length.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(NetworkError) -> R {
        guard let socketAddress else { throw .invalidAddress(ip) }
        return socketAddress.withSockaddr(body)
    }

    /// Reads a sockaddr_in or sockaddr_in6; nil for any other family.
    init?(sockaddr pointer: UnsafePointer<sockaddr>) {
        guard let socketAddress = SocketAddress(pointer) else { return nil }
        self.init(socketAddress)
    }
}
