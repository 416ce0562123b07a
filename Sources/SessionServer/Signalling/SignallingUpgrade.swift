import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// Decides each WebSocket upgrade request: only
/// `/v2/sessions/{sid}/connect`, with a valid client token of that session
/// (`?token=` or `Authorization: Bearer`), to a session with room.
///
/// hummingbird-websocket answers every refused upgrade with a bare 400; the
/// contract wants 401, 403, 404 or 503 with a JSON body. So a refusal writes
/// its own response on the upgrading channel, then puts a handler next to
/// the socket that drops every later write: the library's 400 goes nowhere,
/// and the library closes the connection as it always does.
struct SignallingUpgrade: Sendable {
    let services: RouterServices

    typealias Handler = WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>

    func shouldUpgrade(_ head: HTTPRequest, channel: any Channel, logger: Logger) async -> ShouldUpgradeResult<Handler> {
        switch await decide(head) {
        case .success(let connection):
            // Put in place before the upgrade completes, so that it sees every frame.
            let closeFrames = await CloseFrameWatcher.install(on: channel)
            return .upgrade([:]) { inbound, outbound, context in
                await connection.run(inbound: inbound, outbound: outbound, closeFrames: closeFrames, logger: context.logger)
            }
        case .failure(let refusal):
            // The path without its query: a token there must not reach the log.
            let path = head.path?.split(separator: "?").first.map(String.init) ?? ""
            logger.debug("WebSocket upgrade refused", metadata: ["path": "\(path)", "status": "\(refusal.status)", "reason": "\(refusal.message)"])
            await Self.refuse(channel: channel, refusal)
            return .dontUpgrade
        }
    }

    /// The connection to run, or why not.
    func decide(_ head: HTTPRequest) async -> Result<SignallingConnection, APIError> {
        let target = head.path ?? "/"
        let pathPart = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let query = pathPart.count > 1 ? String(pathPart[1]) : nil
        let parts = pathPart[0].split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 4, parts[0] == "v2", parts[1] == "sessions", parts[3] == "connect" else {
            return .failure(APIError(404, "no WebSocket here; signalling is at /v2/sessions/{sessionId}/connect"))
        }
        let sessionID = String(parts[2])
        let token = presentedToken(headers: head.headerFields, query: query, allowQuery: true)
        let caller: Caller
        do {
            caller = try await services.authorize(token: token, .session(sessionID, needs: nil))
        } catch {
            return .failure(error)
        }
        guard case .client(let claims) = caller else {
            return .failure(APIError(403, "connecting needs a client token (a project token has no role)"))
        }
        // `?connectionId=&rejoinKey=`: the client comes back to a connection it had (its socket broke).
        var resuming: SessionRegistry.Rejoin?
        if let query, let id = queryValue("connectionId", in: query), !id.isEmpty {
            resuming = SessionRegistry.Rejoin(connectionID: id, rejoinKey: queryValue("rejoinKey", in: query) ?? "")
        }
        do {
            try services.registry.checkCanConnect(sessionID: sessionID, resuming: resuming, tokenID: claims.tokenID)
        } catch {
            return .failure(APIError(error))
        }
        return .success(SignallingConnection(services: services, sessionID: sessionID, claims: claims, resuming: resuming))
    }

    /// Writes the refusal as an HTTP/1.1 response (Connection: close); nothing
    /// is written after it.
    private static func refuse(channel: any Channel, _ refusal: APIError) async {
        let body = ByteBuffer(string: refusal.jsonBody)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Connection", value: "close")
        if refusal.status == 401 { headers.add(name: "WWW-Authenticate", value: "Bearer") }
        let head = HTTPResponseHead(version: .http1_1, status: .init(statusCode: refusal.status), headers: headers)
        do {
            try await channel.writeAndFlush(HTTPServerResponsePart.head(head))
            try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(body)))
            try await channel.writeAndFlush(HTTPServerResponsePart.end(nil))
            try await channel.pipeline.addHandler(DropWritesHandler(), position: .first)
        } catch {
            // The client went away first: nothing to tell it.
            try? await channel.close()
        }
    }
}

/// Next to the socket, drops whatever is written after a refusal (the
/// library's own 400), so the client sees exactly one response.
private final class DropWritesHandler: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        promise?.succeed()
    }
}
