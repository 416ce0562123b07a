import MediaTypes
import Publisher
import SessionServer

/// The media of the session `camagent publish` runs in-process. Its own
/// cameras' streams are answered by their publishers (each subscriber is a
/// viewer of the encoder that already runs: no forwarding, no extra
/// encoding); any other stream (a browser publishing from the session page,
/// an operator talking back) is routed as `camagent router` routes it.
struct EmbeddedMediaEngine: SessionMediaEngine {
    let routed: RouterMediaEngine
    let local: LocalStreamMedia

    func publish(streamID: String, offer: String,
                 events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        try routed.publish(streamID: streamID, offer: offer, events: events)
    }

    func unpublish(streamID: String) {
        if local.unpublish(streamID: streamID) {
            routed.captions.stop(streamID: streamID)
        } else {
            routed.unpublish(streamID: streamID)
        }
    }

    func subscribe(streamID: String, subscriberID: String, offer: String,
                   ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        guard let publisher = local.publisher(of: streamID) else {
            return try routed.subscribe(streamID: streamID, subscriberID: subscriberID, offer: offer, ended: ended)
        }
        let viewer: (id: String, answer: String)
        do { viewer = try publisher.addViewer(offer: offer, audioFallback: local.audioFallback(of: streamID)) } catch {
            switch error {
            case .badOffer(let reason): throw .badOffer(reason)
            case .noCommonCodec(let reason): throw .noCommonCodec(reason)
            case .tooManyViewers, .connection, .notPublishing: throw .unavailable(error.description)
            }
        }
        local.add(subscriberID: subscriberID, publisher: publisher, viewerID: viewer.id, ended: ended)
        return viewer.answer
    }

    func unsubscribe(subscriberID: String) {
        if !local.unsubscribe(subscriberID: subscriberID) { routed.unsubscribe(subscriberID: subscriberID) }
    }

    func setSubscriberMedia(subscriberID: String, audio: Bool, video: Bool) {
        if !local.setMedia(subscriberID: subscriberID, audio: audio, video: video) {
            routed.setSubscriberMedia(subscriberID: subscriberID, audio: audio, video: video)
        }
    }

    func setSubscriberFrameRate(subscriberID: String, _ rate: Double?) {
        if !local.setFrameRate(subscriberID: subscriberID, rate) {
            routed.setSubscriberFrameRate(subscriberID: subscriberID, rate)
        }
    }

    /// The embedded publisher encodes one size (no simulcast): only routed
    /// streams (a page publishing into the session) could have layers.
    func setSubscriberResolution(subscriberID: String, _ size: (width: Int, height: Int)?) {
        routed.setSubscriberResolution(subscriberID: subscriberID, size)
    }

    func setAudioFallback(streamID: String, enabled: Bool) {
        if !local.setAudioFallback(streamID: streamID, enabled: enabled) {
            routed.setAudioFallback(streamID: streamID, enabled: enabled)
        }
    }

    func onSubscriberVideoQuality(_ handler: @escaping @Sendable (String, String) -> Void) {
        local.onVideoQuality(handler)
        routed.onSubscriberVideoQuality(handler)
    }

    var counters: ForwardingCounters { routed.counters }

    // Captions: one set of captioners for every stream, local or routed
    // (RouterCaptions puts its tap on the publisher or on the router).
    var captionsUnavailable: String? { routed.captionsUnavailable }

    func setCaptionedStreams(_ streamIDs: Set<String>, among candidates: Set<String>, partials: Bool,
                             onCaption: @escaping @Sendable (String, String, Bool) -> Void) -> [String: String] {
        routed.setCaptionedStreams(streamIDs, among: candidates, partials: partials, onCaption: onCaption)
    }

    var captionCounters: CaptionTotals { routed.captionCounters }
}

/// The session's local streams and their subscribers, each a viewer of the
/// stream's publisher.
final class LocalStreamMedia: Sendable {
    private struct Subscriber {
        let publisher: Publisher
        let viewerID: String
        let ended: @Sendable (String) -> Void
    }

    private struct State {
        var streams: [String: Publisher] = [:]
        var subscribers: [String: Subscriber] = [:]
        /// Streams whose publisher turned audio fallback off (it is on for a routed session's subscribers).
        var fallbackOff: Set<String> = []
        /// Where audio fallback's steps for a subscriber go (the session's messages).
        var videoQuality: (@Sendable (_ subscriberID: String, _ messageType: String) -> Void)?
    }

    private let state = PThreadLocked(State())

    func attach(streamID: String, publisher: Publisher) { state.withLock { $0.streams[streamID] = publisher } }

    func publisher(of streamID: String) -> Publisher? { state.withLock { $0.streams[streamID] } }

    /// Whether a new subscriber of the stream is under audio fallback.
    func audioFallback(of streamID: String) -> Bool { state.withLock { !$0.fallbackOff.contains(streamID) } }

    /// False when the stream is not local. Applies to subscribers from now on.
    func setAudioFallback(streamID: String, enabled: Bool) -> Bool {
        state.withLock { s in
            guard s.streams[streamID] != nil else { return false }
            if enabled { s.fallbackOff.remove(streamID) } else { s.fallbackOff.insert(streamID) }
            return true
        }
    }

    func onVideoQuality(_ handler: @escaping @Sendable (String, String) -> Void) { state.withLock { $0.videoQuality = handler } }

    /// Audio fallback's step for one of a publisher's viewers: a session subscriber's goes to the session.
    func viewerVideoQuality(viewerID: String, change: VideoQualityChange) {
        let (subscriberID, handler) = state.withLock { s in
            (s.subscribers.first { $0.value.viewerID == viewerID }?.key, s.videoQuality)
        }
        if let subscriberID { handler?(subscriberID, change.rawValue) }
    }

    fileprivate func add(subscriberID: String, publisher: Publisher, viewerID: String, ended: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.subscribers[subscriberID] = Subscriber(publisher: publisher, viewerID: viewerID, ended: ended) }
    }

    /// Lets go of a local stream's subscribers; false when the stream is not local.
    func unpublish(streamID: String) -> Bool {
        let gone = state.withLock { s -> [Subscriber]? in
            guard let publisher = s.streams.removeValue(forKey: streamID) else { return nil }
            let ids = s.subscribers.filter { $0.value.publisher === publisher }.map(\.key)
            return ids.compactMap { s.subscribers.removeValue(forKey: $0) }
        }
        guard let gone else { return false }
        for subscriber in gone { _ = subscriber.publisher.removeViewer(id: subscriber.viewerID) }
        return true
    }

    /// False when the subscriber is not one of a local stream's.
    func unsubscribe(subscriberID: String) -> Bool {
        guard let subscriber = state.withLock({ $0.subscribers.removeValue(forKey: subscriberID) }) else { return false }
        _ = subscriber.publisher.removeViewer(id: subscriber.viewerID)
        return true
    }

    func setMedia(subscriberID: String, audio: Bool, video: Bool) -> Bool {
        guard let subscriber = state.withLock({ $0.subscribers[subscriberID] }) else { return false }
        subscriber.publisher.setViewerMedia(id: subscriber.viewerID, audio: audio, video: video)
        return true
    }

    func setFrameRate(subscriberID: String, _ rate: Double?) -> Bool {
        guard let subscriber = state.withLock({ $0.subscribers[subscriberID] }) else { return false }
        subscriber.publisher.setViewerFrameRate(id: subscriber.viewerID, rate)
        return true
    }

    /// A publisher's viewer ended on its own (ICE consent stopped): if it was
    /// a session subscriber, the session is told, so it stops counting it.
    func viewerLeft(viewerID: String, reason: String) {
        let subscriber = state.withLock { s -> Subscriber? in
            guard let entry = s.subscribers.first(where: { $0.value.viewerID == viewerID }) else { return nil }
            return s.subscribers.removeValue(forKey: entry.key)
        }
        subscriber?.ended(reason)
    }
}
