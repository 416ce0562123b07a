import Logging
import MediaTypes

/// What the REST routes and the signalling connections share: the
/// registry, the token authority, the media engine, and the checks they
/// all make on a caller.
struct RouterServices: Sendable {
    let registry: SessionRegistry
    let tokens: TokenAuthority
    let media: any SessionMediaEngine
    let logger: Logger
    /// One captions change at a time: what the registry says and what the
    /// engine does are read and done together, so two changes cannot cross.
    let captionsGate = CaptionsGate()
    /// Relayed sessions: subscribers' offers waiting for their publisher's answer.
    let relayedOffers = RelayedOffers()

    final class CaptionsGate: Sendable {
        let lock = PThreadLocked(())
    }

    enum Requirement {
        /// Only a project token will do.
        case project
        /// A project token, or a client token of the session in the path that has this capability.
        case session(String, needs: Capability?)
    }

    /// Checks, in the contract's order: a token at all and a valid one (401),
    /// the right kind and session (403), the session exists (404), the
    /// capability (403).
    func authorize(token: String?, _ requirement: Requirement) async throws(APIError) -> Caller {
        let caller = try await verify(token: token)
        switch requirement {
        case .project:
            guard case .project = caller else { throw APIError(403, "this call needs a project token, not a client token") }
        case .session(let sessionID, let capability):
            if case .client(let claims) = caller, claims.sessionID != sessionID {
                throw APIError(403, "the token is for another session")
            }
            guard registry.session(sessionID) != nil else { throw APIError(RegistryError.noSuchSession(sessionID)) }
            if let capability, !caller.capabilities.allows(capability) {
                let role = if case .client(let claims) = caller { claims.role.rawValue } else { "project" }
                throw APIError(403, "the role \(role) may not \(capability.verb)")
            }
        }
        return caller
    }

    /// A token at all, and a valid one of this router's (401 otherwise): who is asking.
    func verify(token: String?) async throws(APIError) -> Caller {
        guard let token else { throw APIError(401, "a token is required (Authorization: Bearer <token>)") }
        let verified: VerifiedToken
        do { verified = try await tokens.verify(token) } catch { throw APIError(401, "\(error)") }
        switch verified {
        case .project: return .project
        case .client(let claims): return .client(claims)
        }
    }

    /// Lets the media engine go of what a registry change released. Never
    /// called from inside an engine callback directly (the engine may hold
    /// its own lock there): callbacks hand it to a task.
    func release(_ release: SessionRegistry.MediaRelease?) {
        guard let release else { return }
        for id in release.subscriberIDs { media.unsubscribe(subscriberID: id) }
        for id in release.streamIDs { media.unpublish(streamID: id) }
    }

    /// Makes the engine caption exactly the session's captioned streams
    /// (after captions start or stop, a publisher's publishCaptions, a new stream).
    func reconcileCaptions(sessionID: String) {
        let registry = registry, media = media, logger = logger
        captionsGate.lock.withLock { _ in
            let wanted = registry.captionedStreams(sessionID: sessionID)
            let all = Set(((try? registry.streams(sessionID: sessionID)) ?? []).map(\.streamId))
            let failed = media.setCaptionedStreams(wanted.streamIDs, among: all, partials: wanted.partials) { streamID, text, isFinal in
                registry.deliverCaption(sessionID: sessionID, streamID: streamID, text: text, isFinal: isFinal)
            }
            for (streamID, reason) in failed.sorted(by: { $0.key < $1.key }) {
                logger.warning("captions could not start", metadata: ["session": "\(sessionID)", "stream": "\(streamID)", "reason": "\(reason)"])
            }
        }
    }

    /// The engine's reports about one stream. Registry changes happen at
    /// once (so events keep their order); letting the engine go of the
    /// stream happens on a task, outside the engine's callback.
    func mediaEvents(sessionID: String, streamID: String) -> @Sendable (MediaEvent) -> Void {
        let services = self
        return { event in
            switch event {
            case .ended(let reason):
                let release = services.registry.removeStream(
                    sessionID: sessionID, streamID: streamID, reason: StreamEndReason(rawValue: reason) ?? .mediaStopped)
                if let release {
                    services.logger.info("stream ended by its media", metadata: ["stream": "\(streamID)", "reason": "\(reason)"])
                    Task { services.release(release) }
                }
            case .videoDimensions(let width, let height):
                services.registry.setVideoDimensions(sessionID: sessionID, streamID: streamID, width: width, height: height)
            }
        }
    }
}
