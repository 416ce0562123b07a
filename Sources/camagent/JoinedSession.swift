import Logging
import MediaTypes
import Publisher
import Session

/// `camagent publish --session URL`: this client joins the session's
/// signalling and publishes each camera into it with `Session.publish`. In a
/// routed session a camera's media goes to the router over WHIP; in a relayed
/// one the router only signals, and each subscriber's offer is answered here
/// (the media goes straight to it). What happens is said on the way.
final class JoinedSession: SessionDelegate {
    let session: Session
    let url: String
    private let say: @Sendable (String) -> Void
    /// Why publishing into the session cannot go on, once it cannot.
    private let ended = PThreadLocked<String?>(nil)

    private init(session: Session, url: String, say: @escaping @Sendable (String) -> Void) {
        self.session = session
        self.url = url
        self.say = say
    }

    /// - Parameter rejoinWindow: seconds to keep joining again when the signalling drops (0: publishing ends).
    static func join(url: String, token: String, timeout: Double, allowInsecureTLS: Bool, trustedCertificatesFile: String?,
                     rejoinWindow: Double, logger: Logger,
                     say: @escaping @Sendable (String) -> Void) throws(SessionError) -> JoinedSession {
        let session = Session(url: url, token: token, timeout: timeout, allowInsecureTLS: allowInsecureTLS,
                              trustedCertificatesFile: trustedCertificatesFile, rejoinWindow: rejoinWindow, logger: logger)
        try session.connect()
        let joined = JoinedSession(session: session, url: url, say: say)
        session.delegate = joined
        return joined
    }

    /// The session's own comings and goings; its streams' are told by `publish`'s events.
    func session(_ session: Session, didReceive event: SessionEvent) {
        switch event {
        case .reconnecting(let reason):
            say("session:   signalling lost (\(reason)); joining again for up to \(session.rejoinWindow.formatted(decimals: 0)) s")
        case .reconnected(let connectionId, _, true):
            say("session:   joined again as connection \(connectionId), kept by the router with its streams")
        case .reconnected(let connectionId, _, false):
            say("session:   joined again as connection \(connectionId); publishing again")
        default:
            break
        }
    }

    var isRelayed: Bool { session.mediaMode == .relayed }

    /// Publishes one camera's publisher as a stream of the session (named
    /// `name` when several cameras make several streams), with captions as
    /// its publishCaptions says.
    func publish(_ publisher: Publisher, name: String, audioFallback: Bool) throws(SessionError) {
        let id = try session.publish(publisher, name: name, audioFallback: audioFallback) {
            [say, ended] event in
            switch event {
            case .subscriberAnswered(let subscriber, let stream): say("session:   subscriber \(subscriber) answered (stream \(stream))")
            case .subscriberLeft(let subscriber): say("session:   subscriber \(subscriber) left")
            case .subscriberGone(let subscriber, let reason): say("session:   subscriber \(subscriber) gone (\(reason))")
            case .ended(let reason): ended.withLock { $0 = $0 ?? reason }
            case .republished(let stream): say("session:   stream \(stream) announced again")
            }
        }
        say(isRelayed ? "session:   stream \(id) announced in \(url) (relayed: subscribers' offers are answered here)"
                      : "session:   stream \(id) published into \(url)")
    }

    var endReason: String? { ended.withLock { $0 } }

    /// Ends this client's streams (streamDestroyed, clientDisconnected) and leaves the session.
    func stop() { session.disconnect() }
}
