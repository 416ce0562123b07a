/// The answer to a `plainHTTPRequest`.
public struct PlainHTTPResponse: Sendable {
    public var status: Int
    public var body: [UInt8]
    let headers: [(name: String, value: String)]

    /// The first header of that name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}

/// One HTTP request to a JSON API beside WHIP (the router's REST API, for
/// `camagent session create`), on the same blocking client: a fresh
/// connection, everything within `timeout` seconds. Network failures are
/// the WHIP client's errors (`unreachable`, `refused`, `timedOut`, `tls`,
/// `badURL`, `badResponse`); any HTTP status is returned, not thrown.
public func plainHTTPRequest(
    method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = [], timeout: Double = 10,
    trustedCertificatesFile: String? = nil
) throws(WHIPError) -> PlainHTTPResponse {
    precondition(timeout > 0 && timeout.isFinite, "plainHTTPRequest timeout must be a positive number of seconds")
    let parsed = try HTTPURL(parsing: url)
    var allHeaders = headers
    allHeaders.append(("User-Agent", "camagent"))
    let exchange = HTTPExchange(url: parsed, timeout: timeout, verifyTLS: true, extraTrustFile: trustedCertificatesFile)
    let response = try exchange.perform(method: method, headers: allHeaders, body: body)
    return PlainHTTPResponse(status: response.status, body: response.body, headers: response.headers)
}
