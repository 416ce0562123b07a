/// Random identifiers for sessions, connections, streams, subscribers and
/// token ids: URL-safe (base64url alphabet, no padding), so they go into
/// paths and query strings as they are. The first character is a letter or
/// a digit: an id that began with "-" would be read as an option when passed
/// on a command line (`camagent token --session -abc...`).
enum RandomID {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `length` characters of 6 random bits each, the first of fewer (the default: about 131 bits).
    static func make(length: Int = 22) -> String {
        var generator = SystemRandomNumberGenerator()
        var out: [UInt8] = []
        out.reserveCapacity(length)
        for index in 0..<length {
            let symbols = index == 0 ? 62 : 64   // the alphabet's letters and digits come first
            out.append(alphabet[Int(UInt8.random(in: 0..<UInt8(symbols), using: &generator))])
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
