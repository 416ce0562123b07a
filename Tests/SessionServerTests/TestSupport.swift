import Foundation
import Logging
import MediaTypes

@testable import SessionServer

/// Stands in for the media layer: answers any offer that starts with "v=0",
/// refuses "bad" (badOffer), "nocodec" (noCommonCodec) and "busy"
/// (unavailable), and keeps each stream's event callback so a test can
/// report what the media did.
final class FakeMediaEngine: SessionMediaEngine {
    struct Calls {
        var published: [String] = []
        var unpublished: [String] = []
        var subscribed: [String] = []
        var unsubscribed: [String] = []
        var events: [String: @Sendable (MediaEvent) -> Void] = [:]
        var subscriberEnded: [String: @Sendable (String) -> Void] = [:]
        /// The streams the engine was last told to caption, and where their captions go.
        var captioned: Set<String> = []
        var captionsPartials = true
        var onCaption: (@Sendable (String, String, Bool) -> Void)?
        /// nil: captions can run.
        var captionsUnavailable: String?
        /// Each subscriber's preferredResolution and preferredFrameRate, as set.
        var resolutions: [String: FrameSizeWish] = [:]
        var frameRates: [String: Double?] = [:]
    }

    struct FrameSizeWish: Equatable {
        var width: Int, height: Int
    }

    let calls = PThreadLocked(Calls())

    func publish(streamID: String, offer: String, events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        try check(offer)
        calls.withLock {
            $0.published.append(streamID)
            $0.events[streamID] = events
        }
        return PublishedMedia(answer: "v=0\r\ns=answer for \(streamID)\r\n", hasAudio: !offer.contains("noaudio"), hasVideo: true)
    }

    func unpublish(streamID: String) {
        calls.withLock {
            $0.unpublished.append(streamID)
            $0.captioned.remove(streamID)
        }
    }

    func subscribe(streamID: String, subscriberID: String, offer: String, ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        try check(offer)
        calls.withLock {
            $0.subscribed.append(subscriberID)
            $0.subscriberEnded[subscriberID] = ended
        }
        return "v=0\r\ns=answer for \(subscriberID)\r\n"
    }

    func unsubscribe(subscriberID: String) {
        calls.withLock { $0.unsubscribed.append(subscriberID) }
    }

    func setSubscriberResolution(subscriberID: String, _ size: (width: Int, height: Int)?) {
        calls.withLock { $0.resolutions[subscriberID] = size.map { FrameSizeWish(width: $0.width, height: $0.height) } }
    }

    func setSubscriberFrameRate(subscriberID: String, _ rate: Double?) {
        calls.withLock { $0.frameRates[subscriberID] = rate }
    }

    var counters: ForwardingCounters { ForwardingCounters(packetsForwarded: 12, bytesForwarded: 3456, packetsDropped: 1) }

    var captionsUnavailable: String? { calls.withLock { $0.captionsUnavailable } }

    func setCaptionedStreams(_ streamIDs: Set<String>, among candidates: Set<String>, partials: Bool,
                             onCaption: @escaping @Sendable (String, String, Bool) -> Void) -> [String: String] {
        calls.withLock { c in
            c.captioned = c.captioned.subtracting(candidates).union(streamIDs)
            c.captionsPartials = partials
            c.onCaption = onCaption
        }
        return [:]
    }

    var captionCounters: CaptionTotals {
        CaptionTotals(captionedStreams: calls.withLock { $0.captioned.count }, partials: 7, finals: 3, audioSeconds: 12.5, engineSeconds: 2.25, packetsDropped: 4, earlyFinalsDiscarded: 2)
    }

    /// A caption the engine recognised, as it would report it.
    func caption(_ streamID: String, _ text: String, isFinal: Bool) {
        let deliver = calls.withLock { $0.onCaption }
        deliver?(streamID, text, isFinal)
    }

    /// Reports a media event for a stream, as the engine would from any thread.
    func report(_ event: MediaEvent, streamID: String) {
        let callback = calls.withLock { $0.events[streamID] }
        callback?(event)
    }

    private func check(_ offer: String) throws(MediaEngineError) {
        if offer.contains("bad") { throw .badOffer("not an offer") }
        if offer.contains("nocodec") { throw .noCommonCodec("only AV1 offered") }
        if offer.contains("busy") { throw .unavailable("no ports left") }
    }
}

let testSecret = try! RouterSecret(key: Array("0123456789abcdef0123456789abcdef".utf8))
/// Another router's secret.
let otherSecret = try! RouterSecret(key: Array("fedcba9876543210fedcba9876543210".utf8))

func quietLogger() -> Logger {
    var logger = Logger(label: "SessionServerTests")
    logger.logLevel = .critical
    return logger
}

/// Drains what an outbox holds now (the registry queues synchronously, so
/// everything an action caused is there when it returns).
func drain(_ outbox: Outbox) async -> [Outbox.Item] {
    outbox.finish()
    var items: [Outbox.Item] = []
    for await item in outbox.items { items.append(item) }
    return items
}

/// The JSON objects among queued items.
func messages(_ items: [Outbox.Item]) -> [[String: Any]] {
    items.compactMap { item -> [String: Any]? in
        guard case .text(let text) = item else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }
}

/// The `type` of each queued message, in order.
func types(_ items: [Outbox.Item]) -> [String] {
    messages(items).map { $0["type"] as? String ?? "?" }
}
