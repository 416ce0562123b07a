import Foundation
import Logging
import MediaTypes
@testable import Publisher
import RTP
import SecureTransport
import TestSupport
import Testing

@Suite("The frame path: capture thread → encoder thread → connections")
struct FramePathTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    static func frame(width: Int, height: Int, orientation: VideoOrientation = .upright) -> VideoFrame {
        let f = VideoFrame(maxWidth: width, maxHeight: height)
        f.setFormat(.nv12(width: width, height: height, framesPerSecond: 30))
        for i in 0..<f.yPlane.count { f.yPlane[i] = UInt8(truncatingIfNeeded: i) }
        f.orientation = orientation
        f.timestamp = .now()
        return f
    }

    /// Width and height from a VP8 keyframe's header (RFC 6386 §9.1), found
    /// after its start code in the first packet's payload.
    static func vp8KeyframeSize(_ payload: ArraySlice<UInt8>) -> (Int, Int)? {
        let bytes = Array(payload)
        guard bytes.count > 10 else { return nil }
        for i in 0..<(bytes.count - 7) where bytes[i] == 0x9d && bytes[i + 1] == 0x01 && bytes[i + 2] == 0x2a {
            return (Int(bytes[i + 3]) | Int(bytes[i + 4] & 0x3f) << 8, Int(bytes[i + 5]) | Int(bytes[i + 6] & 0x3f) << 8)
        }
        return nil
    }

    @Test func theNewestFrameWinsAndEveryReplacedFrameIsCounted() {
        let pipeline = VideoPipeline(hub: MediaHub(videoBitrateCeiling: 1_000_000), codec: .vp8, framesPerSecond: 30,
                                     logger: Self.logger, onError: { _ in })
        // The encoder thread is not running yet: each frame replaces the one waiting.
        let frames = (0..<3).map { _ in Self.frame(width: 64, height: 48) }
        for f in frames { pipeline.consume(f) }
        #expect(pipeline.frameCounts.droppedEncoderBusy == 2)
        pipeline.start()
        defer { pipeline.stop() }
        // Nobody receives video: the waiting frame is taken, not encoded, and counted.
        #expect(eventually { pipeline.frameCounts.notWatched == 1 })
        #expect(pipeline.frameCounts.encoded == 0)
    }

    /// One frame mounted 90° through the pipeline to one connection: with CVO
    /// negotiated it is encoded as captured and the byte says 90°; without,
    /// the pixels are turned and no extension is sent.
    @Test(arguments: [true, false])
    func orientationReachesTheReceiver(withCVO: Bool) throws {
        let hub = MediaHub(videoBitrateCeiling: 500_000)
        let connection = hub.makeSenders([(.video, 96)])
        connection.negotiated(payloadTypes: [:], videoOrientationExtensionID: withCVO ? 7 : nil)
        hub.attach(connection)
        connection.setSending([.video])
        let pipeline = VideoPipeline(hub: hub, codec: .vp8, framesPerSecond: 30, logger: Self.logger, onError: { _ in })
        pipeline.start()
        defer { pipeline.stop() }
        pipeline.consume(Self.frame(width: 64, height: 48, orientation: VideoOrientation(rotation: .clockwise90)))
        #expect(eventually { pipeline.frameCounts.encoded == 1 })
        let packets = try MediaHubTests.drain(connection)
        let first = try #require(packets.first)
        let size = try #require(Self.vp8KeyframeSize(first.payload))
        if withCVO {
            #expect(size == (64, 48))
            #expect(packets.allSatisfy { OneByteExtension.find(7, in: $0.header) == 1 })
        } else {
            #expect(size == (48, 64))
            #expect(packets.allSatisfy { $0.header.extensionProfile == nil })
        }
    }

    @Test func aMirroredCameraIsTurnedInPixelsEvenWithCVO() throws {
        let hub = MediaHub(videoBitrateCeiling: 500_000)
        let connection = hub.makeSenders([(.video, 96)])
        connection.negotiated(payloadTypes: [:], videoOrientationExtensionID: 7)
        hub.attach(connection)
        connection.setSending([.video])
        let pipeline = VideoPipeline(hub: hub, codec: .vp8, framesPerSecond: 30, logger: Self.logger, onError: { _ in })
        pipeline.start()
        defer { pipeline.stop() }
        pipeline.consume(Self.frame(width: 64, height: 48, orientation: VideoOrientation(rotation: .clockwise270, mirrored: true)))
        #expect(eventually { pipeline.frameCounts.encoded == 1 })
        let packets = try MediaHubTests.drain(connection)
        #expect(Self.vp8KeyframeSize(try #require(packets.first).payload).map { $0 == (48, 64) } == true)
        #expect(packets.allSatisfy { OneByteExtension.find(7, in: $0.header) == 0 })
    }

    /// A recvonly VP8 offer, as a WHEP viewer sends it.
    static func viewerOffer(_ n: Int) -> String {
        """
        v=0\r
        o=- \(n) 2 IN IP4 127.0.0.1\r
        s=-\r
        t=0 0\r
        a=group:BUNDLE 0\r
        m=video 9 UDP/TLS/RTP/SAVPF 96\r
        c=IN IP4 0.0.0.0\r
        a=ice-ufrag:v\(n)x\r
        a=ice-pwd:viewerpasswordviewerpw\(n)\r
        a=fingerprint:sha-256 AA:BB:CC\r
        a=setup:actpass\r
        a=mid:0\r
        a=recvonly\r
        a=rtcp-mux\r
        a=rtpmap:96 VP8/90000\r

        """
    }

    @Test func theViewerLimitHoldsUnderConcurrentOffers() throws {
        var settings = PublisherSettings()
        settings.maxViewers = 16
        settings.includeLoopbackCandidates = true
        let viewers = ViewerSessions(hub: MediaHub(videoBitrateCeiling: 1_000_000), certificate: try DTLSCertificate(),
                                     settings: settings, logger: Self.logger, onEvent: { _ in })
        defer { viewers.removeAll() }
        let outcomes = PThreadLocked<[Result<String, ViewerError>]>([])
        DispatchQueue.concurrentPerform(iterations: 20) { n in
            let result = Result { () throws(ViewerError) -> String in
                try viewers.add(offer: Self.viewerOffer(n), offerable: .init(audio: false, video: .vp8)).id
            }
            outcomes.withLock { $0.append(result) }
        }
        let all = outcomes.withLock { $0 }
        let answered = all.compactMap { try? $0.get() }
        #expect(answered.count == 16)
        #expect(all.filter { if case .failure(.tooManyViewers(16)) = $0 { true } else { false } }.count == 4)
        // A viewer that leaves gives its place back.
        #expect(viewers.remove(id: answered[0]))
        #expect((try? viewers.add(offer: Self.viewerOffer(99), offerable: .init(audio: false, video: .vp8))) != nil)
        #expect(throws: ViewerError.tooManyViewers(16)) {
            try viewers.add(offer: Self.viewerOffer(100), offerable: .init(audio: false, video: .vp8))
        }
    }
}


/// A capturer the test drives by hand: frames and events on the test's thread.
final class ScriptedCapture: VideoCapture, @unchecked Sendable {   // driven by one test at a time
    let name: String
    private var consumer: (any VideoCaptureConsumer)?
    private(set) var started = false
    private var settings: CaptureSettings?

    init(name: String) { self.name = name }

    func initialize() throws(CaptureError) {
        let format = VideoFormat.nv12(width: 64, height: 48, framesPerSecond: 30)
        settings = CaptureSettings(device: name, card: "scripted", driver: "test", busInfo: "test", deviceFormat: format,
                                   outputFormat: format, requestedSize: FrameSize(width: 64, height: 48),
                                   requestedFramesPerSecond: 30, grantedFramesPerSecond: 30, bufferCount: 1,
                                   orientation: .upright, rotatesPixels: false)
    }
    func start() throws(CaptureError) { started = true }
    func stop() { started = false }
    func release() { stop() }
    var isCaptureStarted: Bool { started }
    var captureSettings: CaptureSettings? { settings }
    var statistics: CaptureStatistics { CaptureStatistics() }
    func setConsumer(_ consumer: (any VideoCaptureConsumer)?) { self.consumer = consumer }

    func deliver(width: Int, height: Int) { consumer?.consume(FramePathTests.frame(width: width, height: height)) }
    func report(_ event: CaptureEvent) { consumer?.captureEvent(event) }
}

@Suite("A camera that goes away while publishing")
struct DeviceLossTests {
    /// What a publisher said, in order.
    final class Events: Sendable {
        private let list = PThreadLocked<[PublisherEvent]>([])
        func append(_ e: PublisherEvent) { list.withLock { $0.append(e) } }
        func withLock<R>(_ body: ([PublisherEvent]) -> R) -> R { list.withLock { body($0) } }
    }

    /// The publisher with only its embedded side (no WHIP), its events kept.
    static func publisher(_ capture: ScriptedCapture) throws -> (Publisher, Events) {
        var settings = PublisherSettings()
        settings.audioTrack = false
        let events = Events()
        let publisher = try Publisher(settings: settings, videoCapture: capture, audioDevice: nil, signaling: nil,
                                      logger: FramePathTests.logger) { event in events.append(event) }
        try publisher.publish()
        return (publisher, events)
    }

    @Test func aLossItRecoversFromEndsNothing() throws {
        let capture = ScriptedCapture(name: "/dev/video9")
        let (publisher, events) = try Self.publisher(capture)
        defer { publisher.unpublish() }
        capture.report(.deviceLost(.deviceLost(device: "/dev/video9")))
        #expect(publisher.state == .serving && publisher.failure == nil)
        #expect(publisher.stats().videoDeviceLost)
        let settings = try #require(capture.captureSettings)
        capture.report(.reconnected(settings, gap: .seconds(2)))
        #expect(!publisher.stats().videoDeviceLost)
        let kinds = events.withLock { $0 }.compactMap { e -> String? in
            switch e {
            case .deviceLost(.video, _): "lost"
            case .deviceRestored(.video, _): "restored"
            default: nil
            }
        }
        #expect(kinds == ["lost", "restored"])
        #expect(publisher.state == .serving)
    }

    @Test func aLossForGoodFailsThePublisherWithThatError() throws {
        let capture = ScriptedCapture(name: "/dev/video9")
        let (publisher, events) = try Self.publisher(capture)
        defer { publisher.unpublish() }
        capture.report(.failed(.deviceLost(device: "/dev/video9")))
        #expect(publisher.state == .failed)
        #expect(publisher.failure == .video(.deviceLost(device: "/dev/video9")))
        #expect(events.withLock { $0 }.contains { if case .failed(.video) = $0 { true } else { false } })
        publisher.unpublish()
        #expect(publisher.state == .failed)   // unpublishing keeps why it ended
    }

    /// The camera comes back in another mode, or another camera takes its
    /// place: the encoder is made again at the new size and its first frame
    /// is a keyframe, on the same connection.
    @Test func aNewSizeRemakesTheEncoderWithAKeyframe() throws {
        let hub = MediaHub(videoBitrateCeiling: 500_000)
        let connection = hub.makeSenders([(.video, 96)])
        hub.attach(connection)
        connection.setSending([.video])
        let sizes = PThreadLocked<[FrameSize]>([])
        let pipeline = VideoPipeline(hub: hub, codec: .vp8, framesPerSecond: 30, logger: FramePathTests.logger,
                                     onError: { _ in }, onEncodedSize: { size in sizes.withLock { $0.append(size) } })
        pipeline.start()
        defer { pipeline.stop() }
        pipeline.consume(FramePathTests.frame(width: 64, height: 48))
        #expect(eventually { pipeline.frameCounts.encoded == 1 })
        pipeline.consume(FramePathTests.frame(width: 64, height: 48))
        #expect(eventually { pipeline.frameCounts.encoded == 2 })
        let first = try MediaHubTests.drain(connection)
        pipeline.consume(FramePathTests.frame(width: 32, height: 24))
        #expect(eventually { pipeline.frameCounts.encoded == 3 })
        let after = try MediaHubTests.drain(connection)
        #expect(FramePathTests.vp8KeyframeSize(try #require(first.first).payload).map { $0 == (64, 48) } == true)
        #expect(FramePathTests.vp8KeyframeSize(try #require(after.first).payload).map { $0 == (32, 24) } == true)
        // Same stream, same SSRC, sequence numbers carry on.
        #expect(Set((first + after).map(\.header.ssrc)).count == 1)
        #expect(after.first!.header.sequenceNumber == first.last!.header.sequenceNumber &+ 1)
        // The owner hears each size once: what a session reports as the stream's videoDimensions.
        #expect(sizes.withLock { $0 } == [FrameSize(width: 64, height: 48), FrameSize(width: 32, height: 24)])
    }

    @Test func anotherCameraCanBeSwappedInWhileLive() throws {
        let first = ScriptedCapture(name: "/dev/video9"), second = ScriptedCapture(name: "/dev/video8")
        let (publisher, events) = try Self.publisher(first)
        defer { publisher.unpublish() }
        #expect(first.started)
        try publisher.replaceVideoCapture(second)
        #expect(!first.started && second.started)
        #expect(events.withLock { $0 }.contains { if case .deviceRestored(.video, let d) = $0 { d.contains("/dev/video8") } else { false } })
        #expect(publisher.state == .serving)
    }
}
