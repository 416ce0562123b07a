import AudioDevices
import MediaTypes
import Publisher
import Testing
import VideoSources
@testable import Session

/// `Session.publish` without a router: what it refuses, and the bookkeeping
/// that ties the router's messages to the streams published here. The media
/// paths themselves run against a real router in Tests/Publish
/// (`camagent publish --session`, routed and relayed, is built on it).
@Suite("Session publishing: refusals and bookkeeping")
struct SessionPublishingTests {
    private func publisher() throws -> Publisher {
        var settings = PublisherSettings()
        settings.audioTrack = true
        return try Publisher(settings: settings, videoCapture: nil, audioDevice: SilentAudioCapture(format: .init(sampleRate: 48_000, channels: 1)),
                             signaling: nil, logger: .init(label: "test"))
    }

    private static func isNotConnected(_ error: SessionError) -> Bool {
        if case .notConnected = error { return true }
        return false
    }

    private static func signalingError(_ error: PublisherError) -> SignalingError? {
        if case .signaling(let e) = error { return e }
        return nil
    }

    /// What a publisher said, in order.
    final class Events: Sendable {
        private let list = PThreadLocked<[PublisherEvent]>([])
        func append(_ e: PublisherEvent) { list.withLock { $0.append(e) } }
        var captions: [Bool] {
            list.withLock { $0.compactMap { if case .publishingCaptions(let on) = $0 { on } else { nil } } }
        }
    }

    @Test("publishCaptions: each change is said once (a session tells the router); without audio it is MissingAudioTrack and nothing changes")
    func publishCaptions() throws {
        var settings = PublisherSettings()
        settings.videoTrack = false
        let events = Events()
        let voiced = try Publisher(settings: settings, videoCapture: nil,
                                   audioDevice: SilentAudioCapture(format: .init(sampleRate: 48_000, channels: 1)),
                                   signaling: nil, logger: .init(label: "test")) { events.append($0) }
        #expect(!voiced.publishCaptions)
        try voiced.setPublishCaptions(true)
        try voiced.setPublishCaptions(true)
        #expect(voiced.publishCaptions)
        try voiced.setPublishCaptions(false)
        #expect(!voiced.publishCaptions)
        #expect(events.captions == [true, false])

        settings = PublisherSettings()
        settings.audioTrack = false
        let muteEvents = Events()
        let mute = try Publisher(settings: settings,
                                 videoCapture: TestPatternCapture(size: FrameSize(width: 320, height: 240), framesPerSecond: 10,
                                                                 logger: .init(label: "test")),
                                 audioDevice: nil, signaling: nil, logger: .init(label: "test")) { muteEvents.append($0) }
        #expect(throws: PublisherError.missingAudioTrack) { try mute.setPublishCaptions(true) }
        #expect(!mute.publishCaptions && muteEvents.captions.isEmpty)
        try mute.setPublishCaptions(false)   // nothing to turn off: no error, nothing said
        #expect(muteEvents.captions.isEmpty)

        // From the start (PublisherSettings.publishCaptions): on, without a word; refused without audio.
        settings.publishCaptions = true
        #expect(throws: PublisherError.missingAudioTrack) {
            _ = try Publisher(settings: settings,
                              videoCapture: TestPatternCapture(size: FrameSize(width: 320, height: 240), framesPerSecond: 10,
                                                               logger: .init(label: "test")),
                              audioDevice: nil, signaling: nil, logger: .init(label: "test"))
        }
        settings = PublisherSettings()
        settings.videoTrack = false
        settings.publishCaptions = true
        let fromTheStartEvents = Events()
        let fromTheStart = try Publisher(settings: settings, videoCapture: nil,
                                         audioDevice: SilentAudioCapture(format: .init(sampleRate: 48_000, channels: 1)),
                                         signaling: nil, logger: .init(label: "test")) { fromTheStartEvents.append($0) }
        #expect(fromTheStart.publishCaptions && fromTheStartEvents.captions.isEmpty)
    }

    @Test("a session that is not connected makes no publisher and publishes nothing")
    func notConnected() throws {
        let session = Session(url: "http://127.0.0.1:1/v2/sessions/s", token: "t", logger: .init(label: "test"))
        let making = #expect(throws: SessionError.self) {
            _ = try session.makePublisher(settings: PublisherSettings(), videoCapture: nil, audioDevice: nil)
        }
        #expect(making.map(Self.isNotConnected) == true)
        let publisher = try publisher()
        let publishing = #expect(throws: SessionError.self) { _ = try session.publish(publisher) }
        #expect(publishing.map(Self.isNotConnected) == true)
        #expect(session.streamId(of: publisher) == nil)
        // Nothing was published here, so nothing is ended either.
        session.unpublish(publisher)
    }

    @Test("a routed session's publisher published on its own is refused: its stream would belong to no connection")
    func routedSignalingNeedsSessionPublish() {
        let signaling = SessionPublishSignaling(sessionURL: "http://127.0.0.1:1/v2/sessions/s", token: "t", timeout: 1,
                                                allowInsecureTLS: false, trustedCertificatesFile: nil, logger: .init(label: "test"))
        let alone = #expect(throws: PublisherError.self) { _ = try signaling.publish(offer: "v=0\r\n") }
        #expect(alone.flatMap(Self.signalingError)?.kind == .refused)
        #expect(alone.flatMap(Self.signalingError)?.description.contains("Session.publish") == true)
        // Prepared, it really goes to the router: nobody listens on port 1.
        signaling.prepare(connectionId: "c", options: [])
        let sent = #expect(throws: PublisherError.self) { _ = try signaling.publish(offer: "v=0\r\n") }
        #expect(sent.flatMap(Self.signalingError)?.kind == .unreachable)
        #expect(signaling.streamId == nil)
    }

    @Test("a rejoined session's publisher offers under the new connection, with the same name and options")
    func rejoinedSignalingNamesTheNewConnection() {
        let signaling = SessionPublishSignaling(sessionURL: "http://127.0.0.1:1/v2/sessions/s", token: "t", timeout: 1,
                                                allowInsecureTLS: false, trustedCertificatesFile: nil, logger: .init(label: "test"))
        #expect(signaling.query == nil)
        signaling.prepare(connectionId: "old", options: ["name=door", "audioFallback=false"])
        #expect(signaling.query == "connectionId=old&name=door&audioFallback=false")
        signaling.rejoined(connectionId: "new")
        #expect(signaling.query == "connectionId=new&name=door&audioFallback=false")
    }

    @Test("a relayed stream announced again is found by its new id only")
    func relayedStreamAnnouncedAgain() throws {
        let publications = SessionPublications()
        let first = try publisher()
        #expect(publications.add(.init(publisher: first, relayed: true, streamId: "A", name: "door", connectionId: "c",
                                       onEvent: { _ in })))
        // Moved to a new connection once: a rejoin and a publish under way do not both announce it.
        #expect(publications.moveTo(first, connectionId: "c2"))
        #expect(!publications.moveTo(first, connectionId: "c2"))
        publications.setStreamId("A2", of: first)
        #expect(publications.publication(streamId: "A") == nil)
        #expect(publications.publication(streamId: "A2")?.publisher === first)
        #expect(publications.publication(streamId: "A2")?.name == "door")
    }

    @Test("a relayed stream is found by its id, its subscribers by theirs; the session's end is told once, and ends publishing")
    func publications() throws {
        let publications = SessionPublications()
        let first = try publisher(), second = try publisher()
        let heard = PThreadLocked<[PublicationEvent]>([])
        let record: @Sendable (PublicationEvent) -> Void = { event in heard.withLock { $0.append(event) } }
        #expect(publications.add(.init(publisher: first, relayed: true, streamId: "A", name: "", connectionId: "c",
                                       onEvent: record)))
        #expect(publications.add(.init(publisher: second, relayed: true, streamId: "B", name: "", connectionId: "c",
                                       onEvent: record)))
        #expect(publications.publication(streamId: "B")?.publisher === second)
        #expect(publications.publication(streamId: "C") == nil)

        publications.addViewer(subscriberId: "s1", publisher: first, viewerId: "v1")
        publications.addViewer(subscriberId: "s2", publisher: first, viewerId: "v2")
        publications.addViewer(subscriberId: "s3", publisher: second, viewerId: "v1")
        // A viewer the publisher found gone names its subscriber, once.
        #expect(publications.removeViewer(publisher: second, viewerId: "v1") == "s3")
        #expect(publications.removeViewer(publisher: second, viewerId: "v1") == nil)
        #expect(publications.removeViewer(subscriberId: "s1")?.viewerId == "v1")
        // Unpublishing hands back the publication and the viewers still answered by it.
        let (removed, viewers) = publications.remove(first)
        #expect(removed?.streamId == "A" && viewers.map(\.viewerId) == ["v2"])
        #expect(publications.all.count == 1)

        publications.endAll(reason: "gone")
        publications.endAll(reason: "gone again")
        #expect(heard.withLock { $0 } == [.ended(reason: "gone")])
        #expect(!publications.add(.init(publisher: first, relayed: true, streamId: "A2", name: "", connectionId: "c",
                                        onEvent: record)))
    }

    @Test("a stream object follows streamPropertyChanged: hasAudio, hasVideo, hasCaptions and videoDimensions; unknown or unreadable values change nothing")
    func streamFollowsItsProperties() throws {
        guard case .streamCreated(var stream)? = Session.parse(#"{"type":"streamCreated","stream":{"streamId":"s1","connectionId":"c1","name":"door","hasAudio":true,"hasVideo":true,"hasCaptions":false,"videoType":"camera","width":640,"height":480,"createdAt":1}}"#) else {
            Issue.record("no stream parsed")
            return
        }
        for text in [#"{"type":"streamPropertyChanged","streamId":"s1","property":"hasCaptions","oldValue":false,"newValue":true}"#,
                     #"{"type":"streamPropertyChanged","streamId":"s1","property":"hasVideo","oldValue":true,"newValue":false}"#,
                     #"{"type":"streamPropertyChanged","streamId":"s1","property":"videoDimensions","oldValue":{"width":640,"height":480},"newValue":{"width":1280,"height":720}}"#] {
            guard case .streamPropertyChanged(_, let property, _, let newValue)? = Session.parse(text) else {
                Issue.record("not parsed: \(text)")
                continue
            }
            let applied = stream.apply(property: property, newValue: newValue)
            #expect(applied, "\(property)")
        }
        #expect(stream.hasCaptions && !stream.hasVideo && stream.hasAudio && stream.width == 1280 && stream.height == 720)
        let before = stream
        let refused = [stream.apply(property: "hasAudio", newValue: "maybe"),
                       stream.apply(property: "videoDimensions", newValue: "{\"width\":1}"),
                       stream.apply(property: "colour", newValue: "true")]
        #expect(refused == [false, false, false])
        #expect(stream == before)
    }

    @Test("the router's messages become events carrying the contract's fields: a connection's data and time, a stream's videoType and createdAt")
    func parsedMessages() throws {
        let created = Session.parse(#"{"type":"connectionCreated","connection":{"connectionId":"c1","data":"kiosk","createdAt":1800000000123}}"#)
        #expect(created == .connectionCreated(SessionConnection(connectionId: "c1", data: "kiosk", createdAt: 1_800_000_000_123)))
        let stream = Session.parse(#"{"type":"streamCreated","stream":{"streamId":"s1","connectionId":"c1","name":"door","hasAudio":true,"hasVideo":false,"hasCaptions":false,"videoType":"screen","width":0,"height":0,"createdAt":1800000000456}}"#)
        guard case .streamCreated(let s)? = stream else { Issue.record("not a streamCreated: \(String(describing: stream))"); return }
        #expect(s.videoType == "screen" && s.createdAt == 1_800_000_000_456 && !s.hasVideo && s.name == "door")
    }
}
