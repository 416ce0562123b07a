import Foundation
import Logging
import MediaTypes
import Publisher
import WHIP

/// A publisher's signalling into a routed session: WHIP to the session's
/// publish endpoint, with the session's token and tied to its connection
/// (`?connectionId=`), so the stream is this client's in the session.
/// `Session.publish` sets the query (name, audio fallback) before the
/// publisher's first offer, and each offer adds what the publisher wants
/// now (audio or video off, captions); the stream's id is the last segment of the
/// WHIP resource, and is new each time the publisher reconnects.
final class SessionPublishSignaling: PublisherSignaling {
    private let endpoint: String
    private let token: String
    private let timeout: Double
    private let allowInsecureTLS: Bool
    private let trustedCertificatesFile: String?
    private let logger: Logger
    private let state = PThreadLocked<State>(State())

    private struct State {
        /// The connection the stream belongs to (new when the session rejoins), and the rest of the query.
        var connectionId: String?
        var options: [String] = []
        var whip: WHIPSignaling?
        var streamId: String?
        /// What the publisher wants now (publishAudio, publishVideo, publishCaptions): each offer says it.
        var published: (@Sendable () -> Offered)?
        /// Told each new stream's id and what its offer said, once the router has the stream.
        var streamMade: (@Sendable (_ streamId: String, _ offered: Offered) -> Void)?

        var query: String? { connectionId.map { (["connectionId=" + $0] + options).joined(separator: "&") } }
    }

    init(sessionURL: String, token: String, timeout: Double, allowInsecureTLS: Bool, trustedCertificatesFile: String?,
         logger: Logger) {
        endpoint = sessionURL + "/publish"
        self.token = token
        self.timeout = timeout
        self.allowInsecureTLS = allowInsecureTLS
        self.trustedCertificatesFile = trustedCertificatesFile
        self.logger = logger
    }

    /// What an offer said of the publisher's toggles.
    struct Offered: Equatable {
        var audio = true
        var video = true
        var captions = false
    }

    /// What the publish endpoint is told along with each offer: the
    /// connection, and `options` (name, audio fallback) as query items.
    func prepare(connectionId: String, options: [String]) {
        state.withLock { s in
            s.connectionId = connectionId
            s.options = options
        }
    }

    /// Where each offer reads whether the publisher's audio and video are on
    /// and whether it wants captions, so a stream published again starts as
    /// the publisher is now; and who
    /// hears of each new stream with what its offer said (a toggle between
    /// the offer and the answer went to the old stream: it is said again).
    func reportPublished(_ published: @escaping @Sendable () -> Offered,
                         streamMade: @escaping @Sendable (_ streamId: String, _ offered: Offered) -> Void) {
        state.withLock { s in
            s.published = published
            s.streamMade = streamMade
        }
    }

    /// The session rejoined under a new connection: the next offer belongs to it.
    func rejoined(connectionId: String) { state.withLock { $0.connectionId = connectionId } }

    /// The query the next offer goes with (nil until `prepare`).
    var query: String? { state.withLock { $0.query } }

    /// The stream the router made of the last offer.
    var streamId: String? { state.withLock { $0.streamId } }

    func publish(offer: String, stop: StopSignal? = nil) throws(PublisherError) -> (answer: String, resource: String) {
        guard var query = state.withLock({ $0.query }) else {
            throw .signaling(SignalingError(.refused, "this publisher publishes into its session with Session.publish, not on its own"))
        }
        let (published, streamMade) = state.withLock { ($0.published, $0.streamMade) }
        let offered = published?() ?? Offered()
        if !offered.audio { query += "&hasAudio=false" }
        if !offered.video { query += "&hasVideo=false" }
        if offered.captions { query += "&publishCaptions=true" }
        let whip: WHIPSignaling
        do {
            whip = WHIPSignaling(client: try WHIPClient(endpoint: endpoint + "?" + query, token: token, timeout: timeout,
                                                        allowInsecureTLS: allowInsecureTLS,
                                                        trustedCertificatesFile: trustedCertificatesFile, logger: logger),
                                 logger: logger)
        } catch {
            throw .signaling(SignalingError(WHIPSignaling.kind(of: error), error.description))
        }
        let exchanged = try whip.publish(offer: offer, stop: stop)
        let path = exchanged.resource.split(separator: "?").first.map(String.init) ?? exchanged.resource
        let streamId = path.split(separator: "/").last.map(String.init)
        state.withLock { s in
            s.whip = whip
            s.streamId = streamId
        }
        if let streamId { streamMade?(streamId, offered) }
        return exchanged
    }

    func unpublish() {
        state.withLock { s in defer { s.whip = nil }; return s.whip }?.unpublish()
    }
}
