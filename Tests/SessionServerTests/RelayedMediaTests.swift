import Foundation
import Testing

@testable import SessionServer

/// Relayed sessions: a stream announced by its publisher's signalling
/// connection, subscribers' offers passed to that connection, its answer
/// (or refusal, or silence) passed back, and `unsubscribe` when one leaves.
@Suite("Relayed media")
struct RelayedMediaTests {
    @Test("an announced stream carries the size its publisher gave; offers go to that publisher alone, unsubscribe follows")
    func offersGoToThePublisher() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .relayed).sessionID
        let publisherBox = Outbox(), watcherBox = Outbox()
        let publisher = try registry.connect(sessionID: sid, role: .publisher, data: "kiosk", outbox: publisherBox)
        let watcher = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcherBox)
        let streamID = try registry.reserveStream(sessionID: sid, connectionID: publisher.connectionId, mediaMode: .relayed,
                                                  dimensions: (640, 480))
        let (stream, release) = try registry.announceStream(
            sessionID: sid, streamID: streamID, publisher: .connection(publisher.connectionId), name: "front",
            hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(release == nil)
        #expect((stream.width, stream.height) == (640, 480))

        let subscriberID = try registry.reserveSubscriber(sessionID: sid, streamID: streamID)
        #expect(registry.sendRelayedOffer(sessionID: sid, streamID: streamID, subscriberID: subscriberID, sdp: "v=0 offer")
                == .sent(to: publisher.connectionId))
        #expect(registry.isAwaitingRelayedAnswer(sessionID: sid, subscriberID: subscriberID, from: publisher.connectionId))
        #expect(!registry.isAwaitingRelayedAnswer(sessionID: sid, subscriberID: subscriberID, from: watcher.connectionId))
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: streamID, subscriberID: subscriberID))
        // Answered: no longer waiting.
        #expect(!registry.isAwaitingRelayedAnswer(sessionID: sid, subscriberID: subscriberID, from: publisher.connectionId))
        #expect(registry.counts().subscribers == 1)
        #expect(registry.removeSubscriber(sessionID: sid, streamID: streamID, subscriberID: subscriberID))

        // A subscriber that vanished: only the stream's publisher may say so, and nothing is sent back.
        let vanished = try registry.reserveSubscriber(sessionID: sid, streamID: streamID)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: streamID, subscriberID: vanished))
        #expect(throws: RegistryError.self) {
            try registry.removeRelayedSubscriber(sessionID: sid, subscriberID: vanished, by: watcher.connectionId)
        }
        try registry.removeRelayedSubscriber(sessionID: sid, subscriberID: vanished, by: publisher.connectionId)
        #expect(registry.counts().subscribers == 0)
        #expect(throws: RegistryError.noSuchSubscriber(vanished)) {
            try registry.removeRelayedSubscriber(sessionID: sid, subscriberID: vanished, by: publisher.connectionId)
        }

        // The publisher's stream ends: nothing for the media engine, which never had it.
        #expect(registry.removeStream(sessionID: sid, streamID: streamID, reason: .clientDisconnected) == .init())

        let toPublisher = messages(await drain(publisherBox))
        #expect(toPublisher.map { $0["type"] as? String } == ["connected", "connectionCreated", "streamCreated",
                                                              "subscribeOffer", "unsubscribe", "streamDestroyed"])
        #expect(toPublisher[3]["subscriberId"] as? String == subscriberID)
        #expect(toPublisher[3]["streamId"] as? String == streamID)
        #expect(toPublisher[3]["sdp"] as? String == "v=0 offer")
        #expect(toPublisher[4]["subscriberId"] as? String == subscriberID)
        // The others see the stream come and go, never the offer.
        #expect(types(await drain(watcherBox)) == ["connected", "streamCreated", "streamDestroyed"])
    }

    @Test("a relayed stream needs its publisher's connection; a routed session takes no announcement, a relayed one no WHIP")
    func announcementsAndOffersMatchTheMode() throws {
        let registry = SessionRegistry()
        let relayed = try registry.createSession(mediaMode: .relayed).sessionID
        let routed = try registry.createSession(mediaMode: .routed).sessionID
        let r = try registry.connect(sessionID: relayed, role: .publisher, data: "", outbox: nil)
        let p = try registry.connect(sessionID: routed, role: .publisher, data: "", outbox: nil)
        #expect(throws: RegistryError.conflict(SessionRegistry.relayedNeedsConnectionMessage)) {
            try registry.reserveStream(sessionID: relayed, connectionID: nil, mediaMode: .relayed)
        }
        #expect(throws: RegistryError.conflict(SessionRegistry.relayedMediaMessage)) {
            try registry.reserveStream(sessionID: relayed, connectionID: r.connectionId)
        }
        #expect(throws: RegistryError.conflict(SessionRegistry.routedAnnouncementMessage)) {
            try registry.reserveStream(sessionID: routed, connectionID: p.connectionId, mediaMode: .relayed)
        }
        // A publisher without a socket cannot be offered anything.
        let streamID = try registry.reserveStream(sessionID: relayed, connectionID: r.connectionId, mediaMode: .relayed)
        _ = try registry.announceStream(sessionID: relayed, streamID: streamID, publisher: .connection(r.connectionId),
                                        name: "", hasAudio: false, hasVideo: true, videoType: .camera)
        let subscriberID = try registry.reserveSubscriber(sessionID: relayed, streamID: streamID)
        #expect(registry.sendRelayedOffer(sessionID: relayed, streamID: streamID, subscriberID: subscriberID, sdp: "v=0") == .publisherGone)
    }

    /// The publisher may take the offer and leave before the router has
    /// noted where the offer went: its leaving must still end the wait at
    /// once. (It waited out the timeout in a CI run: 503 instead of 404.)
    @Test("a publisher that leaves as soon as it has the offer ends the wait at once")
    func publisherLeavingWithTheOffer() async {
        let offers = RelayedOffers()
        let outcome = await offers.awaitAnswer(subscriberID: "s7", timeout: .seconds(60)) { sendingTo in
            sendingTo("c7")
            offers.publisherLeft(connectionID: "c7")   // before the offer's delivery is even returned
            return .sent(to: "c7")
        }
        #expect(outcome == .publisherGone)
    }

    @Test("a waiting offer ends with the answer, the refusal, the publisher leaving, or the timeout, and only once")
    func offerOutcomes() async {
        let offers = RelayedOffers()
        async let answered = offers.awaitAnswer(subscriberID: "s1") { _ in .sent(to: "c1") }
        async let refused = offers.awaitAnswer(subscriberID: "s2") { _ in .sent(to: "c1") }
        async let left = offers.awaitAnswer(subscriberID: "s3") { _ in .sent(to: "c2") }
        // Wait until all three are registered (sent to their publishers).
        let deadline = ContinuousClock.now + .seconds(10)
        while !(offers.hasSentOffer("s1") && offers.hasSentOffer("s2") && offers.hasSentOffer("s3")) {
            guard ContinuousClock.now < deadline else { break }
            try? await Task.sleep(for: .milliseconds(1))
        }
        #expect(offers.resolve("s1", .answer(sdp: "v=0 answer")))
        #expect(!offers.resolve("s1", .answer(sdp: "v=0 again")))
        #expect(offers.resolve("s2", .refused(code: 503, message: "too many viewers")))
        offers.publisherLeft(connectionID: "c2")
        #expect(await answered == .answer(sdp: "v=0 answer"))
        #expect(await refused == .refused(code: 503, message: "too many viewers"))
        #expect(await left == .publisherGone)

        #expect(await offers.awaitAnswer(subscriberID: "s4") { _ in .publisherGone } == .publisherGone)
        #expect(await offers.awaitAnswer(subscriberID: "s6") { _ in .publisherAway } == .publisherAway)
        #expect(await offers.awaitAnswer(subscriberID: "s5", timeout: .milliseconds(50)) { _ in .sent(to: "c1") } == .timedOut)
        #expect(!offers.resolve("s5", .answer(sdp: "v=0 late")))
    }

    @Test("subscribeAnswer and subscribeError are parsed and checked")
    func parsing() throws {
        #expect(try ClientMessage.parse(#"{"type":"subscribeAnswer","subscriberId":"s","sdp":"v=0\r\n"}"#)
                == .subscribeAnswer(subscriberID: "s", sdp: "v=0\r\n"))
        #expect(throws: SignallingRefusal.self) { try ClientMessage.parse(#"{"type":"subscribeAnswer","subscriberId":"s","sdp":"hello"}"#) }
        #expect(throws: SignallingRefusal.self) { try ClientMessage.parse(#"{"type":"subscribeAnswer","sdp":"v=0"}"#) }
        #expect(try ClientMessage.parse(#"{"type":"subscribeError","subscriberId":"s","code":400,"message":"bad"}"#)
                == .subscribeError(subscriberID: "s", code: 400, message: "bad"))
        // Anything but 400 becomes 503: the subscriber can only retry.
        #expect(try ClientMessage.parse(#"{"type":"subscribeError","subscriberId":"s","code":302,"message":"x"}"#)
                == .subscribeError(subscriberID: "s", code: 503, message: "x"))
        #expect(try ClientMessage.parse(#"{"type":"subscriberLeft","subscriberId":"s"}"#) == .subscriberLeft(subscriberID: "s"))
    }
}
