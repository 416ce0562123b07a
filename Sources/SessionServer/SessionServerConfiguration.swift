@_exported import struct HTTPLimits.ServerLimits
/// Where the router listens and how much it holds.
public struct SessionServerConfiguration: Sendable {
    /// Address to bind: "127.0.0.1" (the default: this machine only), "0.0.0.0", "::", ...
    public var host: String
    /// TCP port; 0 asks the kernel for a free one (see `SessionServer.boundPort`).
    public var port: Int
    public var limits: RegistryLimits
    /// Largest request body read (SDP offers, JSON); larger gets 413.
    public var maxBodySize: Int
    /// Connections, header sizes and slow clients (HTTPLimits).
    public var serverLimits: ServerLimits
    /// What secures every connection (REST, signalling, WHIP, WHEP, the
    /// session page): SessionServerTLS's `RouterTLSIdentity` serves HTTPS.
    /// nil serves plain HTTP.
    public var transportSecurity: (any RouterTransportSecurity)?
    /// Routes served beside the router's, outside /v2/ (`camagent publish`'s viewer routes); nil for none.
    public var additionalRoutes: (any AdditionalRoutes)?

    public init(host: String = "127.0.0.1", port: Int = 8090, limits: RegistryLimits = RegistryLimits(),
                maxBodySize: Int = 64 * 1024, serverLimits: ServerLimits = ServerLimits(),
                transportSecurity: (any RouterTransportSecurity)? = nil, additionalRoutes: (any AdditionalRoutes)? = nil) {
        self.transportSecurity = transportSecurity
        self.additionalRoutes = additionalRoutes
        self.serverLimits = serverLimits
        self.host = host
        self.port = port
        self.limits = limits
        self.maxBodySize = maxBodySize
    }
}
