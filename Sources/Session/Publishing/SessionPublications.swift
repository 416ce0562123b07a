import MediaTypes
import Publisher

/// What `Session.publish` tells about a stream it publishes, besides the
/// publisher's own events.
public enum PublicationEvent: Sendable, Equatable {
    /// A subscriber's offer, answered by the publisher (relayed session: the media goes straight to it).
    case subscriberAnswered(subscriberId: String, streamId: String)
    /// A subscriber left on the router's word (its WHEP DELETE).
    case subscriberLeft(subscriberId: String)
    /// A subscriber the publisher found gone (its ICE consent stopped); the router is told.
    case subscriberGone(subscriberId: String, reason: String)
    /// The stream ended without `unpublish`: the router ended it, or the session's signalling ended.
    case ended(reason: String)
    /// A relayed stream announced again, under a new id, after the session's signalling rejoined.
    /// (A routed stream's new id comes with its publisher's `streamCreated`.)
    case republished(streamId: String)
}

/// The streams this client publishes into its session, and (relayed) the
/// subscribers their publishers answer. Fed by the session's reader thread
/// and by the publishers' events.
final class SessionPublications: Sendable {
    struct Publication {
        let publisher: Publisher
        let relayed: Bool
        /// A relayed stream's id; a routed stream's is its signalling's (new on each reconnect).
        var streamId: String?
        /// As `publish` was asked, to publish it again when the session rejoins
        /// (captions as the publisher wants them then).
        let name: String
        /// The connection its stream is published under (a rejoin moves it).
        var connectionId: String
        let onEvent: @Sendable (PublicationEvent) -> Void
    }

    /// A relayed subscriber: the publisher (its identity) and its viewer.
    struct Viewer {
        let publisher: ObjectIdentifier
        let viewerId: String
    }

    private struct State {
        /// Routed publishers made here, with the signalling they were given.
        var madeHere: [ObjectIdentifier: SessionPublishSignaling] = [:]
        var publications: [ObjectIdentifier: Publication] = [:]
        /// Publishers whose events this session hears (once each).
        var observed: Set<ObjectIdentifier> = []
        /// Subscriber id to the viewer that answers it.
        var viewers: [String: Viewer] = [:]
        var ended = false
    }
    private let state = PThreadLocked(State())

    func madeHere(_ publisher: Publisher, signaling: SessionPublishSignaling) {
        state.withLock { $0.madeHere[ObjectIdentifier(publisher)] = signaling }
    }

    func signaling(of publisher: Publisher) -> SessionPublishSignaling? {
        state.withLock { $0.madeHere[ObjectIdentifier(publisher)] }
    }

    /// False once the session ended: nothing more is published into it.
    func add(_ publication: Publication) -> Bool {
        state.withLock { s in
            guard !s.ended else { return false }
            s.publications[ObjectIdentifier(publication.publisher)] = publication
            return true
        }
    }

    /// Whether this session already hears the publisher's events (and marks it as heard).
    func observeOnce(_ publisher: Publisher) -> Bool {
        state.withLock { $0.observed.insert(ObjectIdentifier(publisher)).inserted }
    }

    func remove(_ publisher: Publisher) -> (Publication?, [Viewer]) {
        state.withLock { s in
            let key = ObjectIdentifier(publisher)
            let viewers = s.viewers.filter { $0.value.publisher == key }
            for id in viewers.keys { s.viewers[id] = nil }
            return (s.publications.removeValue(forKey: key), Array(viewers.values))
        }
    }

    var all: [Publication] { state.withLock { Array($0.publications.values) } }

    /// The publication whose stream this is (a relayed stream's, or a routed publisher's current one).
    func publication(streamId: String) -> Publication? {
        state.withLock { s in
            s.publications.values.first { p in
                (p.streamId ?? s.madeHere[ObjectIdentifier(p.publisher)]?.streamId) == streamId
            }
        }
    }

    /// Records that the publisher's stream is to be published under
    /// `connectionId`; false when it already is, or is not published here,
    /// so that a rejoin and a `publish` under way do not both publish it again.
    func moveTo(_ publisher: Publisher, connectionId: String) -> Bool {
        state.withLock { s in
            let key = ObjectIdentifier(publisher)
            guard let current = s.publications[key]?.connectionId, current != connectionId else { return false }
            s.publications[key]?.connectionId = connectionId
            return true
        }
    }

    func setStreamId(_ streamId: String, of publisher: Publisher) {
        state.withLock { $0.publications[ObjectIdentifier(publisher)]?.streamId = streamId }
    }

    func addViewer(subscriberId: String, publisher: Publisher, viewerId: String) {
        state.withLock { $0.viewers[subscriberId] = Viewer(publisher: ObjectIdentifier(publisher), viewerId: viewerId) }
    }

    func removeViewer(subscriberId: String) -> Viewer? {
        state.withLock { $0.viewers.removeValue(forKey: subscriberId) }
    }

    /// The subscriber a publisher's viewer answered, let go of.
    func removeViewer(publisher: Publisher, viewerId: String) -> String? {
        state.withLock { s in
            let key = ObjectIdentifier(publisher)
            guard let entry = s.viewers.first(where: { $0.value.publisher == key && $0.value.viewerId == viewerId }) else { return nil }
            s.viewers[entry.key] = nil
            return entry.key
        }
    }

    /// The session ended: every publication hears why, once.
    func endAll(reason: String) {
        let ended = state.withLock { s -> [Publication] in
            guard !s.ended else { return [] }
            s.ended = true
            return Array(s.publications.values)
        }
        for publication in ended { publication.onEvent(.ended(reason: reason)) }
    }
}
