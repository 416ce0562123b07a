internal import COpenSSL
import Glibc
import MediaTypes

/// A WebSocket client connection (RFC 6455) on the WHIP client's blocking
/// sockets and TLS: the router's signalling, for a `Session`. Text messages
/// only (the signalling is JSON); pings are answered; every wait has a
/// deadline. One thread reads (`receive`), any thread may `send`: the stream
/// sits behind a lock (OpenSSL's TLS must not read and write at once), which
/// the reader holds only for short reads and never takes again while a
/// sender waits for it: pthread mutexes are not fair, and a reader that
/// re-locked at once kept a sender waiting for seconds on a busy machine.
public final class WebSocketConnection: Sendable {
    public enum Message: Sendable, Equatable {
        case text(String)
        /// The server closed (its close code and reason), or the connection ended.
        case closed(code: UInt16?, reason: String)
    }

    /// Messages larger than this end the connection (the router's own limit is 64 KiB).
    public static let maxMessageBytes = 1 << 20
    private let stream: PThreadLocked<Stream>
    /// Senders waiting for the stream's lock: the reader lets them go first.
    private let waitingSenders = PThreadLocked(0)
    public let url: String

    private final class Stream: @unchecked Sendable {   // behind the connection's lock
        let bytes: any ByteStream
        var buffer: [UInt8]
        var message: [UInt8] = []
        var closed = false
        init(bytes: any ByteStream, buffer: [UInt8]) {
            self.bytes = bytes
            self.buffer = buffer
        }
    }

    private init(url: String, stream: any ByteStream, leftover: [UInt8]) {
        self.url = url
        self.stream = PThreadLocked(Stream(bytes: stream, buffer: leftover))
    }

    /// Connects (ws:// or wss://, http:// and https:// taken as the same) and
    /// upgrades, within `timeout` seconds. A refusal is the HTTP status's
    /// error: 401/403 `unauthorized`, 404 `notFound`, others `rejected`/`serverError`.
    /// A request of `stop` ends the connect, the TLS handshake or the upgrade at
    /// once (`stopped`); name resolution alone is not interrupted.
    public static func connect(url text: String, headers: [(String, String)] = [], timeout: Double = 10,
                               allowInsecureTLS: Bool = false, trustedCertificatesFile: String? = nil,
                               stop: StopSignal? = nil) throws(WHIPError) -> WebSocketConnection {
        var httpText = text
        if httpText.hasPrefix("ws://") { httpText = "http://" + httpText.dropFirst(5) }
        if httpText.hasPrefix("wss://") { httpText = "https://" + httpText.dropFirst(6) }
        let url = try HTTPURL(parsing: httpText)
        let deadline = Deadline(seconds: timeout, stop: stop)
        let tcp = try TCPConnection.connect(host: url.host, port: url.port, deadline: deadline)
        let stream: any ByteStream
        if url.isTLS {
            do {
                stream = try TLSConnection(over: tcp, verify: !allowInsecureTLS, extraTrustFile: trustedCertificatesFile,
                                           deadline: deadline)
            } catch {
                tcp.close()
                throw error
            }
        } else {
            stream = tcp
        }
        var key = [UInt8](repeating: 0, count: 16)
        _ = RAND_bytes(&key, 16)
        let keyText = base64(key)
        var head = "GET \(url.target) HTTP/1.1\r\nHost: \(url.authority)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Key: \(keyText)\r\nSec-WebSocket-Version: 13\r\nUser-Agent: camagent\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        do throws(WHIPError) {
            try stream.write(Array(head.utf8), deadline: deadline)
            var reader = ResponseReader(stream: stream, deadline: deadline, host: url.host)
            let (response, leftover) = try reader.readUpgradeResponse()
            guard response.status == 101 else {
                let detail = String(decoding: response.body.prefix(300), as: UTF8.self)
                switch response.status {
                case 401, 403: throw WHIPError.unauthorized(status: response.status, detail: detail)
                case 404: throw WHIPError.notFound(url: "\(url) (\(detail))")
                case 500...: throw WHIPError.serverError(status: response.status, detail: detail)
                default: throw WHIPError.rejected(status: response.status, detail: detail)
                }
            }
            guard response.header("Sec-WebSocket-Accept") == acceptValue(for: keyText) else {
                throw WHIPError.badResponse("\(url.host) upgraded without the right Sec-WebSocket-Accept")
            }
            return WebSocketConnection(url: text, stream: stream, leftover: leftover)
        } catch {
            stream.close()
            throw error
        }
    }

    /// Sends one text message (masked, as a client must).
    public func send(text: String) throws(WHIPError) {
        let frame = Self.frame(opcode: 0x1, payload: Array(text.utf8))
        waitingSenders.withLock { $0 += 1 }
        try stream.withLock { s throws(WHIPError) in
            waitingSenders.withLock { $0 -= 1 }
            guard !s.closed else { throw WHIPError.badResponse("the WebSocket to \(url) is closed") }
            try s.bytes.write(frame, deadline: Deadline(seconds: 10))
        }
    }

    /// The next message, waiting up to `timeout` seconds; nil when none came.
    /// After `.closed` every call returns `.closed` again.
    public func receive(timeout: Double) throws(WHIPError) -> Message? {
        let until = Deadline(seconds: timeout)
        while true {
            // Short reads, so that a sender is never kept waiting for long.
            let step = min(Double(until.remainingMilliseconds) / 1000, 0.05)
            // A sender waits for the lock: it goes first (a write takes at most its own deadline).
            while waitingSenders.withLock({ $0 }) > 0 { usleep(500) }
            let result: Message?? = try stream.withLock { s throws(WHIPError) -> Message?? in
                if s.closed { return .some(.closed(code: nil, reason: "closed")) }
                if let message = try Self.takeMessage(s) { return .some(message) }
                let more: [UInt8]
                do throws(WHIPError) { more = try s.bytes.read(maxCount: 16_384, deadline: Deadline(seconds: step)) } catch {
                    if case .timedOut = error { return .some(nil) }
                    s.closed = true
                    return .some(.closed(code: nil, reason: error.description))
                }
                if more.isEmpty {
                    s.closed = true
                    return .some(.closed(code: nil, reason: "the server closed the connection"))
                }
                s.buffer += more
                return .none   // parse what arrived
            }
            switch result {
            case .some(.some(let message)): return message
            // Also after bytes came: a server that keeps sending (control frames, a message a
            // byte at a time) must not keep this call past its deadline.
            case .some(.none), .none: if until.remainingMilliseconds <= 0 { return nil }
            }
        }
    }

    /// Sends a close frame and closes the socket.
    public func close() {
        stream.withLock { s in
            guard !s.closed else { return }
            s.closed = true
            try? s.bytes.write(Self.frame(opcode: 0x8, payload: [0x03, 0xE8]), deadline: Deadline(seconds: 1))
            s.bytes.close()
        }
    }

    /// Closes the socket without a close frame: for a connection taken for
    /// dead, whose peer should see it broken rather than closed on purpose
    /// (the router then keeps the session connection for a rejoin).
    public func abandon() {
        stream.withLock { s in
            guard !s.closed else { return }
            s.closed = true
            s.bytes.close()
        }
    }

    // MARK: Frames

    /// Takes one whole message from the buffer (answering pings, joining
    /// fragments); nil when more bytes are needed.
    private static func takeMessage(_ s: Stream) throws(WHIPError) -> Message? {
        while true {
            let b = s.buffer
            guard b.count >= 2 else { return nil }
            let fin = b[0] & 0x80 != 0
            let opcode = b[0] & 0x0F
            guard b[1] & 0x80 == 0 else { throw WHIPError.badResponse("the server sent a masked WebSocket frame") }
            var length = Int(b[1] & 0x7F)
            var offset = 2
            if length == 126 {
                guard b.count >= 4 else { return nil }
                length = Int(b[2]) << 8 | Int(b[3])
                offset = 4
            } else if length == 127 {
                guard b.count >= 10 else { return nil }
                // Read unsigned and bounded before it becomes an Int: a length with its top
                // bit set (RFC 6455 forbids it) would be negative and pass the checks below.
                var wide: UInt64 = 0
                for i in 2..<10 { wide = wide << 8 | UInt64(b[i]) }
                guard wide <= UInt64(maxMessageBytes) else {
                    throw WHIPError.badResponse("a WebSocket message larger than \(maxMessageBytes) bytes")
                }
                length = Int(wide)
                offset = 10
            }
            guard length <= maxMessageBytes, s.message.count + length <= maxMessageBytes else {
                throw WHIPError.badResponse("a WebSocket message larger than \(maxMessageBytes) bytes")
            }
            guard b.count >= offset + length else { return nil }
            let payload = Array(b[offset..<offset + length])
            s.buffer.removeFirst(offset + length)
            switch opcode {
            case 0x0, 0x1, 0x2:   // continuation, text, binary
                s.message += payload
                if fin {
                    defer { s.message.removeAll() }
                    return .text(String(decoding: s.message, as: UTF8.self))
                }
            case 0x8:
                s.closed = true
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
                let reason = payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : ""
                try? s.bytes.write(frame(opcode: 0x8, payload: Array(payload.prefix(2))), deadline: Deadline(seconds: 1))
                s.bytes.close()
                return .closed(code: code, reason: reason)
            case 0x9:
                try s.bytes.write(frame(opcode: 0xA, payload: payload), deadline: Deadline(seconds: 5))
            default:
                break   // pong, reserved
            }
        }
    }

    static func frame(opcode: UInt8, payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            out.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        var mask = [UInt8](repeating: 0, count: 4)
        _ = RAND_bytes(&mask, 4)
        out += mask
        for (i, byte) in payload.enumerated() { out.append(byte ^ mask[i & 3]) }
        return out
    }

    /// base64(SHA-1(key + the RFC's GUID)): what the server must answer.
    static func acceptValue(for key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        _ = SHA1(input, input.count, &digest)
        return base64(digest)
    }

    static func base64(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let n = EVP_EncodeBlock(&out, bytes, Int32(bytes.count))
        return String(decoding: out.prefix(Int(n)), as: UTF8.self)
    }
}
