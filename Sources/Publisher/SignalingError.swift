/// Why the signalling server (WHIP, or another behind `PublisherSignaling`)
/// did not take the stream, sorted by what the caller can do about it.
public struct SignalingError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The server's address is not usable (a bad URL).
        case badAddress
        /// No answer: refused, no route, timeout, TLS failure.
        case unreachable
        /// The server said the credentials are missing or wrong (401/403).
        case unauthorized
        /// The server answered but refused the stream, or answered unusably.
        case refused
    }

    public var kind: Kind
    /// The signalling client's own words.
    public var description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}
