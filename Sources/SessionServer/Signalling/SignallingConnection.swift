import HummingbirdWebSocket
import Logging

/// One client on the signalling WebSocket, from `connected` to its
/// `connectionDestroyed`. Two tasks: the reader handles the client's
/// messages one at a time; the writer sends what the registry queued in
/// the connection's outbox (events and replies alike, so replies keep
/// their place among events).
struct SignallingConnection: Sendable {
    let services: RouterServices
    let sessionID: String
    let claims: ClientTokenClaims

    /// Longest a client message is read before it counts as broken: far
    /// above the 64 KiB the router accepts, so a message between the two
    /// gets an `error` and the connection stays.
    static let maxReadBytes = 1 << 20

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger) async {
        let outbox = Outbox()
        let connection: ConnectionInfo
        do {
            connection = try services.registry.connect(
                sessionID: sessionID, role: claims.role, data: claims.connectionData, outbox: outbox, tokenID: claims.tokenID)
        } catch {
            // The session filled up (or went) between the upgrade check and now.
            try? await outbound.write(.text(SignallingRefusal(error).messageText))
            try? await outbound.close(.unknown(1013), reason: "try again later")  // 1013: try again later (RFC 6455 registry)
            return
        }
        let connectionID = connection.connectionId
        var connectionLogger = logger
        connectionLogger[metadataKey: "session"] = "\(sessionID)"
        connectionLogger[metadataKey: "connection"] = "\(connectionID)"
        let logger = connectionLogger
        logger.info("signalling connected", metadata: ["role": "\(claims.role.rawValue)"])

        let reason = await withTaskGroup(of: Void.self) { group -> ConnectionEndReason in
            group.addTask { await Self.write(outbox, to: outbound, logger: logger) }
            var reason = ConnectionEndReason.clientDisconnected
            do {
                for try await message in inbound.messages(maxSize: Self.maxReadBytes) {
                    handle(message, connectionID: connectionID, logger: logger)
                }
            } catch {
                logger.debug("signalling read failed", metadata: ["error": "\(error)"])
                reason = .networkDisconnected
            }
            if outbox.overflowed { reason = .networkDisconnected }
            // Relayed offers waiting for this connection's answer fail now.
            services.relayedOffers.publisherLeft(connectionID: connectionID)
            // A no-op after a forced disconnect: the registry already removed it.
            let release = services.registry.disconnect(sessionID: sessionID, connectionID: connectionID, reason: reason)
            services.release(release)
            outbox.finish()
            group.cancelAll()
            return reason
        }
        logger.info("signalling closed", metadata: ["reason": "\(reason.rawValue)"])
    }

    /// Sends the outbox until it ends: on a forced disconnect with a close
    /// frame carrying the reason; when the client stopped reading, with
    /// policy violation.
    private static func write(_ outbox: Outbox, to outbound: WebSocketOutboundWriter, logger: Logger) async {
        do {
            for await item in outbox.items {
                switch item {
                case .text(let text):
                    try await outbound.write(.text(text))
                case .close(let reason):
                    try await outbound.close(.normalClosure, reason: reason)
                    return
                }
            }
            if outbox.overflowed {
                logger.notice("signalling client is not reading its messages; closing it")
                try await outbound.close(.policyViolation, reason: "too many messages queued")
            }
        } catch {
            logger.debug("signalling write failed", metadata: ["error": "\(error)"])
        }
    }

    /// A publisher's reply to a relayed `subscribeOffer`: only the stream's
    /// own connection may give it, and only while the subscriber waits.
    private func relayedOutcome(_ outcome: RelayedOffers.Outcome, for subscriberID: String,
                                from connectionID: String) throws(SignallingRefusal) {
        guard services.registry.isAwaitingRelayedAnswer(sessionID: sessionID, subscriberID: subscriberID, from: connectionID),
              services.relayedOffers.resolve(subscriberID, outcome) else {
            throw SignallingRefusal(404, "no offer of subscriber \(subscriberID.prefix(128)) waits for this connection's answer "
                                    + "(it was answered, given up after \(RelayedOffers.timeout.components.seconds) s, or is another's)")
        }
    }

    private func handle(_ message: WebSocketMessage, connectionID: String, logger: Logger) {
        let registry = services.registry
        let parsed: ClientMessage
        do {
            switch message {
            case .text(let text): parsed = try ClientMessage.parse(text)
            case .binary: throw SignallingRefusal(400, "binary message: messages are JSON text")
            }
            switch parsed {
            case .ping:
                registry.reply(sessionID: sessionID, connectionID: connectionID, jsonText(ServerMessage.Pong()))
            case .signal(let signalType, let data, let to):
                try registry.signal(sessionID: sessionID, from: connectionID, to: to, signalType: signalType, data: data)
            case .publisherProperty(let streamID, let hasAudio, let hasVideo, let publishCaptions):
                try registry.setStreamProperties(
                    sessionID: sessionID, streamID: streamID, requester: connectionID, hasAudio: hasAudio, hasVideo: hasVideo,
                    publishCaptions: publishCaptions)
                if publishCaptions != nil || hasAudio != nil { services.reconcileCaptions(sessionID: sessionID) }
            case .subscribeAnswer(let subscriberID, let sdp):
                try relayedOutcome(.answer(sdp: sdp), for: subscriberID, from: connectionID)
            case .subscribeError(let subscriberID, let code, let message):
                try relayedOutcome(.refused(code: code, message: message), for: subscriberID, from: connectionID)
            case .subscriberLeft(let subscriberID):
                try registry.removeRelayedSubscriber(sessionID: sessionID, subscriberID: subscriberID, by: connectionID)
                logger.info("relayed subscriber left", metadata: ["subscriber": "\(subscriberID)"])
            case .subscriberSettings(let subscriberID, let settings):
                try registry.storeSubscriberSettings(
                    sessionID: sessionID, connectionID: connectionID, subscriberID: subscriberID, settings: settings)
                if settings.subscribeToAudio != nil || settings.subscribeToVideo != nil,
                   let merged = registry.subscriberSettings(sessionID: sessionID, connectionID: connectionID,
                                                            subscriberID: subscriberID) {
                    // The media follows: what the subscriber does not want is not sent.
                    services.media.setSubscriberMedia(subscriberID: subscriberID, audio: merged.subscribeToAudio ?? true,
                                                      video: merged.subscribeToVideo ?? true)
                }
                if let rate = settings.preferredFrameRate {
                    // Honoured where the publisher makes temporal layers: half its rate, or all of it.
                    services.media.setSubscriberFrameRate(subscriberID: subscriberID, rate)
                }
            }
        } catch let refusal as SignallingRefusal {
            logger.debug("signalling message refused", metadata: ["code": "\(refusal.code)", "reason": "\(refusal.message)"])
            registry.reply(sessionID: sessionID, connectionID: connectionID, refusal.messageText)
        } catch let error as RegistryError {
            registry.reply(sessionID: sessionID, connectionID: connectionID, SignallingRefusal(error).messageText)
        } catch {
            registry.reply(sessionID: sessionID, connectionID: connectionID, SignallingRefusal(500, "\(error)").messageText)
        }
    }
}
