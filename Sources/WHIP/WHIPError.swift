/// What went wrong talking to a WHIP endpoint, and where. Network errors name
/// the host; HTTP errors carry the status and the start of the server's text.
public enum WHIPError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The endpoint or resource URL cannot be used (not http/https, no host, bad port).
    case badURL(String)
    /// Name resolution failed, or no route / network unreachable.
    case unreachable(host: String, reason: String)
    /// Nobody listens there (ECONNREFUSED).
    case refused(host: String, port: Int)
    /// No progress before the deadline; `during` is "connect", "TLS handshake",
    /// "sending the request" or "waiting for the response".
    case timedOut(host: String, during: String)
    /// The caller's stop was requested while it waited (a `disconnect()` during a join).
    case stopped(host: String, during: String)
    /// The TLS handshake failed or the server's certificate is not trusted.
    case tls(host: String, reason: String)
    /// 401 or 403: a bad or missing token.
    case unauthorized(status: Int, detail: String)
    /// 404: no such endpoint.
    case notFound(url: String)
    /// Any other 4xx (400 bad offer, 406, 422...).
    case rejected(status: Int, detail: String)
    /// 5xx.
    case serverError(status: Int, detail: String)
    /// Not what WHIP promises: 201 without Location, a body that is not SDP, malformed HTTP.
    case badResponse(String)

    public var description: String {
        switch self {
        case .badURL(let why): "WHIP: bad URL: \(why)"
        case .unreachable(let host, let reason): "WHIP: \(host) is unreachable: \(reason)"
        case .refused(let host, let port): "WHIP: connection refused by \(host) port \(port) (nothing listening?)"
        case .timedOut(let host, let during): "WHIP: timed out talking to \(host) during \(during)"
        case .stopped(let host, let during): "WHIP: stopped while talking to \(host) during \(during)"
        case .tls(let host, let reason): "WHIP: TLS with \(host) failed: \(reason)"
        case .unauthorized(let status, let detail): "WHIP: not authorized (HTTP \(status)): \(detail) — check the bearer token"
        case .notFound(let url): "WHIP: no such endpoint (HTTP 404): \(url)"
        case .rejected(let status, let detail): "WHIP: request rejected (HTTP \(status)): \(detail)"
        case .serverError(let status, let detail): "WHIP: server error (HTTP \(status)): \(detail)"
        case .badResponse(let why): "WHIP: bad response: \(why)"
        }
    }
}
