@_exported import struct HTTPLimits.ServerLimits
/// Where `camagent publish`'s server listens (the in-process router with the viewer routes) and whether the viewer routes want a token.
public struct ViewerServerConfiguration: Sendable, Equatable {
    /// Address to bind: "0.0.0.0" (every IPv4 interface), "::", "127.0.0.1", ...
    public var host: String
    /// TCP port; 0 asks the kernel for a free one (the server says which it bound).
    public var port: Int
    /// The access token WHEP, /stats and /metrics requests must carry, as
    /// `Authorization: Bearer <token>` or `?token=<token>`; nil = open.
    public var token: String?
    /// Largest request body accepted (an SDP offer is a few KiB); larger gets 413.
    public var maxBodySize: Int
    /// Connections, header sizes, slow and idle clients (HTTPLimits).
    public var serverLimits: ServerLimits

    public init(host: String = "0.0.0.0", port: Int = 8080, token: String? = nil, maxBodySize: Int = 64 * 1024,
                serverLimits: ServerLimits = ServerLimits()) {
        self.host = host
        self.port = port
        self.token = token
        self.maxBodySize = maxBodySize
        self.serverLimits = serverLimits
    }

    /// A fresh token: 128 random bits as 32 lowercase hex digits (URL-safe).
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for _ in 0..<2 {
            var word = generator.next() as UInt64
            for _ in 0..<16 {
                bytes.append(digits[Int(word & 0xF)])
                word >>= 4
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
