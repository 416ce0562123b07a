import FoundationEssentials
import Hummingbird
import Logging
import SDP

/// Every HTTP route of the router but the WebSocket (which the upgrade
/// handler takes before a request gets here): the REST API, WHIP and WHEP,
/// /metrics. Paths are matched on their non-empty components. Every refusal
/// is JSON, `{"code":N,"message":"..."}`.
struct RESTResponder: HTTPResponder {
    typealias Context = BasicRequestContext

    let services: RouterServices
    /// Largest request body read (an SDP offer is a few KiB); larger gets 413.
    let maxBodySize: Int
    /// Routes mounted beside the router's (the embedded publisher's viewer), asked first outside /v2/.
    var additionalRoutes: (any AdditionalRoutes)? = nil

    private var registry: SessionRegistry { services.registry }

    func respond(to request: Request, context: Context) async throws -> Response {
        if let additionalRoutes, request.uri.path.split(separator: "/").first != "v2" {
            let services = services
            let routerMetrics: @Sendable () -> String = {
                RouterMetrics.render(counts: services.registry.counts(), forwarding: services.media.counters,
                                     captions: services.media.captionCounters)
            }
            if let response = try await additionalRoutes.respond(to: request, context: context, routerMetrics: routerMetrics) {
                return response
            }
        }
        do {
            return try await route(request, context)
        } catch {
            if error.status >= 500 {
                context.logger.notice("request refused", metadata: ["path": "\(request.uri.path)", "status": "\(error.status)", "reason": "\(error.message)"])
            } else {
                context.logger.debug("request refused", metadata: ["path": "\(request.uri.path)", "status": "\(error.status)", "reason": "\(error.message)"])
            }
            return errorResponse(error)
        }
    }

    private func route(_ request: Request, _ context: Context) async throws(APIError) -> Response {
        let parts = request.uri.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let method = request.method
        if method == .options { return preflight() }
        switch parts.count {
        case 0:
            try only(method, .get, .head)
            return page(head: method == .head)
        case 1 where parts[0] == "metrics":
            try only(method, .get, .head)
            return metrics(head: method == .head)
        case 2 where parts == ["v2", "sessions"]:
            try only(method, .post)
            return try await createSession(request)
        case 3 where parts[0...1] == ["v2", "sessions"]:
            try only(method, .get, .head)
            return try await describeSession(request, sessionID: parts[2], head: method == .head)
        case 4 where parts[0...1] == ["v2", "sessions"]:
            let sessionID = parts[2]
            switch parts[3] {
            case "tokens":
                try only(method, .post)
                return try await createToken(request, sessionID: sessionID)
            case "streams":
                try only(method, .get, .head)
                return try await listStreams(request, sessionID: sessionID)
            case "publish":
                try only(method, .post)
                return try await publish(request, context, sessionID: sessionID)
            case "connect":
                throw APIError(400, "this is the signalling WebSocket: connect with a WebSocket client (Upgrade: websocket)")
            case "captions":
                try only(method, .post)
                return try await startCaptions(request, context, sessionID: sessionID)
            default:
                throw APIError(404, "no such route")
            }
        case 4 where parts[0...1] == ["v2", "captions"] && parts[3] == "stop":
            try only(method, .post)
            return try await stopCaptions(request, context, captionsID: parts[2])
        case 5 where parts[0...1] == ["v2", "sessions"] && parts[3] == "connections":
            try only(method, .delete)
            return try await forceDisconnect(request, context, sessionID: parts[2], connectionID: parts[4])
        case 5 where parts[0...1] == ["v2", "sessions"] && parts[3] == "publish":
            try only(method, .delete)
            return try await unpublish(request, context, sessionID: parts[2], streamID: parts[4])
        case 6 where parts[0...1] == ["v2", "sessions"] && parts[3] == "streams" && parts[5] == "subscribe":
            try only(method, .post)
            return try await subscribe(request, context, sessionID: parts[2], streamID: parts[4])
        case 7 where parts[0...1] == ["v2", "sessions"] && parts[3] == "streams" && parts[5] == "subscribe":
            try only(method, .delete)
            return try await unsubscribe(request, context, sessionID: parts[2], streamID: parts[4], subscriberID: parts[6])
        default:
            throw APIError(404, "no such route")
        }
    }

    // MARK: Sessions and tokens

    private struct CreateSessionBody: Decodable {
        var mediaMode: String?
    }

    private func createSession(_ request: Request) async throws(APIError) -> Response {
        _ = try await services.authorize(token: token(request), .project)
        let body = try await decodeJSON(CreateSessionBody.self, from: request, emptyMeans: CreateSessionBody())
        let modeName = body.mediaMode ?? MediaMode.routed.rawValue
        guard let mode = MediaMode(rawValue: modeName) else {
            throw APIError(400, "mediaMode must be \"routed\" or \"relayed\", not \"\(modeName.prefix(40))\"")
        }
        let session: SessionInfo
        do { session = try registry.createSession(mediaMode: mode) } catch { throw APIError(error) }
        services.logger.info("session created", metadata: ["session": "\(session.sessionID)", "mediaMode": "\(mode.rawValue)"])
        return json(.ok, ["sessionId": session.sessionID])
    }

    private struct CreateTokenBody: Decodable {
        var role: String?
        var expireIn: Int?
        var data: String?
    }

    private struct SessionDescription: Encodable {
        var sessionId: String
        var mediaMode: MediaMode
        var createdAt: Int64
    }

    /// A session's media mode, for a client deciding how to publish into it
    /// (a WHIP offer, or a relayed announcement): any token of the session, or the project's.
    private func describeSession(_ request: Request, sessionID: String, head: Bool) async throws(APIError) -> Response {
        _ = try await services.authorize(token: token(request), .session(sessionID, needs: nil))
        guard let info = registry.session(sessionID) else { throw APIError(RegistryError.noSuchSession(sessionID)) }
        return json(.ok, SessionDescription(sessionId: info.sessionID, mediaMode: info.mediaMode,
                                            createdAt: info.createdAt.unixMilliseconds), head: head)
    }

    private func createToken(_ request: Request, sessionID: String) async throws(APIError) -> Response {
        _ = try await services.authorize(token: token(request), .project)
        guard registry.session(sessionID) != nil else { throw APIError(RegistryError.noSuchSession(sessionID)) }
        let body = try await decodeJSON(CreateTokenBody.self, from: request, emptyMeans: CreateTokenBody())
        let roleName = body.role ?? Role.publisher.rawValue
        guard let role = Role(rawValue: roleName) else { throw APIError(400, "\(TokenError.unknownRole(roleName))") }
        do {
            let token = try await services.tokens.makeClientToken(
                sessionID: sessionID, role: role, connectionData: body.data ?? "",
                expireIn: body.expireIn ?? TokenAuthority.defaultLifetime)
            return json(.ok, ["token": token])
        } catch {
            throw APIError(400, "\(error)")
        }
    }

    private func listStreams(_ request: Request, sessionID: String) async throws(APIError) -> Response {
        _ = try await services.authorize(token: token(request), .session(sessionID, needs: nil))
        do {
            return json(.ok, try registry.streams(sessionID: sessionID), head: request.method == .head)
        } catch {
            throw APIError(error)
        }
    }

    private func forceDisconnect(_ request: Request, _ context: Context, sessionID: String, connectionID: String) async throws(APIError) -> Response {
        _ = try await services.authorize(token: token(request), .session(sessionID, needs: .forceDisconnect))
        guard let release = registry.disconnect(sessionID: sessionID, connectionID: connectionID, reason: .forceDisconnected) else {
            throw APIError(RegistryError.noSuchConnection(connectionID))
        }
        context.logger.info("connection force-disconnected", metadata: ["session": "\(sessionID)", "connection": "\(connectionID)"])
        services.release(release)
        return Response(status: .noContent, headers: corsHeaders)
    }

    // MARK: Captions

    private struct StartCaptionsBody: Decodable {
        var languageCode: String?
        var partialCaptions: Bool?
        var maxDuration: Int?
    }

    /// Live captions for a routed session's streams whose publishers ask for
    /// them: a moderator's or the project's call. 202 and the captions' id.
    private func startCaptions(_ request: Request, _ context: Context, sessionID: String) async throws(APIError) -> Response {
        _ = try await services.authorize(token: token(request), .session(sessionID, needs: .captions))
        let body = try await decodeJSON(StartCaptionsBody.self, from: request, emptyMeans: StartCaptionsBody())
        var settings = CaptionsSettings()
        if let code = body.languageCode {
            guard CaptionsSettings.languageCodes.contains(code) else {
                throw APIError(400, "languageCode \"\(code.prefix(20))\" is not supported; the engine speaks \(CaptionsSettings.languageCodes.sorted().joined(separator: ", "))")
            }
            settings.languageCode = code
        }
        if let partials = body.partialCaptions { settings.partialCaptions = partials }
        if let duration = body.maxDuration {
            guard CaptionsSettings.durations.contains(duration) else {
                throw APIError(400, "maxDuration must be \(CaptionsSettings.durations.lowerBound) to \(CaptionsSettings.durations.upperBound) seconds")
            }
            settings.maxDuration = duration
        }
        if registry.session(sessionID)?.mediaMode == .routed, let reason = services.media.captionsUnavailable {
            throw APIError(503, "captions cannot run on this router: \(reason)")
        }
        let captionsID: String
        do { captionsID = try registry.startCaptions(sessionID: sessionID, settings: settings) } catch { throw APIError(error) }
        services.reconcileCaptions(sessionID: sessionID)
        context.logger.info("captions started", metadata: ["session": "\(sessionID)", "captions": "\(captionsID)", "partials": "\(settings.partialCaptions)"])
        // maxDuration: they stop by themselves, unless stopped before.
        let services = services, seconds = settings.maxDuration
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            if services.registry.stopCaptions(captionsID: captionsID) != nil {
                services.reconcileCaptions(sessionID: sessionID)
                services.logger.info("captions stopped at their maxDuration", metadata: ["session": "\(sessionID)", "captions": "\(captionsID)"])
            }
        }
        return json(.accepted, ["captionsId": captionsID])
    }

    private func stopCaptions(_ request: Request, _ context: Context, captionsID: String) async throws(APIError) -> Response {
        let presented = token(request)
        guard let sessionID = registry.captionsSession(captionsID) else {
            // Authenticated first: an unknown id is told only to a valid token.
            _ = try await services.verify(token: presented)
            throw APIError(404, "no captions \(captionsID.prefix(128)) are running")
        }
        _ = try await services.authorize(token: presented, .session(sessionID, needs: .captions))
        guard registry.stopCaptions(captionsID: captionsID) != nil else {
            throw APIError(404, "no captions \(captionsID.prefix(128)) are running")
        }
        services.reconcileCaptions(sessionID: sessionID)
        context.logger.info("captions stopped", metadata: ["session": "\(sessionID)", "captions": "\(captionsID)"])
        return Response(status: .noContent, headers: corsHeaders)
    }

    // MARK: Media (WHIP in, WHEP out)

    private func publish(_ request: Request, _ context: Context, sessionID: String) async throws(APIError) -> Response {
        let caller = try await services.authorize(token: token(request), .session(sessionID, needs: .publish))
        guard case .client(let claims) = caller else {
            throw APIError(403, "publishing needs a client token (a project token has no connection)")
        }
        let connectionID = request.uri.queryParameters["connectionId"].map(String.init)
        if let connectionID {
            // `authorize` checked the token is for this session; the connection must be in it too,
            // and be the caller's own (joined with this token): no stream is put on another's connection.
            do { try registry.checkOwnership(sessionID: sessionID, connectionID: connectionID, tokenID: claims.tokenID) } catch {
                throw APIError(error)
            }
        }
        let name = request.uri.queryParameters["name"].map { String($0.prefix(256)) } ?? ""
        // OpenTok's publishCaptions, for a WHIP client that has no signalling connection to say it on.
        let publishCaptions = request.uri.queryParameters["publishCaptions"].map(String.init) == "true"
        if isJSON(request) {
            return try await announceRelayedStream(request, context, sessionID: sessionID, claims: claims,
                                                   connectionID: connectionID, name: name, publishCaptions: publishCaptions)
        }
        let offer = try await readOffer(request)
        let streamID: String
        do { streamID = try registry.reserveStream(sessionID: sessionID, connectionID: connectionID) } catch { throw APIError(error) }

        let media: PublishedMedia
        do {
            media = try services.media.publish(streamID: streamID, offer: offer, events: services.mediaEvents(sessionID: sessionID, streamID: streamID))
        } catch {
            registry.cancelStream(sessionID: sessionID, streamID: streamID)
            throw APIError(error)
        }
        if publishCaptions && !media.hasAudio {
            services.media.unpublish(streamID: streamID)
            registry.cancelStream(sessionID: sessionID, streamID: streamID)
            throw APIError(400, SessionRegistry.missingAudioTrack(streamID) + " (publishCaptions with an offer that sends no audio)")
        }
        let publisher: SessionRegistry.Publisher = connectionID.map { .connection($0) }
            ?? .bareWHIPClient(role: claims.role, data: claims.connectionData)
        // A publisher that (re)publishes with its audio or video turned off (publishAudio/publishVideo
        // false) says so here: its stream starts that way, as publisherProperty would set it.
        let audioOff = request.uri.queryParameters["hasAudio"].map(String.init) == "false"
        let videoOff = request.uri.queryParameters["hasVideo"].map(String.init) == "false"
        let announced: (StreamInfo, SessionRegistry.MediaRelease?)
        do {
            announced = try registry.announceStream(
                sessionID: sessionID, streamID: streamID, publisher: publisher, name: name,
                hasAudio: media.hasAudio && !audioOff, hasVideo: media.hasVideo && !videoOff, videoType: .camera,
                tokenID: claims.tokenID,
                publishCaptions: publishCaptions, hasAudioTrack: media.hasAudio, hasVideoTrack: media.hasVideo)
        } catch {
            services.media.unpublish(streamID: streamID)
            throw APIError(error)
        }
        services.release(announced.1)
        // OpenTok's audioFallbackEnabled: a publisher may keep its subscribers on video whatever their loss.
        if request.uri.queryParameters["audioFallback"].map(String.init) == "false" {
            services.media.setAudioFallback(streamID: streamID, enabled: false)
        }
        if announced.0.hasCaptions { services.reconcileCaptions(sessionID: sessionID) }
        context.logger.info("stream published", metadata: ["session": "\(sessionID)", "stream": "\(streamID)", "connection": "\(announced.0.connectionId)"])
        return sdp(.created, media.answer, location: "/v2/sessions/\(sessionID)/publish/\(streamID)")
    }

    /// What a relayed stream's publisher says about it when it announces it
    /// (its media never reaches the router, so the router cannot read it).
    private struct RelayedStreamBody: Decodable {
        var hasAudio: Bool
        var hasVideo: Bool
        var videoType: VideoType?
        var width: Int?
        var height: Int?
    }

    private struct AnnouncedStream: Encodable {
        var streamId: String
    }

    /// A stream of a relayed session: announced by a signalling connection
    /// (JSON, not a WHIP offer), which then answers each subscriber's offer
    /// itself (`subscribeOffer`). 201 with `{"streamId"}` and the same
    /// `Location` a WHIP stream has, whose DELETE ends it.
    private func announceRelayedStream(_ request: Request, _ context: Context, sessionID: String, claims: ClientTokenClaims,
                                       connectionID: String?, name: String, publishCaptions: Bool) async throws(APIError) -> Response {
        if publishCaptions {
            throw APIError(RegistryError.conflict(SessionRegistry.captionsNeedRoutedMessage))
        }
        let body = try await decodeJSON(RelayedStreamBody?.self, from: request, emptyMeans: nil)
        guard let body else { throw APIError(400, "the announcement needs a JSON body: {\"hasAudio\",\"hasVideo\",\"width\",\"height\"}") }
        var dimensions: (width: Int, height: Int)?
        switch (body.width, body.height) {
        case (nil, nil): break
        case (let width?, let height?):
            guard (0...ClientMessage.maxVideoWidth).contains(width), (0...ClientMessage.maxVideoHeight).contains(height) else {
                throw APIError(400, "width and height must be 0x0 to \(ClientMessage.maxVideoWidth)x\(ClientMessage.maxVideoHeight)")
            }
            dimensions = (width, height)
        default:
            throw APIError(400, "width and height go together")
        }
        let streamID: String
        do {
            streamID = try registry.reserveStream(sessionID: sessionID, connectionID: connectionID, mediaMode: .relayed,
                                                  dimensions: dimensions)
        } catch { throw APIError(error) }
        let announced: (StreamInfo, SessionRegistry.MediaRelease?)
        do {
            // reserveStream made sure there is a connection.
            announced = try registry.announceStream(
                sessionID: sessionID, streamID: streamID, publisher: .connection(connectionID ?? ""), name: name,
                hasAudio: body.hasAudio, hasVideo: body.hasVideo, videoType: body.videoType ?? .camera, tokenID: claims.tokenID)
        } catch { throw APIError(error) }
        context.logger.info("relayed stream announced", metadata: ["session": "\(sessionID)", "stream": "\(streamID)",
                                                                  "connection": "\(announced.0.connectionId)"])
        var response = json(.created, AnnouncedStream(streamId: streamID))
        response.headers[.location] = "/v2/sessions/\(sessionID)/publish/\(streamID)"
        return response
    }

    /// WHIP's DELETE. Stream ids are announced to the whole session, so the
    /// id alone is no proof of ownership: the token that published may end
    /// the stream (clientDisconnected), a moderator or the project may force
    /// it (forceUnpublished), nobody else.
    private func unpublish(_ request: Request, _ context: Context, sessionID: String, streamID: String) async throws(APIError) -> Response {
        let caller = try await services.authorize(token: token(request), .session(sessionID, needs: nil))
        guard let publisherTokenID = registry.streamPublisherTokenID(sessionID: sessionID, streamID: streamID) else {
            throw APIError(RegistryError.noSuchStream(streamID))
        }
        let reason: StreamEndReason
        if case .client(let claims) = caller, claims.tokenID == publisherTokenID {
            reason = .clientDisconnected
        } else if caller.capabilities.forceDisconnect {
            reason = .forceUnpublished
        } else {
            throw APIError(403, "only the token that published stream \(streamID), a moderator or the project may end it")
        }
        guard let release = registry.removeStream(sessionID: sessionID, streamID: streamID, reason: reason) else {
            throw APIError(RegistryError.noSuchStream(streamID))
        }
        services.release(release)
        context.logger.info("stream unpublished", metadata: ["session": "\(sessionID)", "stream": "\(streamID)"])
        return Response(status: .noContent, headers: corsHeaders)
    }

    private func subscribe(_ request: Request, _ context: Context, sessionID: String, streamID: String) async throws(APIError) -> Response {
        let caller = try await services.authorize(token: token(request), .session(sessionID, needs: .subscribe))
        let wishes = try Self.offeredWishes(request)
        let offer = try await readOffer(request)
        let subscriberID: String
        do { subscriberID = try registry.reserveSubscriber(sessionID: sessionID, streamID: streamID) } catch { throw APIError(error) }
        let services = services
        let answer: String
        if registry.session(sessionID)?.mediaMode == .relayed {
            answer = try await relayedAnswer(offer, sessionID: sessionID, streamID: streamID, subscriberID: subscriberID)
        } else {
            do {
                answer = try services.media.subscribe(streamID: streamID, subscriberID: subscriberID, offer: offer) { reason in
                    if services.registry.removeSubscriber(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID) {
                        services.logger.info("subscriber ended by its media", metadata: ["subscriber": "\(subscriberID)", "reason": "\(reason)"])
                        Task { services.media.unsubscribe(subscriberID: subscriberID) }
                    }
                }
            } catch {
                registry.cancelSubscriber(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID)
                throw APIError(error)
            }
            // In force before the answer leaves, so before the subscriber's first packet.
            if let size = wishes.resolution { services.media.setSubscriberResolution(subscriberID: subscriberID, size) }
            if let rate = wishes.frameRate { services.media.setSubscriberFrameRate(subscriberID: subscriberID, rate) }
        }
        let tokenID = if case .client(let claims) = caller { claims.tokenID } else { String?.none }
        guard registry.confirmSubscriber(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID, tokenID: tokenID,
                                         offeredVideoGotNone: Self.offeredVideoGotNone(offer: offer, answer: answer)) else {
            services.media.unsubscribe(subscriberID: subscriberID)
            throw APIError(RegistryError.noSuchStream(streamID))
        }
        context.logger.info("subscriber added", metadata: ["session": "\(sessionID)", "stream": "\(streamID)", "subscriber": "\(subscriberID)"])
        return sdp(.created, answer, location: "/v2/sessions/\(sessionID)/streams/\(streamID)/subscribe/\(subscriberID)")
    }

    /// A subscriber's preferredResolution (`WxH`) and preferredFrameRate
    /// given with its WHEP offer, as query parameters of the subscribe URL.
    /// Sent later as `subscriberSettings` they race the subscriber's first
    /// keyframe: a subscriber that preferred the small simulcast layer could
    /// start on the large one. Either way they are honoured in routed
    /// sessions only (a relayed publisher answers for itself).
    static func offeredWishes(_ request: Request) throws(APIError) -> (resolution: (width: Int, height: Int)?, frameRate: Double?) {
        let query = request.uri.queryParameters
        var resolution: (width: Int, height: Int)?
        if let text = query["preferredResolution"] {
            let parts = text.split(separator: "x", omittingEmptySubsequences: false)
            guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]),
                  ClientMessage.acceptsPreferredResolution(width: width, height: height) else {
                throw APIError(400, "preferredResolution must be WxH, \(ClientMessage.preferredResolutionBounds)")
            }
            resolution = (width, height)
        }
        var frameRate: Double?
        if let text = query["preferredFrameRate"] {
            guard let rate = Double(String(text)), ClientMessage.frameRates.contains(rate) else {
                throw APIError(400, "preferredFrameRate must be \(ClientMessage.preferredFrameRateBounds)")
            }
            frameRate = rate
        }
        return (resolution, frameRate)
    }

    /// Whether a subscriber's offer asks to receive video and the answer
    /// (the router's, or a relayed publisher's) sends none: its video section
    /// answered inactive or rejected. An offer that asks for no video is not
    /// refused anything.
    static func offeredVideoGotNone(offer: String, answer: String) -> Bool {
        // The section `ViewerOffer.accepting` answers: the first video one that wants media.
        guard let offered = try? ViewerOffer(SDP.SessionDescription(parsing: offer)),
              let answered = try? SDP.SessionDescription(parsing: answer),
              let index = offered.sections.firstIndex(where: { $0.kind == "video" && $0.wantsMedia })
        else { return false }
        // The answer's sections are the offer's, in its order (JSEP).
        guard index < answered.media.count, answered.media[index].kind == "video" else { return false }
        let section = answered.media[index]
        return section.port == 0 || !["sendonly", "sendrecv"].contains(section.direction)
    }

    /// Relayed sessions: the offer goes to the stream's publisher over its
    /// signalling connection, and its answer comes back here (within
    /// `RelayedOffers.timeout`); the media then goes between the two.
    private func relayedAnswer(_ offer: String, sessionID: String, streamID: String,
                               subscriberID: String) async throws(APIError) -> String {
        let registry = registry
        let outcome = await services.relayedOffers.awaitAnswer(subscriberID: subscriberID) { sendingTo in
            registry.sendRelayedOffer(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID, sdp: offer,
                                      sendingTo: sendingTo)
        }
        guard case .answer(let sdp) = outcome else {
            // No answer: the place goes back (and a publisher that answers late is told to let go).
            registry.cancelSubscriber(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID)
            throw Self.refusal(outcome, streamID: streamID)
        }
        return sdp
    }

    /// Why a relayed subscriber got no answer, as its WHEP request's error.
    private static func refusal(_ outcome: RelayedOffers.Outcome, streamID: String) -> APIError {
        switch outcome {
        case .answer:
            APIError(500, "stream \(streamID): an answer taken for a refusal")
        case .refused(let code, let message):
            APIError(code, "the publisher of stream \(streamID) refused the offer: \(message)")
        case .publisherGone:
            APIError(404, "stream \(streamID) ended before its publisher answered")
        case .publisherAway:
            APIError(503, "the publisher of stream \(streamID) lost its signalling and has not come back yet; try again in a few seconds")
        case .timedOut:
            APIError(503, "the publisher of stream \(streamID) did not answer within "
                           + "\(RelayedOffers.timeout.components.seconds) s (relayed session: the publisher answers offers itself)")
        }
    }

    /// WHEP's DELETE: by the token that subscribed, a moderator or the project.
    private func unsubscribe(_ request: Request, _ context: Context, sessionID: String, streamID: String, subscriberID: String) async throws(APIError) -> Response {
        let caller = try await services.authorize(token: token(request), .session(sessionID, needs: nil))
        guard let subscriberTokenID = registry.subscriberTokenID(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID) else {
            throw APIError(RegistryError.noSuchSubscriber(subscriberID))
        }
        let isOwn = if case .client(let claims) = caller { claims.tokenID == subscriberTokenID } else { false }
        guard isOwn || caller.capabilities.forceDisconnect else {
            throw APIError(403, "only the token that subscribed, a moderator or the project may end subscriber \(subscriberID)")
        }
        guard registry.removeSubscriber(sessionID: sessionID, streamID: streamID, subscriberID: subscriberID) else {
            throw APIError(RegistryError.noSuchSubscriber(subscriberID))
        }
        services.media.unsubscribe(subscriberID: subscriberID)
        context.logger.info("subscriber removed", metadata: ["session": "\(sessionID)", "subscriber": "\(subscriberID)"])
        return Response(status: .noContent, headers: corsHeaders)
    }

    /// The SDP offer of a WHIP or WHEP POST: application/sdp, not empty, UTF-8.
    private func isJSON(_ request: Request) -> Bool {
        request.headers[.contentType]?.split(separator: ";").first?.trimmingSpaces.lowercased() == "application/json"
    }

    private func readOffer(_ request: Request) async throws(APIError) -> String {
        if let type = request.headers[.contentType],
           type.split(separator: ";").first?.trimmingSpaces.lowercased() != "application/sdp" {
            throw APIError(400, "the offer must be sent as application/sdp, not \(type.prefix(60))")
        }
        let bytes = try await readBody(request)
        guard let offer = String(validating: bytes, as: UTF8.self), !offer.trimmingSpaces.isEmpty else {
            throw APIError(400, "the offer is empty or not UTF-8 text")
        }
        return offer
    }

    // MARK: The session page

    /// The page itself is public: what it shows needs the token in its address.
    private func page(head: Bool) -> Response {
        var headers = corsHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        let buffer = ByteBuffer(string: sessionPageHTML)
        if head {
            headers[.contentLength] = String(buffer.readableBytes)
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: buffer))
    }

    // MARK: Metrics

    private func metrics(head: Bool) -> Response {
        let text = RouterMetrics.render(counts: registry.counts(), forwarding: services.media.counters,
                                        captions: services.media.captionCounters)
        var headers = corsHeaders
        headers[.contentType] = RouterMetrics.contentType
        let buffer = ByteBuffer(string: text)
        if head {
            headers[.contentLength] = String(buffer.readableBytes)
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: buffer))
    }

    // MARK: Requests

    private func token(_ request: Request) -> String? {
        presentedToken(headers: request.headers, query: nil, allowQuery: false)
    }

    private func only(_ method: HTTPRequest.Method, _ allowed: HTTPRequest.Method...) throws(APIError) {
        guard allowed.contains(method) else {
            throw APIError(405, "method \(method.rawValue) not allowed here; use \(allowed.map(\.rawValue).joined(separator: " or "))")
        }
    }

    private func readBody(_ request: Request) async throws(APIError) -> [UInt8] {
        // A body declared too large is refused before it is waited for (a client that
        // declares 100 MB and sends 2 bytes would otherwise hold the connection until
        // the read times out).
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > maxBodySize {
            throw APIError(413, "the body is larger than \(maxBodySize) bytes (Content-Length \(declared))")
        }
        do {
            let buffer = try await request.body.collect(upTo: maxBodySize)
            return Array(buffer.readableBytesView)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw APIError(413, "the body is larger than \(maxBodySize) bytes")
        } catch {
            throw APIError(400, "could not read the body: \(error)")
        }
    }

    /// The body as JSON of type T; an empty body is `emptyMeans`.
    private func decodeJSON<T: Decodable>(_ type: T.Type, from request: Request, emptyMeans: T) async throws(APIError) -> T {
        let bytes = try await readBody(request)
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) { return emptyMeans }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let error as DecodingError {
            // Foundation says "not valid JSON" also for valid JSON whose number does not fit
            // the field (1.5 where whole seconds are taken), without naming the field.
            if case .dataCorrupted(let context) = error, context.codingPath.isEmpty,
               (try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))) != nil {
                throw APIError(400, "bad JSON body: a field's value is not of its type (numbers such as expireIn are whole)")
            }
            throw APIError(400, "bad JSON body: \(describe(error))")
        } catch {
            throw APIError(400, "bad JSON body: \(error)")
        }
    }

    // MARK: Responses

    private var corsHeaders: HTTPFields {
        [.accessControlAllowOrigin: "*", .accessControlExposeHeaders: "Location"]
    }

    private func preflight() -> Response {
        var headers = corsHeaders
        headers[.accessControlAllowMethods] = "GET, POST, DELETE, OPTIONS"
        headers[.accessControlAllowHeaders] = "Authorization, Content-Type, X-OPENTOK-AUTH"
        headers[.accessControlMaxAge] = "600"
        return Response(status: .noContent, headers: headers)
    }

    private func json(_ status: HTTPResponse.Status, _ value: some Encodable, head: Bool = false) -> Response {
        var headers = corsHeaders
        headers[.contentType] = "application/json"
        let buffer = ByteBuffer(string: jsonText(value))
        if head {
            headers[.contentLength] = String(buffer.readableBytes)
            return Response(status: status, headers: headers)
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: buffer))
    }

    private func sdp(_ status: HTTPResponse.Status, _ answer: String, location: String) -> Response {
        var headers = corsHeaders
        headers[.contentType] = "application/sdp"
        headers[.location] = location
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: answer)))
    }

    private func errorResponse(_ error: APIError) -> Response {
        var headers = corsHeaders
        headers[.contentType] = "application/json"
        if error.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        if error.status == 503 { headers[.retryAfter] = "2" }
        return Response(status: .init(code: error.status), headers: headers,
                        body: .init(byteBuffer: ByteBuffer(string: error.jsonBody)))
    }
}
