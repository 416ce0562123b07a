import Logging
import SessionServer

/// The media engine `camagent router` gives its SessionServer.
///
/// PLACEHOLDER: routed media is not wired yet. Every publish and subscribe
/// is refused with `.unavailable` (the router answers 503), so sessions,
/// tokens and signalling work while the media side is built. The media
/// layer replaces this file's body with its engine; nothing else in the
/// command needs to change.
struct RouterMediaEngine: SessionMediaEngine {
    init(logger: Logger) {}

    func publish(streamID: String, offer: String, events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        throw .unavailable("routed media is not wired yet")
    }

    func unpublish(streamID: String) {}

    func subscribe(streamID: String, subscriberID: String, offer: String, ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        throw .unavailable("routed media is not wired yet")
    }

    func unsubscribe(subscriberID: String) {}

    var counters: ForwardingCounters { ForwardingCounters() }
}
