/// A published session: where the server keeps it and what it answered.
public struct WHIPSession: Sendable, Hashable {
    /// The absolute URL of the session resource (the Location, resolved), for DELETE.
    public var resourceURL: String
    /// The server's SDP answer.
    public var answerSDP: String
    /// The ETag of the resource, as sent (quotes included), if the server gave one.
    public var etag: String?

    public init(resourceURL: String, answerSDP: String, etag: String? = nil) {
        self.resourceURL = resourceURL
        self.answerSDP = answerSDP
        self.etag = etag
    }
}
