/// Random identifiers for sessions, connections, streams, subscribers and
/// token ids: URL-safe (base64url alphabet, no padding), so they go into
/// paths and query strings as they are.
enum RandomID {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `length` characters of 6 random bits each (the default: 132 bits).
    static func make(length: Int = 22) -> String {
        var generator = SystemRandomNumberGenerator()
        var out: [UInt8] = []
        out.reserveCapacity(length)
        for _ in 0..<length {
            out.append(alphabet[Int(UInt8.random(in: 0..<64, using: &generator))])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// True for 1 to `maxLength` characters of the alphabet above: what the
    /// router accepts as an id from outside, before looking it up.
    static func isWellFormed(_ text: some StringProtocol, maxLength: Int = 128) -> Bool {
        let utf8 = text.utf8
        return !utf8.isEmpty && utf8.count <= maxLength && utf8.allSatisfy { alphabet.contains($0) }
    }
}
