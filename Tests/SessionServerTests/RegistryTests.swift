import Foundation
import Testing

@testable import SessionServer

@Suite("Registry")
struct RegistryTests {
    @Test("ids never begin with - or _ (a command line would take -abc for an option), and are URL-safe")
    func idsStartWithALetterOrDigit() {
        for _ in 0..<2000 {
            let id = RandomID.make()
            #expect(id.count == 22 && RandomID.isWellFormed(id))
            #expect(id.first.map { $0.isLetter || $0.isNumber } == true, "\(id)")
        }
    }

    @Test("a new connection gets connected first, with the others and the streams; the others get connectionCreated")
    func joinOrder() async throws {
        let registry = SessionRegistry()
        let session = try registry.createSession(mediaMode: .relayed)
        let a = Outbox(), b = Outbox()
        let first = try registry.connect(sessionID: session.sessionID, role: .moderator, data: "alice", outbox: a)
        let second = try registry.connect(sessionID: session.sessionID, role: .subscriber, data: "bob", outbox: b)

        let toA = messages(await drain(a)), toB = messages(await drain(b))
        #expect(toA.map { $0["type"] as? String } == ["connected", "connectionCreated"])
        #expect(toA[0]["connectionId"] as? String == first.connectionId)
        #expect(toA[0]["mediaMode"] as? String == "relayed")
        // Its own connection too, as the others see it (beyond the contract's fields).
        let own = try #require(toA[0]["connection"] as? [String: Any])
        #expect(own["connectionId"] as? String == first.connectionId && own["data"] as? String == "alice")
        #expect(own["createdAt"] as? Int == Int(first.createdAt))
        #expect((toA[0]["capabilities"] as? [String: Bool]) == ["publish": true, "subscribe": true, "forceDisconnect": true, "captions": true])
        let created = try #require(toA[1]["connection"] as? [String: Any])
        #expect(created["connectionId"] as? String == second.connectionId)
        #expect(created["data"] as? String == "bob")
        #expect(created["createdAt"] as? Int != nil)

        #expect(toB.map { $0["type"] as? String } == ["connected"])
        #expect((toB[0]["capabilities"] as? [String: Bool]) == ["publish": false, "subscribe": true, "forceDisconnect": false, "captions": false])
        let others = try #require(toB[0]["connections"] as? [[String: Any]])
        #expect(others.map { $0["connectionId"] as? String } == [first.connectionId])
        #expect((toB[0]["streams"] as? [Any])?.isEmpty == true)
    }

    @Test("events reach every connection in the order they happened; a leaving connection's streams end before it does")
    func eventOrder() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let watcher = Outbox(), publisher = Outbox()
        _ = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let pub = try registry.connect(sessionID: sid, role: .publisher, data: "cam", outbox: publisher)
        let streamID = try registry.reserveStream(sessionID: sid, connectionID: pub.connectionId)
        let (stream, _) = try registry.announceStream(
            sessionID: sid, streamID: streamID, publisher: .connection(pub.connectionId), name: "front door",
            hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(stream.connectionId == pub.connectionId)
        registry.setVideoDimensions(sessionID: sid, streamID: streamID, width: 1280, height: 720)
        try registry.setStreamProperties(sessionID: sid, streamID: streamID, requester: pub.connectionId, hasAudio: false, hasVideo: nil)
        try registry.signal(sessionID: sid, from: pub.connectionId, to: nil, signalType: "chat", data: .string("hello"))
        let release = try #require(registry.disconnect(sessionID: sid, connectionID: pub.connectionId, reason: .networkDisconnected))
        #expect(release.streamIDs == [streamID])

        let seen = messages(await drain(watcher))
        #expect(seen.map { $0["type"] as? String } == [
            "connected", "connectionCreated", "streamCreated", "streamPropertyChanged", "streamPropertyChanged",
            "signal", "streamDestroyed", "connectionDestroyed",
        ])
        let created = try #require(seen[2]["stream"] as? [String: Any])
        #expect(created["name"] as? String == "front door")
        #expect(created["videoType"] as? String == "camera")
        #expect(created["width"] as? Int == 0)
        #expect(seen[3]["property"] as? String == "videoDimensions")
        #expect((seen[3]["newValue"] as? [String: Int]) == ["width": 1280, "height": 720])
        #expect(seen[4]["property"] as? String == "hasAudio")
        #expect(seen[4]["oldValue"] as? Bool == true)
        #expect(seen[4]["newValue"] as? Bool == false)
        #expect(seen[5]["from"] as? String == pub.connectionId)
        #expect(seen[5]["data"] as? String == "hello")
        #expect(seen[5]["signalType"] as? String == "chat")
        #expect(seen[6]["reason"] as? String == "networkDisconnected")
        #expect(seen[7]["reason"] as? String == "networkDisconnected")
        #expect(seen[7]["connectionId"] as? String == pub.connectionId)

        // The publisher saw its own stream and property changes, but not its own signal.
        #expect(types(await drain(publisher)) == ["connected", "streamCreated", "streamPropertyChanged", "streamPropertyChanged"])
        #expect(try registry.streams(sessionID: sid).isEmpty)
    }

    @Test("a signal to one connection reaches only it; to an unknown one is refused")
    func directedSignal() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let a = Outbox(), b = Outbox(), c = Outbox()
        let ca = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: a)
        let cb = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: b)
        _ = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: c)
        try registry.signal(sessionID: sid, from: ca.connectionId, to: cb.connectionId, signalType: nil, data: .number(7))
        #expect(throws: RegistryError.noSuchConnection("nobody")) {
            try registry.signal(sessionID: sid, from: ca.connectionId, to: "nobody", signalType: nil, data: .null)
        }
        #expect(types(await drain(b)).last == "signal")
        #expect(!types(await drain(c)).contains("signal"))
        #expect(!types(await drain(a)).contains("signal"))
    }

    @Test("a forced disconnect closes the connection's socket and tells the others why")
    func forcedDisconnect() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let target = Outbox(), other = Outbox()
        let victim = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: target)
        _ = try registry.connect(sessionID: sid, role: .moderator, data: "", outbox: other)
        let streamID = try registry.reserveStream(sessionID: sid, connectionID: victim.connectionId)
        _ = try registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(victim.connectionId),
                                        name: "", hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(registry.disconnect(sessionID: sid, connectionID: victim.connectionId, reason: .forceDisconnected) != nil)
        // The socket's own close afterwards changes nothing.
        #expect(registry.disconnect(sessionID: sid, connectionID: victim.connectionId, reason: .clientDisconnected) == nil)

        #expect(await drain(target).last == .close(reason: "forceDisconnected"))
        let seen = messages(await drain(other))
        #expect(seen.suffix(2).map { $0["type"] as? String } == ["streamDestroyed", "connectionDestroyed"])
        #expect(seen.suffix(2).map { $0["reason"] as? String } == ["forceDisconnected", "forceDisconnected"])
    }

    @Test("a bare WHIP client's connection comes and goes with its stream")
    func bareWHIPClient() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let watcher = Outbox()
        _ = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let streamID = try registry.reserveStream(sessionID: sid, connectionID: nil)
        let (stream, _) = try registry.announceStream(
            sessionID: sid, streamID: streamID, publisher: .bareWHIPClient(role: .publisher, data: "obs"), name: "",
            hasAudio: false, hasVideo: true, videoType: .camera)
        #expect(registry.counts().connections == 2)
        #expect(registry.removeStream(sessionID: sid, streamID: streamID, reason: .clientDisconnected) != nil)
        #expect(registry.counts().connections == 1)
        let seen = messages(await drain(watcher))
        #expect(seen.map { $0["type"] as? String } == ["connected", "connectionCreated", "streamCreated", "streamDestroyed", "connectionDestroyed"])
        #expect(seen[4]["connectionId"] as? String == stream.connectionId)
        #expect(seen[4]["reason"] as? String == "clientDisconnected")
    }

    @Test("a stream the engine ended before it was announced is announced and destroyed at once")
    func endedBeforeAnnounced() async throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let watcher = Outbox()
        let c = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: watcher)
        let streamID = try registry.reserveStream(sessionID: sid, connectionID: c.connectionId)
        #expect(registry.removeStream(sessionID: sid, streamID: streamID, reason: .mediaStopped) == nil)
        let (_, release) = try registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(c.connectionId),
                                                       name: "", hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(release?.streamIDs == [streamID])
        let seen = messages(await drain(watcher))
        #expect(seen.suffix(2).map { $0["type"] as? String } == ["streamCreated", "streamDestroyed"])
        #expect(seen.last?["reason"] as? String == "mediaStopped")
    }

    @Test("only the stream's own connection may change its properties")
    func propertyOwnership() throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let owner = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let other = try registry.connect(sessionID: sid, role: .moderator, data: "", outbox: nil)
        let streamID = try registry.reserveStream(sessionID: sid, connectionID: owner.connectionId)
        _ = try registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(owner.connectionId),
                                        name: "", hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(throws: RegistryError.self) {
            try registry.setStreamProperties(sessionID: sid, streamID: streamID, requester: other.connectionId, hasAudio: false, hasVideo: nil)
        }
        #expect(throws: RegistryError.noSuchStream("nope")) {
            try registry.setStreamProperties(sessionID: sid, streamID: "nope", requester: owner.connectionId, hasAudio: false, hasVideo: nil)
        }
    }

    @Test("every limit refuses with 503 once reached, and frees its place again")
    func limits() throws {
        let registry = SessionRegistry(limits: RegistryLimits(maxSessions: 2, maxConnectionsPerSession: 2,
                                                              maxStreamsPerSession: 1, maxSubscribersPerStream: 1))
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        _ = try registry.createSession(mediaMode: .relayed)
        #expect(throws: RegistryError.self) { try registry.createSession(mediaMode: .routed) }
        do { _ = try registry.createSession(mediaMode: .routed) } catch { #expect(error.status == 503) }

        let c1 = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let c2 = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        #expect(throws: RegistryError.self) { try registry.checkCanConnect(sessionID: sid) }
        #expect(throws: RegistryError.self) { try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil) }
        registry.disconnect(sessionID: sid, connectionID: c2.connectionId, reason: .clientDisconnected)
        try registry.checkCanConnect(sessionID: sid)

        let s1 = try registry.reserveStream(sessionID: sid, connectionID: c1.connectionId)
        // A stream being answered holds its place.
        #expect(throws: RegistryError.self) { try registry.reserveStream(sessionID: sid, connectionID: c1.connectionId) }
        _ = try registry.announceStream(sessionID: sid, streamID: s1, publisher: .connection(c1.connectionId),
                                        name: "", hasAudio: true, hasVideo: true, videoType: .camera)
        #expect(throws: RegistryError.self) { try registry.reserveStream(sessionID: sid, connectionID: c1.connectionId) }

        let sub = try registry.reserveSubscriber(sessionID: sid, streamID: s1)
        #expect(throws: RegistryError.self) { try registry.reserveSubscriber(sessionID: sid, streamID: s1) }
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: s1, subscriberID: sub))
        #expect(registry.counts() == RegistryCounts(sessions: 2, connections: 1, streams: 1, subscribers: 1))
        #expect(registry.removeSubscriber(sessionID: sid, streamID: s1, subscriberID: sub))
        #expect(!registry.removeSubscriber(sessionID: sid, streamID: s1, subscriberID: sub))
        _ = try registry.reserveSubscriber(sessionID: sid, streamID: s1)
    }

    @Test("relayed sessions refuse routed media with 409")
    func relayed() throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .relayed).sessionID
        let c = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        #expect(throws: RegistryError.conflict(SessionRegistry.relayedMediaMessage)) {
            try registry.reserveStream(sessionID: sid, connectionID: c.connectionId)
        }
    }

    @Test("subscriber settings are kept for a subscriber of the session, merged field by field")
    func subscriberSettings() throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let c = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let s = try registry.reserveStream(sessionID: sid, connectionID: c.connectionId)
        _ = try registry.announceStream(sessionID: sid, streamID: s, publisher: .connection(c.connectionId),
                                        name: "", hasAudio: true, hasVideo: true, videoType: .camera)
        let sub = try registry.reserveSubscriber(sessionID: sid, streamID: s)
        #expect(throws: RegistryError.noSuchSubscriber(sub)) {
            try registry.storeSubscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: sub,
                                                 settings: SubscriberSettings(subscribeToAudio: false))
        }
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: s, subscriberID: sub))
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: sub,
                                             settings: SubscriberSettings(subscribeToAudio: false))
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: sub,
                                             settings: SubscriberSettings(preferredResolution: (640, 360)))
        let stored = registry.subscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: sub)
        #expect(stored == SubscriberSettings(subscribeToAudio: false, preferredResolution: (640, 360)))
        // When the subscriber goes, so do its settings: they were kept for the connection's lifetime.
        #expect(registry.removeSubscriber(sessionID: sid, streamID: s, subscriberID: sub))
        #expect(registry.subscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: sub) == nil)
        // And when its stream goes.
        let next = try registry.reserveSubscriber(sessionID: sid, streamID: s)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: s, subscriberID: next))
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: next,
                                             settings: SubscriberSettings(subscribeToCaptions: true))
        #expect(registry.subscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: next) != nil)
        _ = registry.removeStream(sessionID: sid, streamID: s, reason: .clientDisconnected)
        #expect(registry.subscriberSettings(sessionID: sid, connectionID: c.connectionId, subscriberID: next) == nil)
    }

    /// A routed session with a subscriber's connection that watches it, and a publisher's stream with audio and video.
    static func watchedStream() throws -> (SessionRegistry, sid: String, watcher: Outbox, viewer: String, pub: String, stream: String) {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let watcher = Outbox()
        let viewer = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher).connectionId
        let pub = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil).connectionId
        let stream = try registry.reserveStream(sessionID: sid, connectionID: pub)
        _ = try registry.announceStream(sessionID: sid, streamID: stream, publisher: .connection(pub), name: "",
                                        hasAudio: true, hasVideo: true, videoType: .camera)
        return (registry, sid, watcher, viewer, pub, stream)
    }

    @Test("a publisher's video off and on, and a subscriber's own, reach the session as videoDisabled/videoEnabled with their reason")
    func videoReasons() async throws {
        let (registry, sid, watcher, viewer, pub, stream) = try Self.watchedStream()
        let sub = try registry.reserveSubscriber(sessionID: sid, streamID: stream)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: stream, subscriberID: sub))

        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: pub, hasAudio: nil, hasVideo: false)
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: pub, hasAudio: nil, hasVideo: false)  // no change
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: pub, hasAudio: false, hasVideo: nil)  // not video
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: pub, hasAudio: nil, hasVideo: true)
        for video in [false, false, true] {   // the second says nothing new
            try registry.storeSubscriberSettings(sessionID: sid, connectionID: viewer, subscriberID: sub,
                                                 settings: SubscriberSettings(subscribeToVideo: video))
        }
        // The same client joined again (a new connection, the same token) says its settings again:
        // nothing new for the subscriber, nothing said.
        let again = try registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: nil).connectionId
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: again, subscriberID: sub,
                                             settings: SubscriberSettings(subscribeToVideo: true))
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: viewer, subscriberID: sub,
                                             settings: SubscriberSettings(subscribeToAudio: false))

        let said = messages(await drain(watcher)).filter { ($0["type"] as? String)?.hasPrefix("video") == true }
        #expect(said.map { "\($0["type"] ?? "") \($0["subscriberId"] ?? "") \($0["reason"] ?? "")" } == [
            "videoDisabled \(sub) publishVideo", "videoEnabled \(sub) publishVideo",
            "videoDisabled \(sub) subscribeToVideo", "videoEnabled \(sub) subscribeToVideo",
        ])
    }

    @Test("a subscriber whose offer asked for video in none of the stream's codecs hears videoDisabled codecNotSupported, and nothing of the publisher's video after")
    func codecNotSupported() async throws {
        let (registry, sid, watcher, viewer, pub, stream) = try Self.watchedStream()
        let refused = try registry.reserveSubscriber(sessionID: sid, streamID: stream)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: stream, subscriberID: refused, offeredVideoGotNone: true))
        let taken = try registry.reserveSubscriber(sessionID: sid, streamID: stream)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: stream, subscriberID: taken))
        try registry.setStreamProperties(sessionID: sid, streamID: stream, requester: pub, hasAudio: nil, hasVideo: false)
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: viewer, subscriberID: refused,
                                             settings: SubscriberSettings(subscribeToVideo: false))

        // An audio-only stream (no video track at all) refuses nobody's codec.
        let audioOnly = try registry.reserveStream(sessionID: sid, connectionID: pub)
        _ = try registry.announceStream(sessionID: sid, streamID: audioOnly, publisher: .connection(pub), name: "",
                                        hasAudio: true, hasVideo: false, videoType: .camera)
        let listener = try registry.reserveSubscriber(sessionID: sid, streamID: audioOnly)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: audioOnly, subscriberID: listener, offeredVideoGotNone: true))

        let said = messages(await drain(watcher)).filter { ($0["type"] as? String)?.hasPrefix("video") == true }
        #expect(said.map { "\($0["type"] ?? "") \($0["subscriberId"] ?? "") \($0["reason"] ?? "")" } == [
            "videoDisabled \(refused) codecNotSupported", "videoDisabled \(taken) publishVideo",
        ])
    }

    @Test("whether a subscriber's offer asked for video that the answer does not send")
    func offeredVideoGotNone() {
        func sdp(_ sections: [(kind: String, port: Int, direction: String)]) -> String {
            "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n" + sections.map { s in
                "m=\(s.kind) \(s.port) UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:u\r\na=ice-pwd:pppppppppppppppppppppp\r\n"
                    + "a=fingerprint:sha-256 AB:CD\r\na=\(s.direction)\r\n"
            }.joined()
        }
        let wantsBoth = sdp([("audio", 9, "recvonly"), ("video", 9, "recvonly")])
        let check = RESTResponder.offeredVideoGotNone
        #expect(check(wantsBoth, sdp([("audio", 9, "sendonly"), ("video", 9, "inactive")])))
        #expect(check(wantsBoth, sdp([("audio", 9, "sendonly"), ("video", 0, "inactive")])))
        #expect(!check(wantsBoth, sdp([("audio", 9, "sendonly"), ("video", 9, "sendonly")])))
        // An offer that asks for no video is refused nothing; nor is one the answer cannot be matched to.
        #expect(!check(sdp([("audio", 9, "recvonly"), ("video", 9, "inactive")]), sdp([("audio", 9, "sendonly"), ("video", 9, "inactive")])))
        #expect(!check(sdp([("audio", 9, "recvonly")]), sdp([("audio", 9, "sendonly")])))
        #expect(!check(wantsBoth, "not sdp"))
    }

    @Test("a connection is acted for only with the token it joined with: a WHIP stream tied to it, its subscribers' settings")
    func ownership() throws {
        let registry = SessionRegistry()
        let sid = try registry.createSession(mediaMode: .routed).sessionID
        let alice = try registry.connect(sessionID: sid, role: .publisher, data: "", outbox: Outbox(), tokenID: "A").connectionId
        let bob = try registry.connect(sessionID: sid, role: .moderator, data: "", outbox: Outbox(), tokenID: "B").connectionId
        try registry.checkOwnership(sessionID: sid, connectionID: alice, tokenID: "A")
        #expect(throws: RegistryError.self) { try registry.checkOwnership(sessionID: sid, connectionID: alice, tokenID: "B") }
        #expect(throws: RegistryError.noSuchConnection("nope")) {
            try registry.checkOwnership(sessionID: sid, connectionID: "nope", tokenID: "A")
        }

        let stream = try registry.reserveStream(sessionID: sid, connectionID: alice)
        _ = try registry.announceStream(sessionID: sid, streamID: stream, publisher: .connection(alice), name: "",
                                        hasAudio: true, hasVideo: true, videoType: .camera)
        let sub = try registry.reserveSubscriber(sessionID: sid, streamID: stream)
        #expect(registry.confirmSubscriber(sessionID: sid, streamID: stream, subscriberID: sub, tokenID: "A"))
        let off = SubscriberSettings(subscribeToVideo: false)
        let refused = #expect(throws: RegistryError.self) {
            try registry.storeSubscriberSettings(sessionID: sid, connectionID: bob, subscriberID: sub, settings: off)
        }
        #expect(refused?.status == 403)
        #expect(registry.subscriberSettings(sessionID: sid, connectionID: bob, subscriberID: sub) == nil)
        try registry.storeSubscriberSettings(sessionID: sid, connectionID: alice, subscriberID: sub, settings: off)

        // A bare WHIP client's connection (no socket) takes no stream of anyone, its own token's neither.
        let bare = try registry.reserveStream(sessionID: sid, connectionID: nil)
        let (bareStream, _) = try registry.announceStream(sessionID: sid, streamID: bare, publisher: .bareWHIPClient(role: .publisher, data: "obs"),
                                                          name: "", hasAudio: true, hasVideo: true, videoType: .camera, tokenID: "C")
        for token in ["C", "A"] {
            #expect(throws: RegistryError.self) {
                try registry.checkOwnership(sessionID: sid, connectionID: bareStream.connectionId, tokenID: token)
            }
        }
    }

    @Test("an outbox that fills up ends itself and says it overflowed")
    func overflow() async {
        let outbox = Outbox(capacity: 3)
        for i in 0..<5 { outbox.send("m\(i)") }
        #expect(outbox.overflowed)
        var received: [Outbox.Item] = []
        for await item in outbox.items { received.append(item) }
        #expect(received == [.text("m0"), .text("m1"), .text("m2")])
    }

    /// Counted in messages only, one client's signals to another that does not read could
    /// queue 1024 × 8 KiB (more with a signalType of combining marks, then counted as one
    /// character). Bytes are bounded too; what the writer has taken no longer counts.
    /// "a" and 60,000 combining acute accents is one Character: it passed a limit of
    /// 128 counted in characters, as a 120 KB signalType.
    @Test("a signalType is limited in bytes, not characters")
    func signalTypeBytes() throws {
        let marks = "a" + String(repeating: "\u{0301}", count: 60_000)
        #expect(marks.count == 1)
        #expect(throws: SignallingRefusal.self) {
            try ClientMessage.parse(#"{"type":"signal","signalType":"\#(marks)","data":"x"}"#)
        }
        let fits = String(repeating: "t", count: 128)
        #expect(throws: Never.self) { try ClientMessage.parse(#"{"type":"signal","signalType":"\#(fits)","data":"x"}"#) }
    }

    @Test("an outbox also fills up by bytes")
    func overflowByBytes() async {
        let outbox = Outbox(capacity: 100, byteCapacity: 10)
        outbox.send("abcd")
        outbox.send("efgh")
        outbox.taken("abcd")       // the writer sent the first
        outbox.send("ijkl")        // 8 bytes queued
        #expect(!outbox.overflowed)
        outbox.send("mnop")        // 12: too many
        #expect(outbox.overflowed)
        var received: [Outbox.Item] = []
        for await item in outbox.items { received.append(item) }
        #expect(received == [.text("abcd"), .text("efgh"), .text("ijkl")])
    }
}
