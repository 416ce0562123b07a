import MediaTypes
@testable import Publisher
import RTP
import Testing

@Suite("Encode once, send to every connection (MediaHub)")
struct MediaHubTests {
    /// A frame cut once, for every connection.
    static func batch(bytes: Int) -> PayloadBatch {
        var batch = PayloadBatch()
        var payloader = VP8Payloader(firstPictureID: 1)
        [UInt8](repeating: 9, count: bytes).withUnsafeBytes { batch.fill($0, payloader: &payloader, maxPayloadSize: 1100) }
        return batch
    }

    /// The packets a connection queued, as the receiver would parse them.
    static func drain(_ c: MediaSenders) throws -> [RTPPacket] {
        var out: [RTPPacket] = []
        var buffer: [UInt8] = []
        while c.takeNextPacket(now: 1e9, into: &buffer) { out.append(try RTPPacket(parsing: buffer[...])) }
        return out
    }

    @Test func oneBatchReachesEveryConnectionWithItsOwnHeaders() throws {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let a = hub.makeSenders([(.video, 96)]), b = hub.makeSenders([(.video, 120)])
        hub.attach(a)
        hub.attach(b)
        a.setSending([.video])
        b.setSending([.video])
        let ts = hub.rtpTimestamp(.video, at: hub.origin + .milliseconds(100))
        hub.send(Self.batch(bytes: 2500), kind: .video, rtpTimestamp: ts, isKeyframe: true)
        let pa = try Self.drain(a), pb = try Self.drain(b)
        #expect(pa.count == 3 && pb.count == 3)
        #expect(pa.allSatisfy { $0.header.payloadType == 96 } && pb.allSatisfy { $0.header.payloadType == 120 })
        #expect(pa[0].header.ssrc != pb[0].header.ssrc)
        // One frame, one RTP time everywhere: 100 ms at 90 kHz after the hub's base.
        #expect(pa.allSatisfy { $0.header.timestamp == ts } && pb.allSatisfy { $0.header.timestamp == ts })
        #expect(ts == hub.videoTimestampBase &+ 9000)
        #expect(pa.map(\.payload) == pb.map(\.payload))
        #expect(pa.map(\.header.marker) == [false, false, true])
    }

    @Test func aConnectionNotSendingGetsNothingAndNothingIsWantedWithoutOne() throws {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let viewer = hub.makeSenders([(.audio, 111), (.video, 96)])
        hub.attach(viewer)
        #expect(!hub.wants(.video) && !hub.wants(.audio) && hub.planVideoFrame(now: .now()) == nil)
        hub.send(Self.batch(bytes: 100), kind: .video, rtpTimestamp: 0, isKeyframe: true)
        #expect(try Self.drain(viewer).isEmpty)
        viewer.setSending([.audio])
        #expect(hub.wants(.audio) && !hub.wants(.video))
        hub.detach(viewer)
        #expect(!hub.wants(.audio) && hub.attachedCount == 0)
    }

    @Test("publishVideo off: no frame is planned (nothing encoded); back on: at once, with a keyframe")
    func videoNotPublishedIsNotEncoded() {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let viewer = hub.makeSenders([(.audio, 111), (.video, 96)])
        hub.attach(viewer)
        viewer.setSending([.audio, .video])
        let t0 = MonotonicTimestamp.now()
        #expect(hub.planVideoFrame(now: t0)?.keyframe == true)
        #expect(hub.planVideoFrame(now: t0 + .milliseconds(33))?.keyframe == false)
        #expect(hub.setPublishing(.video, false) && !hub.setPublishing(.video, false))
        #expect(!hub.isPublishing(.video) && hub.isPublishing(.audio))
        #expect(hub.planVideoFrame(now: t0 + .milliseconds(66)) == nil)
        // Back within the keyframe spacing: the keyframe is not held back by the last one.
        #expect(hub.setPublishing(.video, true))
        #expect(hub.planVideoFrame(now: t0 + .milliseconds(100))?.keyframe == true)
        #expect(hub.setPublishing(.audio, false) && !hub.isPublishing(.audio) && hub.isPublishing(.video))
    }

    @Test func aNewConnectionWaitsForAKeyframe() throws {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let viewer = hub.makeSenders([(.video, 96)])
        hub.attach(viewer)
        viewer.setSending([.video])
        hub.send(Self.batch(bytes: 100), kind: .video, rtpTimestamp: 1, isKeyframe: false)
        #expect(try Self.drain(viewer).isEmpty)
        hub.send(Self.batch(bytes: 100), kind: .video, rtpTimestamp: 2, isKeyframe: true)
        hub.send(Self.batch(bytes: 100), kind: .video, rtpTimestamp: 3, isKeyframe: false)
        #expect(try Self.drain(viewer).map(\.header.timestamp) == [2, 3])
    }

    @Test func keyframeRequestsFromAnyConnectionAreMergedAndSpaced() {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let a = hub.makeSenders([(.video, 96)]), b = hub.makeSenders([(.video, 96)])
        hub.attach(a)
        hub.attach(b)
        a.setSending([.video])
        b.setSending([.video])
        // A planned keyframe is made and sent: the viewers then have theirs.
        func keyframe(_ t: MonotonicTimestamp) -> Bool {
            guard let plan = hub.planVideoFrame(now: t) else { return false }
            hub.send(Self.batch(bytes: 100), kind: .video, rtpTimestamp: 0, isKeyframe: plan.keyframe)
            return plan.keyframe
        }
        let t0 = MonotonicTimestamp.now()
        #expect(keyframe(t0))              // the first frame is a keyframe
        #expect(!keyframe(t0 + .milliseconds(40)))
        // Two viewers send PLI at once: one keyframe, not two, and not before the spacing.
        a.requestKeyframe()
        b.requestKeyframe()
        #expect(!keyframe(t0 + .milliseconds(100)))
        #expect(keyframe(t0 + .milliseconds(500)))
        #expect(!keyframe(t0 + .milliseconds(1200)))
        // A request is kept until it can be served.
        b.requestKeyframe()
        #expect(!keyframe(t0 + .milliseconds(600)))
        #expect(keyframe(t0 + .milliseconds(1300)))
        // A camera that comes back asks every connection at once: still one keyframe.
        hub.requestKeyframe()
        #expect(keyframe(t0 + .milliseconds(1900)))
        #expect(!keyframe(t0 + .milliseconds(1950)))
    }

    @Test("a viewer that has not had its first keyframe asks again, once a spacing, until it has it")
    func aViewerWithoutItsFirstKeyframeAsksAgain() {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let viewer = hub.makeSenders([(.video, 96)])
        hub.attach(viewer)
        viewer.setSending([.video])
        let t0 = MonotonicTimestamp.now()
        // The keyframe planned did not reach it (it was not made, or not sent).
        #expect(hub.planVideoFrame(now: t0)?.keyframe == true)
        #expect(hub.planVideoFrame(now: t0 + .milliseconds(100))?.keyframe == false)
        #expect(hub.planVideoFrame(now: t0 + .milliseconds(600))?.keyframeLayers == 0b1)
        hub.send(Self.batch(bytes: 100), kind: .video, rtpTimestamp: 1, isKeyframe: true)
        #expect(hub.planVideoFrame(now: t0 + .milliseconds(1200))?.keyframe == false)
    }

    @Test func theVideoBitrateFollowsTheReceiverWithTheLeastRoom() {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let a = hub.makeSenders([(.video, 96)]), b = hub.makeSenders([(.video, 96)])
        hub.attach(a)
        hub.attach(b)
        a.setSending([.video])
        b.setSending([.video])
        #expect(hub.planVideoFrame(now: .now())?.bitrate == 1_000_000)
        b.withStateForTesting { $0.bitrate.estimatedMaximum(300_000) }
        #expect((hub.planVideoFrame(now: .now())?.bitrate ?? .max) <= 300_000)
        b.setSending([])   // that viewer left: back to the other's room
        #expect(hub.planVideoFrame(now: .now())?.bitrate == a.withStateForTesting { $0.bitrate.target })
    }

    @Test func orientationTravelsAsMetadataOnlyWhenEveryVideoReceiverTookCVO() throws {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let a = hub.makeSenders([(.video, 96)]), b = hub.makeSenders([(.video, 96)])
        hub.attach(a)
        hub.attach(b)
        a.negotiated(payloadTypes: [:], videoOrientationExtensionID: 3)
        a.setSending([.video])
        #expect(hub.planVideoFrame(now: .now())?.orientationAsMetadata == true)
        b.setSending([.video])   // no CVO: pixels must be turned for everyone
        #expect(hub.planVideoFrame(now: .now())?.orientationAsMetadata == false)
        // The CVO byte reaches only the connection that negotiated it, under its id.
        hub.send(Self.batch(bytes: 2500), kind: .video, rtpTimestamp: 5, isKeyframe: true, orientation: 1)
        let pa = try Self.drain(a), pb = try Self.drain(b)
        #expect(pa.count == 3 && pa.allSatisfy { OneByteExtension.find(3, in: $0.header) == 1 })
        #expect(pb.count == 3 && pb.allSatisfy { $0.header.extensionProfile == nil })
        // The payload is the same for both: the extension only adds to the header.
        #expect(pa.map(\.payload) == pb.map(\.payload))
    }
}
