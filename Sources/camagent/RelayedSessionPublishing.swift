import Foundation
import Logging
import MediaTypes
import Publisher
import Session

/// `camagent publish --session URL` when the session is relayed: the router
/// only signals, so this client joins the session's signalling, announces a
/// stream per camera, and answers each subscriber's offer itself, as the
/// built-in viewer answers WHEP (`Publisher.addViewer`). The media goes
/// straight from here to the subscriber; the router never sees it.
final class RelayedSessionPublishing: SessionDelegate, Sendable {
    private let session: Session
    private let logger: Logger
    private let say: @Sendable (String) -> Void
    private let state = PThreadLocked(State())

    private struct State {
        /// Stream id to its publisher, once announced.
        var streams: [String: Publisher] = [:]
        /// Subscriber id to the viewer that answers it.
        var viewers: [String: (publisher: Publisher, viewerID: String)] = [:]
        var stopping = false
        /// Why the session ended under us (the router ended a stream, or the signalling closed).
        var ended: String?
    }

    private init(session: Session, logger: Logger, say: @escaping @Sendable (String) -> Void) {
        self.session = session
        self.logger = logger
        self.say = say
    }

    /// Joins the session and announces one stream per camera. Throws when
    /// the session cannot be joined, is not relayed, or refuses a stream.
    static func start(url: String, token: String, timeout: Double, allowInsecureTLS: Bool, trustedCertificatesFile: String?,
                      cameras: [SessionCamera], logger: Logger,
                      say: @escaping @Sendable (String) -> Void) throws(SessionError) -> RelayedSessionPublishing {
        let session = Session(url: url, token: token, timeout: timeout, allowInsecureTLS: allowInsecureTLS,
                              trustedCertificatesFile: trustedCertificatesFile, logger: logger)
        let relay = RelayedSessionPublishing(session: session, logger: logger, say: say)
        // Before connect: offers may come as soon as a stream is announced.
        session.delegate = relay
        try session.connect()
        guard session.mediaMode == .relayed else {
            session.disconnect()
            throw .protocolError("the session is \(session.mediaMode?.rawValue ?? "unknown"), not relayed")
        }
        do {
            for camera in cameras {
                let id = try session.announceRelayedStream(name: camera.name, hasAudio: camera.hasAudio, hasVideo: camera.hasVideo,
                                                           width: camera.width, height: camera.height)
                relay.state.withLock { $0.streams[id] = camera.publisher }
                say("session:   stream \(id) announced in \(url) (relayed: subscribers' offers are answered here)")
            }
        } catch {
            relay.stop()
            throw error
        }
        return relay
    }

    /// Why publishing into the session cannot go on, once it cannot.
    var endReason: String? { state.withLock { $0.ended } }

    /// Ends the announced streams (streamDestroyed, clientDisconnected), lets
    /// go of the subscribers' viewers, and leaves the session.
    func stop() {
        let (streams, viewers) = state.withLock { s in
            s.stopping = true
            defer { s.viewers = [:] }
            return (Array(s.streams.keys), Array(s.viewers.values))
        }
        for id in streams {
            do { try session.endRelayedStream(streamId: id) } catch {
                logger.notice("relayed stream \(id) not ended at the router: \(error)")
            }
        }
        for viewer in viewers { _ = viewer.publisher.removeViewer(id: viewer.viewerID) }
        session.disconnect()
    }

    func session(_ session: Session, didReceive event: SessionEvent) {
        switch event {
        case .subscribeOffer(let subscriberID, let streamID, let sdp):
            answer(subscriberID: subscriberID, streamID: streamID, offer: sdp)
        case .unsubscribe(let subscriberID, _):
            guard let viewer = state.withLock({ $0.viewers.removeValue(forKey: subscriberID) }) else { return }
            _ = viewer.publisher.removeViewer(id: viewer.viewerID)
            say("session:   subscriber \(subscriberID) left")
        case .streamDestroyed(let streamID, let reason):
            state.withLock { s in
                guard !s.stopping, s.streams[streamID] != nil else { return }
                s.ended = s.ended ?? "the router ended stream \(streamID) (\(reason))"
            }
        case .disconnected(let reason):
            state.withLock { s in
                guard !s.stopping else { return }
                s.ended = s.ended ?? "the session's signalling ended: \(reason)"
            }
        default:
            break
        }
    }

    /// A subscriber's offer, answered by the stream's publisher as a viewer of its own.
    private func answer(subscriberID: String, streamID: String, offer: String) {
        guard let publisher = state.withLock({ $0.stopping ? nil : $0.streams[streamID] }) else {
            refuse(subscriberID, code: 503, "stream \(streamID) is not published here (any more)")
            return
        }
        let viewer: (id: String, answer: String)
        do { viewer = try publisher.addViewer(offer: offer) } catch {
            switch error {
            case .badOffer, .noCommonCodec: refuse(subscriberID, code: 400, error.description)
            case .tooManyViewers, .connection, .notPublishing: refuse(subscriberID, code: 503, error.description)
            }
            return
        }
        state.withLock { $0.viewers[subscriberID] = (publisher, viewer.id) }
        do { try session.answerOffer(subscriberId: subscriberID, sdp: viewer.answer) } catch {
            logger.notice("answer to subscriber \(subscriberID) not sent: \(error)")
            state.withLock { _ = $0.viewers.removeValue(forKey: subscriberID) }
            _ = publisher.removeViewer(id: viewer.id)
            return
        }
        say("session:   subscriber \(subscriberID) answered (stream \(streamID))")
    }

    /// A publisher's viewer ended (a subscriber that vanished without its
    /// DELETE: ICE consent stopped). The router is told, so it stops counting
    /// the subscriber; a viewer let go of on the router's word is no longer here.
    func viewerLeft(viewerID: String, reason: String) {
        let subscriberID = state.withLock { s -> String? in
            guard let entry = s.viewers.first(where: { $0.value.viewerID == viewerID }) else { return nil }
            s.viewers[entry.key] = nil
            return entry.key
        }
        guard let subscriberID else { return }
        say("session:   subscriber \(subscriberID) gone (\(reason))")
        do { try session.subscriberLeft(subscriberId: subscriberID) } catch {
            logger.notice("subscriberLeft for \(subscriberID) not sent: \(error)")
        }
    }

    private func refuse(_ subscriberID: String, code: Int, _ message: String) {
        logger.notice("offer of subscriber \(subscriberID) refused: \(message)")
        try? session.refuseOffer(subscriberId: subscriberID, code: code, message: message)
    }
}
