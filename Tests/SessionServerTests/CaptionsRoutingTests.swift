import Foundation
import Hummingbird
import Testing

@testable import SessionServer

/// Publishes a stream on its own signalling connection; returns (connection, stream).
private func publish(_ registry: SessionRegistry, _ sid: String, audio: Bool = true, captions: Bool = false,
                     outbox: Outbox = Outbox()) throws -> (String, String) {
    let connection = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: outbox).connectionId
    let streamID = try registry.reserveStream(sessionID: sid, connectionID: connection)
    _ = try registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(connection), name: "",
                                    hasAudio: audio, hasVideo: true, videoType: .camera, publishCaptions: captions)
    return (connection, streamID)
}

/// A subscriber of `streamID` on a new signalling connection, with subscribeToCaptions as given.
private func subscriber(_ registry: SessionRegistry, _ sid: String, _ streamID: String, captions: Bool?,
                        outbox: Outbox) throws -> String {
    let connection = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: outbox).connectionId
    let id = try registry.reserveSubscriber(sessionID: sid, streamID: streamID)
    #expect(registry.confirmSubscriber(sessionID: sid, streamID: streamID, subscriberID: id))
    if let captions {
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: connection, subscriberID: id,
                                             settings: SubscriberSettings(subscribeToCaptions: captions))
    }
    return id
}

@Suite("Captions in the registry")
struct CaptionsRegistryTests {
    @Test("start: streams whose publisher asks and that have audio get hasCaptions; stop takes it away; each change is announced")
    func hasCaptionsFollowsStartAndStop() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let watcher = Outbox()
        _ = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let (_, asking) = try publish(registry, sid, captions: true)
        let (_, quiet) = try publish(registry, sid, captions: false)
        #expect(try registry.streams(sessionID: sid).allSatisfy { !$0.hasCaptions })

        let id = try registry.startCaptions(sessionID: sid, settings: CaptionsSettings(partialCaptions: false))
        #expect(registry.captionsSession(id) == sid)
        #expect(registry.captionedStreams(sessionID: sid) == ([asking], false))
        #expect(try registry.streams(sessionID: sid).first { $0.streamId == asking }?.hasCaptions == true)
        // Started twice: the first captions id is named.
        #expect(throws: RegistryError.conflict("captions are already started in session \(sid) (captionsId \(id))")) {
            _ = try registry.startCaptions(sessionID: sid, settings: CaptionsSettings())
        }
        // A stream published while captions run, asking for them, has them at once.
        let (_, late) = try publish(registry, sid, captions: true)
        #expect(try registry.streams(sessionID: sid).first { $0.streamId == late }?.hasCaptions == true)

        #expect(registry.stopCaptions(captionsID: id) == sid)
        #expect(registry.stopCaptions(captionsID: id) == nil)
        #expect(registry.captionedStreams(sessionID: sid).streamIDs.isEmpty)

        let changes = messages(await drain(watcher)).filter { $0["type"] as? String == "streamPropertyChanged" }
        #expect(changes.map { $0["property"] as? String } == ["hasCaptions", "hasCaptions", "hasCaptions"])
        #expect(changes.map { $0["streamId"] as? String } == [asking, asking, late])
        #expect(changes.map { $0["newValue"] as? Bool } == [true, false, false])
        #expect(!changes.contains { $0["streamId"] as? String == quiet })
    }

    @Test("publishCaptions turns a stream's captions on and off; without audio it is MissingAudioTrack")
    func publishCaptionsAndMissingAudio() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        _ = try registry.startCaptions(sessionID: sid, settings: CaptionsSettings())
        let (owner, stream) = try publish(registry, sid)
        let (videoOwner, videoOnly) = try publish(registry, sid, audio: false)
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: owner, hasAudio: nil, hasVideo: nil,
                                         publishCaptions: true)
        #expect(registry.captionedStreams(sessionID: sid).streamIDs == [stream])
        // Audio off: no captions (nothing to hear); back on: captions again.
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: owner, hasAudio: false, hasVideo: nil)
        #expect(registry.captionedStreams(sessionID: sid).streamIDs.isEmpty)
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: owner, hasAudio: true, hasVideo: nil)
        #expect(registry.captionedStreams(sessionID: sid).streamIDs == [stream])

        #expect(throws: RegistryError.conflict("MissingAudioTrack: stream \(videoOnly) has no audio to caption")) {
            try registry.setStreamProperties(sessionID: sid, streamID: videoOnly, requester: videoOwner, hasAudio: nil,
                                             hasVideo: nil, publishCaptions: true)
        }
        // Another connection may not ask for someone else's stream.
        #expect(throws: RegistryError.self) {
            try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: videoOwner, hasAudio: nil,
                                             hasVideo: nil, publishCaptions: false)
        }
        // Audio that is only turned off is not a missing track: captions asked for meanwhile
        // start when it is back on.
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: owner, hasAudio: false, hasVideo: nil,
                                         publishCaptions: false)
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: owner, hasAudio: nil, hasVideo: nil,
                                         publishCaptions: true)
        #expect(registry.captionedStreams(sessionID: sid).streamIDs.isEmpty)
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: owner, hasAudio: true, hasVideo: nil)
        #expect(registry.captionedStreams(sessionID: sid).streamIDs == [stream])
    }

    @Test("a relayed session's stream cannot ask for captions: the router never hears its audio")
    func publishCaptionsInARelayedSession() throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .relayed).sessionID
        let connection = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: Outbox()).connectionId
        let stream = try registry.reserveStream(sessionID: sid, connectionID: connection, mediaMode: .relayed)
        _ = try registry.announceStream(sessionID: sid, streamID: stream, publisher: .connection(connection), name: "",
                                        hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(throws: RegistryError.conflict(SessionRegistry.captionsNeedRoutedMessage)) {
            try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: connection, hasAudio: nil,
                                             hasVideo: nil, publishCaptions: true)
        }
    }

    @Test("captions go to the connections whose subscriber of that stream asked for them, and nowhere else")
    func captionDelivery() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let (_, stream) = try publish(registry, sid, captions: true)
        let (_, other) = try publish(registry, sid, captions: true)
        let wants = Outbox(), doesNot = Outbox(), otherStream = Outbox(), early = Outbox()
        _ = try subscriber(registry, sid, stream, captions: true, outbox: wants)
        _ = try subscriber(registry, sid, stream, captions: nil, outbox: doesNot)
        _ = try subscriber(registry, sid, other, captions: true, outbox: otherStream)
        // Before captions start: nothing is captioned, nothing is sent.
        #expect(registry.deliverCaption(sessionID: sid, streamID: stream, text: "too early", isFinal: true) == 0)
        _ = try subscriber(registry, sid, stream, captions: true, outbox: early)   // asked before the start

        _ = try registry.startCaptions(sessionID: sid, settings: CaptionsSettings())
        #expect(registry.deliverCaption(sessionID: sid, streamID: stream, text: "the door", isFinal: false) == 2)
        #expect(registry.deliverCaption(sessionID: sid, streamID: stream, text: "the door is open", isFinal: true) == 2)

        for outbox in [wants, early] {
            let captions = messages(await drain(outbox)).filter { $0["type"] as? String == "caption" }
            #expect(captions.count == 2)
            #expect(captions.map { $0["text"] as? String } == ["the door", "the door is open"])
            #expect(captions.map { $0["isFinal"] as? Bool } == [false, true])
            #expect(captions.allSatisfy { $0["streamId"] as? String == stream })
        }
        for outbox in [doesNot, otherStream] {
            #expect(!types(await drain(outbox)).contains("caption"))
        }
    }

    @Test("a relayed session cannot caption: the router never sees its audio")
    func relayedRefused() throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .relayed).sessionID
        #expect(throws: RegistryError.conflict("captions need a routed session: in a relayed one the router never sees the audio")) {
            _ = try registry.startCaptions(sessionID: sid, settings: CaptionsSettings())
        }
    }
}

@Suite("Captions over REST")
struct CaptionsRESTTests {
    @Test("a moderator starts captions (202, captionsId) and stops them (204); the engine captions what the registry says")
    func startAndStop() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let moderator = try await f.client(sid, .moderator)
        let publisher = try await f.client(sid, .publisher)
        try await f.test { client in
            let published = try await client.execute(uri: "/v2/sessions/\(sid)/publish?publishCaptions=true", method: .post,
                                                     headers: sdpHeaders(publisher), body: offer)
            #expect(published.status == .created)
            let streamID = try #require(f.engine.calls.withLock { $0.published.first })
            #expect(f.engine.calls.withLock { $0.captioned }.isEmpty)

            let started = try await client.execute(
                uri: "/v2/sessions/\(sid)/captions", method: .post, headers: bearer(moderator),
                body: ByteBuffer(string: #"{"languageCode":"en-US","partialCaptions":false,"maxDuration":1800}"#))
            #expect(started.status == .accepted)
            let captionsID = try #require(try object(started)["captionsId"] as? String)
            #expect(f.engine.calls.withLock { ($0.captioned, $0.captionsPartials) } == ([streamID], false))
            #expect(try f.registry.streams(sessionID: sid)[0].hasCaptions)

            // /metrics carries the engine's caption counts.
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains("camagent_router_captioned_streams 1\n"))
            #expect(metrics.contains("camagent_router_captions_final_total 3\n"))
            #expect(metrics.contains("camagent_router_captions_partial_total 7\n"))
            #expect(metrics.contains("camagent_router_captions_dropped_packets_total 4\n"))
            #expect(metrics.contains("camagent_router_captions_early_finals_discarded_total 2\n"))

            let stopped = try await client.execute(uri: "/v2/captions/\(captionsID)/stop", method: .post, headers: bearer(moderator))
            #expect(stopped.status == .noContent)
            #expect(f.engine.calls.withLock { $0.captioned }.isEmpty)
            #expect(try !f.registry.streams(sessionID: sid)[0].hasCaptions)
            try expectError(try await client.execute(uri: "/v2/captions/\(captionsID)/stop", method: .post,
                                                     headers: bearer(moderator)), 404, "no captions")
        }
    }

    @Test("refusals: subscriber and publisher tokens 403, a relayed session 409, twice 409, bad fields 400, no engine 503, no token 401")
    func refusals() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let relayed = try f.session(.relayed)
        let project = try await f.project()
        let subscriberToken = try await f.client(sid, .subscriber)
        let publisherToken = try await f.client(sid, .publisher)
        try await f.test { client in
            let path = "/v2/sessions/\(sid)/captions"
            try expectError(try await client.execute(uri: path, method: .post, headers: bearer(subscriberToken)), 403, "control captions")
            try expectError(try await client.execute(uri: path, method: .post, headers: bearer(publisherToken)), 403, "control captions")
            try expectError(try await client.execute(uri: path, method: .post), 401)
            try expectError(try await client.execute(uri: "/v2/sessions/\(relayed)/captions", method: .post, headers: bearer(project)),
                            409, "routed session")
            try expectError(try await client.execute(uri: path, method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"languageCode":"de-DE"}"#)), 400, "en-US")
            try expectError(try await client.execute(uri: path, method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"maxDuration":10}"#)), 400, "maxDuration")
            f.engine.calls.withLock { $0.captionsUnavailable = "the captions engine is not available (/x: no such file)" }
            try expectError(try await client.execute(uri: path, method: .post, headers: bearer(project)), 503, "no such file")
            f.engine.calls.withLock { $0.captionsUnavailable = nil }
            #expect(try await client.execute(uri: path, method: .post, headers: bearer(project)).status == .accepted)
            try expectError(try await client.execute(uri: path, method: .post, headers: bearer(project)), 409, "already started")
            try expectError(try await client.execute(uri: "/v2/captions/nope/stop", method: .post, headers: bearer(project)), 404)
            try expectError(try await client.execute(uri: "/v2/captions/nope/stop", method: .post), 401)
        }
    }

    @Test("WHIP with publishCaptions and no audio in the offer: 400 MissingAudioTrack, nothing published")
    func whipWithoutAudio() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let publisher = try await f.client(sid, .publisher)
        try await f.test { client in
            let noAudio = ByteBuffer(string: "v=0\r\ns=noaudio\r\n")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish?publishCaptions=true", method: .post,
                                                     headers: sdpHeaders(publisher), body: noAudio), 400, "MissingAudioTrack")
            #expect(try f.registry.streams(sessionID: sid).isEmpty)
            #expect(f.engine.calls.withLock { $0.unpublished.count } == 1)
        }
    }
}
