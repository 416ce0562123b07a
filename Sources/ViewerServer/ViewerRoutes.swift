import Hummingbird
import Logging
import SessionServer

/// The embedded publisher's viewer routes, mounted on the router that
/// `camagent publish` runs in-process: the single-stream viewer page, the
/// WHEP endpoint and resources, /stats and /metrics (the viewer's numbers,
/// then the router's). Paths are matched on their non-empty components, so
/// a trailing slash (or a doubled one) is ignored. The router keeps `/v2/`
/// and its session page (`/?session=…`).
public struct ViewerRoutes: AdditionalRoutes {
    public typealias Context = BasicRequestContext

    /// One WHEP host per camera; camera N's paths are those of the first under /cameras/N/.
    let cameras: [any WHEPSessionHost]
    /// The access token WHEP, /stats and /metrics requests must carry; nil = open.
    public let token: String?
    let maxBodySize: Int

    public init(cameras: [any WHEPSessionHost], token: String?, maxBodySize: Int = 64 * 1024) {
        precondition(!cameras.isEmpty, "the viewer routes serve at least one camera")
        self.cameras = cameras
        self.token = token
        self.maxBodySize = maxBodySize
    }

    public func respond(to request: Request, context: Context,
                        routerMetrics: @escaping @Sendable () -> String) async throws -> Response? {
        // The router's session page: the same path, told apart by its query.
        if request.uri.queryParameters["session"] != nil { return nil }
        return try await route(request, context, routerMetrics: routerMetrics)
    }

    func route(_ request: Request, _ context: Context, routerMetrics: @Sendable () -> String) async throws -> Response {
        var parts = request.uri.path.split(separator: "/", omittingEmptySubsequences: true)
        let method = request.method
        // /cameras/N/... is camera N's; everything else is the first camera's.
        var camera = 1
        if parts.count >= 2, parts[0] == "cameras", let number = Int(parts[1]) {
            // Compared before subtracting: "/cameras/-9223372036854775808/" must be a 404, not an overflow trap.
            guard number >= 1, number <= cameras.count else { return text(.notFound, "no camera \(number)\n", cors: true) }
            camera = number
            parts.removeFirst(2)
            // The page finds its WHEP endpoint relative to its own URL: it needs the trailing slash.
            if parts.isEmpty, !request.uri.path.hasSuffix("/"), method == .get || method == .head {
                var headers = HTTPFields()
                headers[.location] = ViewerRoutes.cameraPath(camera) + (request.uri.query.map { "?\($0)" } ?? "")
                return Response(status: .permanentRedirect, headers: headers)
            }
        }
        let sessions = cameras[camera - 1]
        switch parts.count {
        case 0:
            switch method {
            case .get, .head: return page(head: method == .head)
            case .options: return empty(.noContent, allow: "GET, HEAD, OPTIONS")
            default: return notAllowed("GET, HEAD, OPTIONS")
            }
        case 1 where parts[0] == "whep":
            switch method {
            case .options: return preflight(allow: "POST, OPTIONS")
            case .post:
                if let denied = authorize(request, context) { return denied }
                return await createViewer(request, context, sessions: sessions, camera: camera)
            default: return notAllowed("POST, OPTIONS")
            }
        case 2 where parts[0] == "whep":
            let id = String(parts[1])
            switch method {
            case .options: return preflight(allow: "DELETE, PATCH, OPTIONS")
            case .delete:
                if let denied = authorize(request, context) { return denied }
                if await sessions.deleteViewer(id: id) {
                    context.logger.info("viewer left", metadata: ["viewer": "\(id)"])
                    return empty(.ok)
                }
                return text(.notFound, "no such viewer\n", cors: true)
            case .patch:
                // Trickle ICE and ICE restarts are not offered (RFC 9725 §4.3.1 lets a
                // server say so with 405); the offer must carry all candidates.
                if let denied = authorize(request, context) { return denied }
                return notAllowed("DELETE, OPTIONS")
            default: return notAllowed("DELETE, PATCH, OPTIONS")
            }
        case 1 where parts[0] == "stats":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            if let denied = authorize(request, context) { return denied }
            let json = await sessions.statsJSON()
            return body(.ok, json, contentType: "application/json", cors: true, head: method == .head)
        case 1 where parts[0] == "metrics":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            if let denied = authorize(request, context) { return denied }
            // Every camera's, whichever path asked.
            var all: [ViewerMetrics] = []
            for host in cameras { all.append(await host.metrics()) }
            let text = PrometheusText.render(all) + routerMetrics()
            return body(.ok, text, contentType: PrometheusText.contentType, cors: true, head: method == .head)
        default:
            return text(.notFound, "not found\n", cors: false)
        }
    }

    // MARK: WHEP

    private func createViewer(_ request: Request, _ context: Context, sessions: any WHEPSessionHost, camera: Int) async -> Response {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.split(separator: ";").first?.trimmingSpaces == "application/sdp" else {
            return text(.unsupportedMediaType, "the offer must be sent as application/sdp\n", cors: true)
        }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maxBodySize)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            return text(.contentTooLarge, "offer larger than \(maxBodySize) bytes\n", cors: true)
        } catch {
            return text(.badRequest, "could not read the offer\n", cors: true)
        }
        let offer = String(buffer: buffer)
        guard !offer.isEmpty else { return text(.badRequest, "empty offer\n", cors: true) }
        do {
            let (id, answer) = try await sessions.createViewer(offer: offer)
            context.logger.info("viewer joined", metadata: ["viewer": "\(id)", "camera": "\(camera)"])
            var headers = corsHeaders
            headers[.contentType] = "application/sdp"
            headers[.location] = "\(ViewerRoutes.cameraPath(camera))whep/\(id)"
            return Response(status: .created, headers: headers, body: .init(byteBuffer: ByteBuffer(string: answer)))
        } catch {
            switch error {
            case .badOffer(let reason):
                context.logger.notice("WHEP offer refused", metadata: ["reason": "\(reason)"])
                return text(.badRequest, "bad offer: \(reason)\n", cors: true)
            case .unavailable(let reason):
                context.logger.notice("WHEP offer not served", metadata: ["reason": "\(reason)"])
                var response = text(.serviceUnavailable, "unavailable: \(reason)\n", cors: true)
                response.headers[.retryAfter] = "2"
                return response
            }
        }
    }

    // MARK: Access

    /// nil when the request may go on, else the 401 to send.
    private func authorize(_ request: Request, _ context: Context) -> Response? {
        guard let token else { return nil }
        var presented: [Substring] = []
        for value in request.headers[values: .authorization] {
            let trimmed = value[...].trimmingSpaces
            if trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " {
                presented.append(trimmed.dropFirst(7).trimmingSpaces)
            }
        }
        if let query = request.uri.queryParameters["token"] { presented.append(query) }
        // Every candidate is compared in full, so the time taken does not depend on
        // where (or whether) a candidate matches.
        var ok = false
        for candidate in presented {
            ok = constantTimeEquals(candidate.utf8, token.utf8) || ok
        }
        if ok { return nil }
        context.logger.debug("request without a valid token", metadata: ["path": "\(request.uri.path)"])
        var response = text(.unauthorized, "a token is required: open the viewer URL printed by camagent\n", cors: true)
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    // MARK: Responses

    private var corsHeaders: HTTPFields {
        [.accessControlAllowOrigin: "*", .accessControlExposeHeaders: "Location"]
    }

    private func preflight(allow: String) -> Response {
        var headers = corsHeaders
        headers[.allow] = allow
        headers[.accessControlAllowMethods] = allow
        headers[.accessControlAllowHeaders] = "Authorization, Content-Type, If-Match"
        headers[.accessControlMaxAge] = "600"
        headers[HTTPFields.Element.Name("Accept-Post")!] = "application/sdp"
        return Response(status: .noContent, headers: headers)
    }

    private func page(head: Bool) -> Response {
        var response = body(.ok, viewerPageHTML, contentType: "text/html; charset=utf-8", cors: false, head: head)
        response.headers[.cacheControl] = "no-store"
        // The page's URL carries the token: never send it on as a referrer.
        response.headers[HTTPFields.Element.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[HTTPFields.Element.Name("X-Content-Type-Options")!] = "nosniff"
        return response
    }

    private func notAllowed(_ allow: String) -> Response {
        var response = text(.methodNotAllowed, "method not allowed\n", cors: true)
        response.headers[.allow] = allow
        return response
    }

    private func empty(_ status: HTTPResponse.Status, allow: String? = nil) -> Response {
        var headers = corsHeaders
        if let allow { headers[.allow] = allow }
        return Response(status: status, headers: headers)
    }

    private func text(_ status: HTTPResponse.Status, _ message: String, cors: Bool) -> Response {
        body(status, message, contentType: "text/plain; charset=utf-8", cors: cors, head: false)
    }

    private func body(_ status: HTTPResponse.Status, _ text: String, contentType: String, cors: Bool, head: Bool) -> Response {
        var headers = cors ? corsHeaders : HTTPFields()
        headers[.contentType] = contentType
        let buffer = ByteBuffer(string: text)
        if head {
            headers[.contentLength] = String(buffer.readableBytes)
            return Response(status: status, headers: headers)
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: buffer))
    }
}

/// Byte-wise comparison whose time depends only on the lengths.
func constantTimeEquals<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
    let a = Array(a), b = Array(b)
    var difference: UInt8 = a.count == b.count ? 0 : 1
    for index in 0..<max(a.count, b.count) {
        let x = index < a.count ? a[index] : 0
        let y = index < b.count ? b[index] : 0
        difference |= x ^ y
    }
    return difference == 0
}

extension Substring {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    var trimmingSpaces: Substring {
        let s = self
        guard let start = s.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return s[s.endIndex...] }
        let end = s.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return s[start...end]
    }
}
