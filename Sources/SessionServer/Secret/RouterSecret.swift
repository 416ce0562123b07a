import Glibc

/// The router's HS256 key. The secret file holds it as text: the file's
/// content, surrounding whitespace trimmed, is the key's bytes. A router
/// that finds no file writes a new one (32 random bytes as 64 hex digits,
/// mode 0600); `camagent token` only ever reads one.
public struct RouterSecret: Sendable {
    /// Longest secret file read; a key needs far less, a larger file is a mistake.
    public static let maxFileSize = 64 * 1024
    /// HS256's key size: RFC 7518 §3.2 asks for at least the hash's 32 bytes.
    /// A router's secret may be shorter (the contract puts no bound on the
    /// file, and a test's "secret" must work): it is used, and its users warn
    /// (`isShorterThanRecommended`). A bearer token read from a file (the
    /// viewers') must have this length.
    public static let recommendedKeyLength = 32

    /// The key bytes (the trimmed file content).
    public let key: [UInt8]
    /// The file it came from.
    public let path: String
    /// True when this call created the file.
    public let wasCreated: Bool

    /// True when the key is shorter than HS256's 32 bytes: anyone who guesses it can mint tokens.
    public var isShorterThanRecommended: Bool { key.count < Self.recommendedKeyLength }

    /// A key given directly (tests, or a caller that keeps its own); at
    /// least `minimumLength` bytes, and never empty.
    public init(key: [UInt8], path: String = "", wasCreated: Bool = false,
                minimumLength: Int = 1) throws(RouterSecretError) {
        guard !key.isEmpty else { throw .empty(path: path) }
        guard key.count >= minimumLength else {
            throw .tooShort(path: path, length: key.count, minimum: minimumLength)
        }
        self.key = key
        self.path = path
        self.wasCreated = wasCreated
    }

    /// Reads the secret file; a missing file is an error (`.missing`).
    public static func load(from path: String, minimumLength: Int = 1) throws(RouterSecretError) -> RouterSecret {
        guard let key = try readKey(at: path) else { throw .missing(path: path) }
        return try RouterSecret(key: key, path: path, wasCreated: false, minimumLength: minimumLength)
    }

    /// Reads the secret file, or creates it when there is none: 32 random
    /// bytes as 64 lowercase hex digits, created with O_EXCL and mode 0600
    /// (the mode is set by open itself, so the key is never readable by
    /// others, not even for a moment).
    public static func load(orCreateAt path: String, minimumLength: Int = 1) throws(RouterSecretError) -> RouterSecret {
        if let key = try readKey(at: path) {
            return try RouterSecret(key: key, path: path, wasCreated: false, minimumLength: minimumLength)
        }
        let text = randomHex(byteCount: 32)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(0o600))
        if fd < 0 {
            let code = errno
            // Someone else created it between our read and our open: use theirs.
            if code == EEXIST, let key = try readKey(at: path) {
                return try RouterSecret(key: key, path: path, wasCreated: false, minimumLength: minimumLength)
            }
            throw .cannotCreate(path: path, reason: errnoText(code))
        }
        let bytes = Array((text + "\n").utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                let reason = errnoText(errno)
                close(fd)
                unlink(path)
                throw .cannotCreate(path: path, reason: reason)
            }
            written += n
        }
        if fsync(fd) != 0 || close(fd) != 0 {
            let reason = errnoText(errno)
            unlink(path)
            throw .cannotCreate(path: path, reason: reason)
        }
        return try RouterSecret(key: Array(text.utf8), path: path, wasCreated: true)
    }

    /// The trimmed content, or nil when the file does not exist.
    private static func readKey(at path: String) throws(RouterSecretError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw .unreadable(path: path, reason: errnoText(code))
        }
        defer { close(fd) }
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path: path, reason: errnoText(errno))
            }
            if n == 0 { break }
            content += chunk[0..<n]
            if content.count > maxFileSize { throw .tooLarge(path: path, limit: maxFileSize) }
        }
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0x0B || $0 == 0x0C }
        guard let first = content.firstIndex(where: { !isSpace($0) }),
              let last = content.lastIndex(where: { !isSpace($0) }) else {
            throw .empty(path: path)
        }
        return Array(content[first...last])
    }

    static func randomHex(byteCount: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(byteCount * 2)
        for _ in 0..<byteCount {
            let byte = UInt8.random(in: 0...255, using: &generator)
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Why the secret could not be had; each case names the file.
public enum RouterSecretError: Error, Equatable, Sendable, CustomStringConvertible {
    case missing(path: String)
    case unreadable(path: String, reason: String)
    case empty(path: String)
    case tooLarge(path: String, limit: Int)
    case tooShort(path: String, length: Int, minimum: Int)
    case cannotCreate(path: String, reason: String)

    public var description: String {
        switch self {
        case .missing(let path): "secret file \(path) does not exist (the router creates it on its first start)"
        case .unreadable(let path, let reason): "cannot read the secret file \(path): \(reason)"
        case .empty(let path): "the secret file \(path) is empty"
        case .tooLarge(let path, let limit): "the secret file \(path) is larger than \(limit) bytes; is it the right file?"
        case .tooShort(let path, let length, let minimum):
            "the secret in \(path.isEmpty ? "(given directly)" : path) is \(length) bytes long; at least \(minimum) are needed (delete the file to have a new one made)"
        case .cannotCreate(let path, let reason): "cannot create the secret file \(path): \(reason)"
        }
    }
}

func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }
