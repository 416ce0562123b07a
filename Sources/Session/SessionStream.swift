/// A stream of a router session, as `GET /v2/sessions/{sid}/streams` lists it.
public struct SessionStream: Sendable, Codable, Equatable {
    public var streamId: String
    public var connectionId: String
    public var name: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    /// Its audio is being captioned (the session's captions run and its publisher asked).
    public var hasCaptions: Bool
    public var width: Int
    public var height: Int
    /// camera, screen or custom.
    public var videoType: String
    /// When it was published, in milliseconds since 1970 (the router's clock).
    public var createdAt: Int64
}
