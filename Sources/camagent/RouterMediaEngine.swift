import MediaTypes
import Publisher
import SessionServer

/// The router's media, as the session server asks for it: `StreamRouter`
/// forwards what publishers send (WHIP) to subscribers (WHEP).
struct RouterMediaEngine: SessionMediaEngine {
    let router: StreamRouter
    let captions: RouterCaptions

    func publish(streamID: String, offer: String,
                 events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        do {
            let published = try router.publish(streamID: streamID, offer: offer) { event in
                switch event {
                case .ended(let reason): events(.ended(reason: reason))
                case .videoDimensions(let width, let height): events(.videoDimensions(width: width, height: height))
                }
            }
            return PublishedMedia(answer: published.answer, hasAudio: published.hasAudio, hasVideo: published.hasVideo)
        } catch {
            throw Self.mediaError(error)
        }
    }

    func unpublish(streamID: String) {
        captions.stop(streamID: streamID)
        router.unpublish(streamID: streamID)
    }

    var captionsUnavailable: String? { captions.unavailable }

    func setCaptionedStreams(_ streamIDs: Set<String>, among candidates: Set<String>, partials: Bool,
                             onCaption: @escaping @Sendable (String, String, Bool) -> Void) -> [String: String] {
        captions.set(streamIDs, among: candidates, partials: partials, onCaption: onCaption)
    }

    var captionCounters: CaptionTotals { captions.totals }

    func subscribe(streamID: String, subscriberID: String, offer: String,
                   ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        do { return try router.subscribe(streamID: streamID, subscriberID: subscriberID, offer: offer, ended: ended) } catch {
            throw Self.mediaError(error)
        }
    }

    func unsubscribe(subscriberID: String) { router.unsubscribe(subscriberID: subscriberID) }

    func setSubscriberMedia(subscriberID: String, audio: Bool, video: Bool) {
        router.setSubscriberMedia(subscriberID: subscriberID, audio: audio, video: video)
    }

    func setSubscriberFrameRate(subscriberID: String, _ rate: Double?) {
        router.setSubscriberFrameRate(subscriberID: subscriberID, rate)
    }

    func setSubscriberResolution(subscriberID: String, _ size: (width: Int, height: Int)?) {
        router.setSubscriberResolution(subscriberID: subscriberID, size.map { FrameSize(width: $0.width, height: $0.height) })
    }

    func setAudioFallback(streamID: String, enabled: Bool) {
        router.setAudioFallback(streamID: streamID, enabled: enabled)
    }

    func onSubscriberVideoQuality(_ handler: @escaping @Sendable (_ subscriberID: String, _ messageType: String) -> Void) {
        router.onSubscriberVideoQuality { id, change in handler(id, change.rawValue) }
    }

    var counters: ForwardingCounters {
        let c = router.counters
        return ForwardingCounters(packetsForwarded: c.packetsForwarded, bytesForwarded: c.bytesForwarded,
                                  packetsDropped: c.packetsDropped, packetsNacked: c.packetsNacked,
                                  packetsRecovered: c.packetsRecovered)
    }

    private static func mediaError(_ error: RoutingError) -> MediaEngineError {
        switch error {
        case .badOffer(let r): .badOffer(r)
        case .noCommonCodec(let r): .noCommonCodec(r)
        case .noSuchStream, .streamExists, .tooManySubscribers, .connection: .unavailable(error.description)
        }
    }
}
