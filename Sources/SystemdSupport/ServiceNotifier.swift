#if canImport(Glibc)
import Glibc
#endif

/// One line of the notification protocol (systemd's sd_notify): the service
/// manager reads newline-separated VAR=VALUE assignments from one datagram.
public enum ServiceState: Hashable, Sendable {
    /// Start-up is finished: for Type=notify, systemd considers the service started.
    case ready
    /// The service is shutting down.
    case stopping
    /// Keep-alive for WatchdogSec=: the service is healthy.
    case watchdog
    /// Free-form text `systemctl status` shows.
    case status(String)

    /// The assignment as it goes on the wire. A status is one line: the
    /// protocol separates assignments with newlines.
    public var assignment: String {
        switch self {
        case .ready: "READY=1"
        case .stopping: "STOPPING=1"
        case .watchdog: "WATCHDOG=1"
        case .status(let text):
            "STATUS=" + String(text.map { $0.isNewline ? " " : $0 })
        }
    }
}

/// Why a notification could not be sent, naming the socket.
public enum ServiceNotifyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// $NOTIFY_SOCKET is not a path or abstract name an AF_UNIX address can hold.
    case badSocketAddress(String, reason: String)
    /// socket(2) failed.
    case socket(errno: Int32)
    /// sendto(2) to the socket failed (the manager went away, a full queue...).
    case send(socket: String, errno: Int32)

    public var description: String {
        switch self {
        case .badSocketAddress(let path, let reason): "NOTIFY_SOCKET \(path): \(reason)"
        case .socket(let errno): "notification socket: socket() failed: \(errorText(errno))"
        case .send(let path, let errno): "NOTIFY_SOCKET \(path): sendto() failed: \(errorText(errno))"
        }
    }

    private func errorText(_ code: Int32) -> String {
        let text = strerror(code).map { String(cString: $0) } ?? "unknown error"
        return "errno \(code) (\(text))"
    }
}

/// Sends service state to systemd over $NOTIFY_SOCKET: one datagram to an
/// AF_UNIX socket, a filesystem path or, when the name starts with '@', an
/// abstract name. Written from the protocol, without libsystemd, so the agent
/// needs nothing more than libc. One socket is kept open for the watchdog's
/// regular pings.
public final class ServiceNotifier: Sendable {
    /// The address as systemd gave it ("/run/systemd/notify" or "@name").
    public let socketPath: String
    private let fd: Int32
    /// sockaddr_un bytes and their length (abstract names are not NUL-terminated,
    /// so the length is part of the address).
    private let address: [UInt8]

    /// A notifier for `socketPath` (what $NOTIFY_SOCKET holds).
    public init(socketPath: String) throws(ServiceNotifyError) {
        self.socketPath = socketPath
        address = try Self.makeAddress(socketPath)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket(errno: errno) }
        self.fd = fd
    }

    deinit { close(fd) }

    /// The notifier systemd asked for, or nil when not run by systemd with
    /// notification on (no NOTIFY_SOCKET).
    public static func fromEnvironment(_ environment: [String: String]) throws(ServiceNotifyError) -> ServiceNotifier? {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        return try ServiceNotifier(socketPath: path)
    }

    /// Sends the states as one datagram.
    public func notify(_ states: [ServiceState]) throws(ServiceNotifyError) {
        let message = Array(states.map(\.assignment).joined(separator: "\n").utf8)
        let sent: Int = message.withUnsafeBytes { payload in
            address.withUnsafeBytes { raw in
                let length = socklen_t(raw.count)
                return raw.withMemoryRebound(to: sockaddr.self) { addr in
                    while true {
                        let n = sendto(fd, payload.baseAddress, payload.count, Int32(MSG_NOSIGNAL), addr.baseAddress, length)
                        if n < 0 && errno == EINTR { continue }
                        return n
                    }
                }
            }
        }
        if sent < 0 { throw .send(socket: socketPath, errno: errno) }
    }

    public func notify(_ state: ServiceState) throws(ServiceNotifyError) {
        try notify([state])
    }

    /// sockaddr_un for a path or an '@' abstract name, as raw bytes.
    static func makeAddress(_ path: String) throws(ServiceNotifyError) -> [UInt8] {
        var name = Array(path.utf8)
        let abstract = name.first == UInt8(ascii: "@")
        guard abstract || name.first == UInt8(ascii: "/") else {
            throw .badSocketAddress(path, reason: "neither an absolute path nor an abstract name ('@...')")
        }
        if abstract { name[0] = 0 }  // abstract names start with a NUL byte
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs room for its terminating NUL; an abstract name does not have one.
        guard name.count + (abstract ? 0 : 1) <= capacity, name.count > (abstract ? 1 : 0) else {
            throw .badSocketAddress(path, reason: "a socket name must have 1 to \(capacity - 1) bytes")
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count + (abstract ? 0 : 1)
        return withUnsafeBytes(of: &address) { Array($0.prefix(length)) }
    }
}
