/// A connection of a router session (OpenTok's Connection): this client's
/// own (`Session.connection`) or another's (`Session.connections`).
public struct SessionConnection: Sendable, Codable, Equatable {
    public var connectionId: String
    /// The token's `connection_data`.
    public var data: String
    /// When it joined, in milliseconds since 1970 (the router's clock).
    public var createdAt: Int64
}
