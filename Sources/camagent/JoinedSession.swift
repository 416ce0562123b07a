import Logging
import MediaTypes
import Publisher
import Session

/// `camagent publish --session URL`: this client joins the session's
/// signalling and publishes each camera into it with `Session.publish`. In a
/// routed session a camera's media goes to the router over WHIP; in a relayed
/// one the router only signals, and each subscriber's offer is answered here
/// (the media goes straight to it). What happens is said on the way.
final class JoinedSession: Sendable {
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

    static func join(url: String, token: String, timeout: Double, allowInsecureTLS: Bool, trustedCertificatesFile: String?,
                     logger: Logger, say: @escaping @Sendable (String) -> Void) throws(SessionError) -> JoinedSession {
        let session = Session(url: url, token: token, timeout: timeout, allowInsecureTLS: allowInsecureTLS,
                              trustedCertificatesFile: trustedCertificatesFile, logger: logger)
        try session.connect()
        return JoinedSession(session: session, url: url, say: say)
    }

    var isRelayed: Bool { session.mediaMode == .relayed }

    /// Publishes one camera's publisher as a stream of the session (named
    /// `name` when several cameras make several streams).
    func publish(_ publisher: Publisher, name: String, captions: Bool, audioFallback: Bool) throws(SessionError) {
        let id = try session.publish(publisher, name: name, publishCaptions: captions, audioFallback: audioFallback) {
            [say, ended] event in
            switch event {
            case .subscriberAnswered(let subscriber, let stream): say("session:   subscriber \(subscriber) answered (stream \(stream))")
            case .subscriberLeft(let subscriber): say("session:   subscriber \(subscriber) left")
            case .subscriberGone(let subscriber, let reason): say("session:   subscriber \(subscriber) gone (\(reason))")
            case .ended(let reason): ended.withLock { $0 = $0 ?? reason }
            }
        }
        say(isRelayed ? "session:   stream \(id) announced in \(url) (relayed: subscribers' offers are answered here)"
                      : "session:   stream \(id) published into \(url)")
    }

    var endReason: String? { ended.withLock { $0 } }

    /// Ends this client's streams (streamDestroyed, clientDisconnected) and leaves the session.
    func stop() { session.disconnect() }
}
