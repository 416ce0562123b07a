import HummingbirdCore

/// What secures the router's connections. SessionServerTLS's `RouterTLSIdentity`
/// (HTTPS through NIOSSL) is the one `camagent router` uses; it sits behind this
/// protocol so that SessionServer itself links no TLS library, and what only
/// needs the router's logic (its tests, the fuzz targets) builds without one.
public protocol RouterTransportSecurity: Sendable {
    /// `channel` (the router's plain HTTP and WebSocket channel) behind the
    /// secure layer: each connection goes through it before any HTTP.
    func secure<Channel: ServerChildChannel>(_ channel: Channel) throws -> any ServerChildChannel
}
