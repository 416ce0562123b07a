import Logging
import MediaTypes

/// A WHIP client (RFC 9725): POSTs an SDP offer to an endpoint and DELETEs the
/// session resource to stop. Blocking: the publisher calls it from its own
/// thread. Each HTTP exchange (connect, TLS handshake, request, response) must
/// be over within `timeout` seconds; each redirect starts a new exchange.
/// Name resolution is bounded by the system resolver's own timeouts.
public final class WHIPClient: Sendable {
    /// How many 307/308 redirects a POST follows.
    public static let maxRedirects = 3

    public let endpoint: String
    let endpointURL: HTTPURL
    let token: String?
    let timeout: Double
    let allowInsecureTLS: Bool
    let trustedCertificatesFile: String?
    let logger: Logger

    /// - Parameters:
    ///   - endpoint: the WHIP endpoint, http:// or https://.
    ///   - token: sent as `Authorization: Bearer <token>`; surrounding whitespace is dropped.
    ///   - timeout: seconds for each HTTP exchange, connect to last byte.
    ///   - allowInsecureTLS: accept any server certificate (self-signed lab servers).
    ///   - trustedCertificatesFile: a PEM file of CA certificates trusted besides the system's (a private CA).
    public init(
        endpoint: String, token: String? = nil, timeout: Double = 10,
        allowInsecureTLS: Bool = false, trustedCertificatesFile: String? = nil,
        logger: Logger
    ) throws(WHIPError) {
        precondition(timeout > 0 && timeout.isFinite, "WHIPClient timeout must be a positive number of seconds")
        self.endpoint = endpoint
        endpointURL = try HTTPURL(parsing: endpoint)
        let token = token?.trimmingWhitespace()
        if let token, token.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw .badURL("the token for \(endpoint) contains control characters")
        }
        self.token = token.flatMap { $0.isEmpty ? nil : $0 }
        self.timeout = timeout
        self.allowInsecureTLS = allowInsecureTLS
        self.trustedCertificatesFile = trustedCertificatesFile
        self.logger = logger
    }

    /// POSTs the offer (application/sdp, with the bearer token) and returns the
    /// session: 201 Created with a Location (resolved against the URL that
    /// answered) and the SDP answer. 307 and 308 are followed, at most
    /// `maxRedirects` times, never from https to http. `query` is added to the
    /// endpoint's query (names and values URL-safe as they are: letters,
    /// digits, `.`, `-`, `_`). A request of `stop` ends it at once, at any
    /// step (`stopped`); name resolution alone is not interrupted.
    public func publish(offer: String, query: [(name: String, value: String)] = [],
                        stop: StopSignal? = nil) throws(WHIPError) -> WHIPSession {
        var url = endpointURL
        for (name, value) in query {
            precondition((name + value).allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) },
                         "query items are URL-safe as they are")
            url.target += (url.target.contains("?") ? "&" : "?") + "\(name)=\(value)"
        }
        var redirects = 0
        while true {
            let response = try exchange("POST", url, body: Array(offer.utf8), extraHeaders: [
                ("Content-Type", "application/sdp"),
                ("Accept", "application/sdp"),
            ], stop: stop)
            switch response.status {
            case 201:
                return try session(from: response, postedTo: url)
            case 307, 308:
                guard redirects < Self.maxRedirects else {
                    throw .badResponse("POST \(url): more than \(Self.maxRedirects) redirects")
                }
                guard let location = response.header("Location") else {
                    throw .badResponse("POST \(url): \(response.status) redirect without a Location header")
                }
                let next: HTTPURL
                do { next = try url.resolving(location) } catch {
                    throw .badResponse("POST \(url): redirect to an unusable Location \"\(location)\": \(error)")
                }
                guard next.isTLS || !url.isTLS else {
                    throw .badResponse("POST \(url): redirect from https to plain http (\(next)) refused")
                }
                logger.info("WHIP endpoint redirected", metadata: [
                    "from": "\(url)", "to": "\(next)", "status": "\(response.status)",
                ])
                url = next
                redirects += 1
            default:
                throw failure(response, method: "POST", url: url)
            }
        }
    }

    /// DELETEs the session resource. 200 and 204 (any 2xx) are success; 404
    /// means it is already gone and is not an error.
    public func stop(_ session: WHIPSession) throws(WHIPError) {
        let url = try HTTPURL(parsing: session.resourceURL)
        let response = try exchange("DELETE", url, body: [], extraHeaders: [])
        switch response.status {
        case 200..<300:
            logger.debug("WHIP session deleted", metadata: ["resource": "\(url)", "status": "\(response.status)"])
        case 404:
            logger.debug("WHIP session was already gone (404 on DELETE)", metadata: ["resource": "\(url)"])
        default:
            throw failure(response, method: "DELETE", url: url)
        }
    }

    private func exchange(
        _ method: String, _ url: HTTPURL, body: [UInt8], extraHeaders: [(String, String)], stop: StopSignal? = nil
    ) throws(WHIPError) -> HTTPResponse {
        var headers = extraHeaders
        headers.append(("User-Agent", "camagent"))
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        logger.debug("WHIP request", metadata: ["method": "\(method)", "url": "\(url)", "bytes": "\(body.count)"])
        let http = HTTPExchange(
            url: url, timeout: timeout, verifyTLS: !allowInsecureTLS, extraTrustFile: trustedCertificatesFile, stop: stop)
        let response = try http.perform(method: method, headers: headers, body: body)
        logger.debug("WHIP response", metadata: [
            "method": "\(method)", "url": "\(url)", "status": "\(response.status)", "bytes": "\(response.body.count)",
        ])
        return response
    }

    private func session(from response: HTTPResponse, postedTo url: HTTPURL) throws(WHIPError) -> WHIPSession {
        guard let location = response.header("Location"), !location.trimmingWhitespace().isEmpty else {
            throw .badResponse("POST \(url): 201 Created without a Location header")
        }
        let resource: HTTPURL
        do { resource = try url.resolving(location) } catch {
            throw .badResponse("POST \(url): unusable Location \"\(location)\": \(error)")
        }
        if let type = response.header("Content-Type"),
           type.split(separator: ";").first?.trimmingWhitespace().lowercased() != "application/sdp" {
            throw .badResponse("POST \(url): the answer is \"\(type)\", not application/sdp")
        }
        guard let answer = String(validating: response.body, as: UTF8.self) else {
            throw .badResponse("POST \(url): the answer is not UTF-8 text")
        }
        guard answer.hasPrefix("v=") else {
            let shown = answer.isEmpty ? "an empty body" : "\"\(Self.excerpt(response.body))\""
            throw .badResponse("POST \(url): the answer is not SDP: \(shown)")
        }
        logger.info("WHIP session created", metadata: ["resource": "\(resource)"])
        return WHIPSession(resourceURL: resource.description, answerSDP: answer, etag: response.header("ETag"))
    }

    private func failure(_ response: HTTPResponse, method: String, url: HTTPURL) -> WHIPError {
        let detail = Self.detail(response, method: method, url: url)
        switch response.status {
        case 401, 403: return .unauthorized(status: response.status, detail: detail)
        case 404: return .notFound(url: url.description)
        case 400..<500: return .rejected(status: response.status, detail: detail)
        case 500..<600: return .serverError(status: response.status, detail: detail)
        default:
            let expected = method == "POST" ? "201 Created" : "200 or 204"
            return .badResponse("\(method) \(url): HTTP \(response.status) \(response.reason), expected \(expected)")
        }
    }

    /// "POST <url>: <reason phrase>: <first ~200 characters of a text body>".
    static func detail(_ response: HTTPResponse, method: String, url: HTTPURL) -> String {
        var detail = "\(method) \(url)"
        if !response.reason.isEmpty { detail += ": \(response.reason)" }
        let type = response.header("Content-Type")?.lowercased() ?? "text/plain"
        let isText = type.hasPrefix("text/") || type.contains("json") || type.contains("xml")
            || type.hasPrefix("application/sdp")
        if isText, !response.body.isEmpty {
            let text = excerpt(response.body)
            if !text.isEmpty { detail += ": \(text)" }
        }
        return detail
    }

    /// The first 200 characters of a body, on one line.
    static func excerpt(_ body: [UInt8], limit: Int = 200) -> String {
        let text = String(decoding: body.prefix(limit * 4), as: UTF8.self)
        var line = ""
        var lastWasSpace = false
        for c in text {
            let isSpace = c.isWhitespace || c.isNewline
            if isSpace {
                if !lastWasSpace && !line.isEmpty { line.append(" ") }
            } else {
                line.append(c)
            }
            lastWasSpace = isSpace
            if line.count >= limit { return line + "…" }
        }
        return line.trimmingWhitespace()
    }
}
