import Glibc
import MediaTypes

/// The instant an exchange must be over by; every wait is bounded by it. With
/// a `stop`, every wait also ends as soon as that stop is requested (`stopped`).
struct Deadline {
    let instant: ContinuousClock.Instant
    let stop: StopSignal?

    init(seconds: Double, stop: StopSignal? = nil) {
        let milliseconds = Int64(min(seconds, 86_400 * 365) * 1000)  // a year is "forever" and cannot overflow
        instant = ContinuousClock.now.advanced(by: .milliseconds(max(milliseconds, 1)))
        self.stop = stop
    }

    /// What is left, in whole milliseconds for poll (0 when past).
    var remainingMilliseconds: Int32 {
        let left = ContinuousClock.now.duration(to: instant)
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }
}

/// A byte stream to an HTTP server: plain TCP or TLS over it. `read` returns
/// an empty array at the end of the stream.
protocol ByteStream: AnyObject {
    func write(_ bytes: [UInt8], deadline: Deadline) throws(WHIPError)
    func read(maxCount: Int, deadline: Deadline) throws(WHIPError) -> [UInt8]
    func close()
}

private func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }

/// A connected, non-blocking TCP socket. Waits go through poll with what is
/// left of the deadline; writes use MSG_NOSIGNAL so a closed peer is an
/// error, not SIGPIPE.
final class TCPConnection: ByteStream {
    let fd: Int32
    /// The host as the URL named it, for error messages.
    let host: String

    /// With a stop, each poll lasts at most this long (see `wait`).
    static let stopCheckMilliseconds: Int32 = 200

    private init(fd: Int32, host: String) {
        self.fd = fd
        self.host = host
    }

    deinit { close() }

    private var closed = false

    func close() {
        guard !closed else { return }
        closed = true
        _ = Glibc.close(fd)
    }

    /// Resolves the host and tries each address in the order getaddrinfo gives
    /// them, until one connects. Name resolution itself is bounded by the
    /// resolver's own timeouts (resolv.conf), not by `deadline`.
    static func connect(host: String, port: Int, deadline: Deadline) throws(WHIPError) -> TCPConnection {
        if deadline.stop?.isStopRequested == true { throw .stopped(host: host, during: "connect") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let reason = status == EAI_SYSTEM ? errnoText(errno) : String(cString: gai_strerror(status))
            throw .unreachable(host: host, reason: "cannot resolve the name: \(reason)")
        }
        defer { freeaddrinfo(list) }

        var refused = false, timedOut = false
        var lastReason = "no address to try"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry?.pointee {
            entry = info.ai_next
            let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
            let fd = socket(info.ai_family, type, info.ai_protocol)
            guard fd >= 0 else {
                lastReason = "socket: \(errnoText(errno))"
                continue
            }
            let connection = TCPConnection(fd: fd, host: host)
            var result = Glibc.connect(fd, info.ai_addr, info.ai_addrlen)
            var code = result == 0 ? 0 : errno
            if result != 0 && (code == EINPROGRESS || code == EINTR) {
                // The outcome arrives as writability; SO_ERROR tells which.
                var ready = false
                do {
                    ready = try connection.wait(for: Int16(POLLOUT), deadline: deadline, during: "connect")
                } catch {
                    if case .stopped = error {
                        connection.close()
                        throw error
                    }
                    code = ETIMEDOUT
                }
                if ready {
                    var soError: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    result = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
                    code = result == 0 ? soError : errno
                } else {
                    code = ETIMEDOUT
                }
            }
            if code == 0 {
                var one: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return connection
            }
            connection.close()
            switch code {
            case ECONNREFUSED: refused = true
            case ETIMEDOUT: timedOut = true
            default: lastReason = errnoText(code)
            }
            if deadline.remainingMilliseconds == 0 { break }
        }
        if refused { throw .refused(host: host, port: port) }
        if timedOut { throw .timedOut(host: host, during: "connect") }
        throw .unreachable(host: host, reason: lastReason)
    }

    /// Polls for `events`; false only if the deadline passed first. The
    /// deadline's stop, if any, is polled beside the socket: its request ends
    /// the wait at once (`stopped`).
    private func wait(for events: Int16, deadline: Deadline, during: String) throws(WHIPError) -> Bool {
        while true {
            let left = deadline.remainingMilliseconds
            guard left > 0 else { return false }
            if deadline.stop?.isStopRequested == true { throw .stopped(host: host, during: during) }
            // poll skips an entry whose fd is negative: the second when there is no stop.
            var entries = (pollfd(fd: fd, events: events, revents: 0),
                           pollfd(fd: deadline.stop?.event.fd ?? -1, events: Int16(POLLIN), revents: 0))
            // The stop's event may have other waiters (the publisher's control event wakes
            // `publish()` too), and one of them can take the wake-up between the look at the
            // request above and this poll: the request is looked at again at least this often.
            let slice = deadline.stop == nil ? left : min(left, Self.stopCheckMilliseconds)
            let n = withUnsafeMutablePointer(to: &entries) {
                $0.withMemoryRebound(to: pollfd.self, capacity: 2) { poll($0, 2, slice) }
            }
            if n > 0 {
                if entries.0.revents != 0 { return true }
                // Only the stop's event: a request (thrown above on the next turn), or a wake-up
                // for this thread's other work or for another waiter, taken (each of those
                // waits in slices, as here, so it looks again at what it waits for soon enough).
                deadline.stop?.event.drain()
                continue
            }
            if n == 0 {
                if slice < left { continue }   // only the slice passed
                return false
            }
            if errno != EINTR { throw .unreachable(host: host, reason: "poll: \(errnoText(errno))") }
        }
    }

    /// Waits for `events` or throws `timedOut` naming what was going on.
    func waitOrThrow(for events: Int16, deadline: Deadline, during: String) throws(WHIPError) {
        guard try wait(for: events, deadline: deadline, during: during) else { throw .timedOut(host: host, during: during) }
    }

    func write(_ bytes: [UInt8], deadline: Deadline) throws(WHIPError) {
        try write(bytes, deadline: deadline, during: "sending the request")
    }

    func write(_ bytes: [UInt8], deadline: Deadline, during: String) throws(WHIPError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                offset += n
                continue
            }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: try waitOrThrow(for: Int16(POLLOUT), deadline: deadline, during: during)
            default: throw .badResponse("\(host) closed the connection while \(during): \(errnoText(code))")
            }
        }
    }

    func read(maxCount: Int, deadline: Deadline) throws(WHIPError) -> [UInt8] {
        try read(maxCount: maxCount, deadline: deadline, during: "waiting for the response")
    }

    func read(maxCount: Int, deadline: Deadline, during: String) throws(WHIPError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: maxCount)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n >= 0 {
                buffer.removeLast(buffer.count - n)
                return buffer
            }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: try waitOrThrow(for: Int16(POLLIN), deadline: deadline, during: during)
            default: throw .badResponse("connection to \(host) failed while \(during): \(errnoText(code))")
            }
        }
    }
}
