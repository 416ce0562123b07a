import HummingbirdWebSocket
import Logging

/// One client on the signalling WebSocket, from `connected` to its
/// `connectionDestroyed`. Two tasks: the reader handles the client's
/// messages one at a time; the writer sends what the registry queued in
/// the connection's outbox (events and replies alike, so replies keep
/// their place among events).
///
/// A socket that breaks (no close frame) leaves its connection to the
/// registry for `rejoinGrace`: the client may come back to it with
/// `?connectionId=` (`resuming`), streams and all, and this type then
/// runs the new socket of the same connection.
struct SignallingConnection: Sendable {
    let services: RouterServices
    let sessionID: String
    let claims: ClientTokenClaims
    /// The connection the client asks to take back, if any.
    var resuming: SessionRegistry.Rejoin? = nil

    /// Longest a client message is read before it counts as broken: far
    /// above the 64 KiB the router accepts, so a message between the two
    /// gets an `error` and the connection stays.
    static let maxReadBytes = 1 << 20

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, closeFrames: CloseFrameWatcher,
             logger: Logger) async {
        if let resuming, services.registry.wasForcedOut(sessionID: sessionID, resuming) {
            // Away when a moderator forced it out, its client never heard it: told now, as it would have been.
            try? await outbound.close(.normalClosure, reason: ConnectionEndReason.forceDisconnected.rawValue)
            return
        }
        let joined: SessionRegistry.Joined
        do {
            joined = try services.registry.join(
                sessionID: sessionID, role: claims.role, data: claims.connectionData, outbox: Outbox(), tokenID: claims.tokenID,
                resuming: resuming)
        } catch {
            // The session filled up (or went) between the upgrade check and now.
            try? await outbound.write(.text(SignallingRefusal(error).messageText))
            try? await outbound.close(.unknown(1013), reason: "try again later")  // 1013: try again later (RFC 6455 registry)
            return
        }
        guard let outbox = joined.outbox else { return }
        let connectionID = joined.info.connectionId
        var connectionLogger = logger
        connectionLogger[metadataKey: "session"] = "\(sessionID)"
        connectionLogger[metadataKey: "connection"] = "\(connectionID)"
        let logger = connectionLogger
        if joined.resumed {
            logger.notice("signalling connection taken back by its client", metadata: ["role": "\(claims.role.rawValue)"])
            // Its old socket was still open here: offers sent on it will not be answered there.
            if joined.first == nil { services.relayedOffers.publisherLeft(connectionID: connectionID, as: .publisherAway) }
        } else {
            if let resuming {
                logger.info("signalling connection to take back is gone; a new one", metadata: ["asked": "\(resuming.connectionID)"])
            }
            logger.info("signalling connected", metadata: ["role": "\(claims.role.rawValue)"])
        }

        let reason = await withTaskGroup(of: Void.self) { group -> ConnectionEndReason in
            group.addTask { await Self.write(joined.first, then: outbox, to: outbound, logger: logger) }
            var reason = ConnectionEndReason.clientDisconnected
            do {
                for try await message in inbound.messages(maxSize: Self.maxReadBytes) {
                    handle(message, connectionID: connectionID, logger: logger)
                }
                // Ended without a close frame: the connection broke (or the router's pings went unanswered).
                if !closeFrames.clientClosed { reason = .networkDisconnected }
            } catch {
                logger.debug("signalling read failed", metadata: ["error": "\(error)"])
                reason = .networkDisconnected
            }
            if outbox.overflowed { reason = .networkDisconnected }
            switch services.registry.socketEnded(sessionID: sessionID, connectionID: connectionID, outbox: outbox, reason: reason) {
            case .kept(let awayID):
                // Relayed offers waiting for this connection's answer fail now; it may come back.
                services.relayedOffers.publisherLeft(connectionID: connectionID, as: .publisherAway)
                keep(connectionID: connectionID, awayID: awayID, logger: logger)
            case .ended(let release):
                // Relayed offers waiting for this connection's answer fail now. (A no-op
                // after a forced disconnect: the registry already removed it.)
                services.relayedOffers.publisherLeft(connectionID: connectionID)
                services.release(release)
            case .replaced:
                break
            }
            outbox.finish()
            group.cancelAll()
            return reason
        }
        logger.info("signalling closed", metadata: ["reason": "\(reason.rawValue)"])
    }

    /// The connection waits for its client for the grace, then ends if it did not come back.
    private func keep(connectionID: String, awayID: Int, logger: Logger) {
        guard let grace = services.registry.limits.rejoinGrace else { return }
        logger.notice("signalling broke; the connection is kept for its client", metadata: ["grace": "\(grace)"])
        let services = services, sessionID = sessionID
        Task {
            try? await Task.sleep(for: grace)
            guard let release = services.registry.expireAway(sessionID: sessionID, connectionID: connectionID, awayID: awayID) else {
                return
            }
            logger.notice("signalling client did not come back within the rejoin grace; connection ended",
                          metadata: ["reason": "networkDisconnected"])
            services.relayedOffers.publisherLeft(connectionID: connectionID)
            services.release(release)
        }
    }

    /// Sends `first` (a resumed connection's `connected`), then the outbox
    /// until it ends: on a forced disconnect with a close
    /// frame carrying the reason; when the client stopped reading, with
    /// policy violation.
    private static func write(_ first: String?, then outbox: Outbox, to outbound: WebSocketOutboundWriter,
                              logger: Logger) async {
        do {
            if let first { try await outbound.write(.text(first)) }
            for await item in outbox.items {
                switch item {
                case .text(let text):
                    outbox.taken(text)
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
                if let size = settings.preferredResolution {
                    // Honoured where the publisher simulcasts: the largest layer that fits.
                    services.media.setSubscriberResolution(subscriberID: subscriberID, size)
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
