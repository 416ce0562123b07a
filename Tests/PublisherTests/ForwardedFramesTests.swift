import MediaTypes
@testable import Publisher
import RTP
import Testing

/// The router's receiving half on packets made here: what reaches a
/// subscriber, what is held back, and what is asked of the publisher.
@Suite("Forwarding a publisher's frames to subscribers (ForwardedFrames)")
struct ForwardedFramesTests {
    static let videoPT: UInt8 = 100, audioPT: UInt8 = 109
    static let publisherSSRC: UInt32 = 0x1234_5678

    /// A VP8 payload: descriptor (S=1, partition 0, a 15-bit picture id) and,
    /// for a frame's first packet, a frame tag (a keyframe carries the
    /// 9d 01 2a start code and its size).
    static func vp8Payload(first: Bool, keyframe: Bool, width: Int = 640, height: Int = 480, fill: UInt8) -> [UInt8] {
        var p: [UInt8] = [first ? 0x90 : 0x80, 0x80, 0x80, 0x01]
        if first {
            if keyframe {
                p += [0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, UInt8(width & 0xff), UInt8(width >> 8),
                      UInt8(height & 0xff), UInt8(height >> 8)]
            } else {
                p += [0x01, 0x00, 0x00]
            }
        }
        return p + [UInt8](repeating: fill, count: 50)
    }

    /// Feeds packets to the router's receiving half; returns the feedback the publisher would get.
    static func feed(_ frames: ForwardedFrames, _ packets: [[UInt8]], now: Double) -> [RTCPPacket] {
        var all: [RTCPPacket] = []
        for p in packets {
            var feedback: [RTCPPacket] = []
            frames.receive(rtp: p[...], now: now, feedback: &feedback)
            all += feedback
        }
        return all
    }

    static func packet(pt: UInt8, seq: UInt16, ts: UInt32, marker: Bool, payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        RTPHeader(payloadType: pt, sequenceNumber: seq, timestamp: ts, ssrc: publisherSSRC, marker: marker).write(to: &out)
        return out + payload
    }

    /// A frame of `count` packets from `seq`.
    static func frame(seq: UInt16, ts: UInt32, count: Int, keyframe: Bool) -> [[UInt8]] {
        (0..<count).map { i in
            packet(pt: videoPT, seq: seq &+ UInt16(i), ts: ts, marker: i == count - 1,
                   payload: vp8Payload(first: i == 0, keyframe: keyframe, fill: UInt8(i)))
        }
    }

    final class Seen: @unchecked Sendable {
        var dimensions: [(Int, Int)] = []
    }

    struct Rig {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let frames: ForwardedFrames
        let subscriber: MediaSenders
        let seen = Seen()

        init() {
            let seen = self.seen
            frames = ForwardedFrames(hub: hub, codecs: .init(audioPayloadType: ForwardedFramesTests.audioPT,
                                                             videoPayloadType: ForwardedFramesTests.videoPT,
                                                             videoCodec: .vp8),
                                     onDimensions: { w, h in seen.dimensions.append((w, h)) })
            subscriber = hub.makeSenders([(.audio, 111), (.video, 96)])
            hub.attach(subscriber)
            subscriber.setSending([.audio, .video])
        }

        /// Feeds packets; returns the feedback the publisher would get.
        func feed(_ packets: [[UInt8]], now: Double = 10) -> [RTCPPacket] { ForwardedFramesTests.feed(frames, packets, now: now) }

        func sent() throws -> [RTPPacket] { try MediaHubTests.drain(subscriber) }
    }

    @Test func aWholeKeyframeReachesTheSubscriberUnchangedUnderItsOwnHeader() throws {
        let rig = Rig()
        let packets = Self.frame(seq: 65534, ts: 5000, count: 3, keyframe: true)   // the sequence wraps inside
        _ = rig.feed(packets)
        let out = try rig.sent()
        #expect(out.count == 3)
        #expect(out.map { Array($0.payload) } == packets.map { Array($0[12...]) })
        #expect(out.allSatisfy { $0.header.ssrc != Self.publisherSSRC && $0.header.payloadType == 96 })
        #expect(out.map(\.header.marker) == [false, false, true])
        #expect(Set(out.map(\.header.timestamp)).count == 1)
        #expect(rig.seen.dimensions.count == 1 && rig.seen.dimensions[0] == (640, 480))
        #expect(rig.frames.packetsForwarded.load(ordering: .relaxed) == 3)
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 0)
    }

    /// The publisher's round-trip time needs its sender reports echoed: the
    /// router's receiver report carries the report's middle NTP bits (LSR) and
    /// the time since it came (DLSR, 1/65536 s).
    @Test func theReceiverReportEchoesThePublishersSenderReport() throws {
        let rig = Rig()
        _ = rig.feed(Self.frame(seq: 1, ts: 5000, count: 1, keyframe: true))
        guard case .receiverReport(_, let before)? = rig.frames.receiverReports().first else {
            Issue.record("no receiver report")
            return
        }
        #expect(before.map(\.lastSenderReport) == [0])
        let ntp: UInt64 = 0xE000_1234_5678_9ABC
        let arrived = MonotonicTimestamp.now().seconds - 0.5
        rig.frames.receive(rtcp: [.senderReport(SenderReport(ssrc: Self.publisherSSRC, ntpTimestamp: ntp, rtpTimestamp: 5000,
                                                              packetCount: 1, octetCount: 60))], now: arrived)
        guard case .receiverReport(_, let after)? = rig.frames.receiverReports().first, let block = after.first else {
            Issue.record("no receiver report")
            return
        }
        #expect(block.ssrc == Self.publisherSSRC)
        #expect(block.lastSenderReport == 0x1234_5678)
        let delay = Double(block.delaySinceLastSenderReport) / 65536
        #expect(delay >= 0.5 && delay < 5, "\(delay)")
    }

    @Test func framesBeforeTheFirstKeyframeAreHeldBackAndAKeyframeIsAskedFor() throws {
        let rig = Rig()
        let feedback = rig.feed(Self.frame(seq: 10, ts: 3000, count: 2, keyframe: false))
        #expect(try rig.sent().isEmpty)
        #expect(feedback.contains { if case .pictureLossIndication(_, let media) = $0 { media == Self.publisherSSRC } else { false } })
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 2)
        _ = rig.feed(Self.frame(seq: 12, ts: 6000, count: 2, keyframe: true))
        #expect(try rig.sent().count == 2)
    }

    static func nacks(_ feedback: [RTCPPacket]) -> [UInt16] {
        feedback.flatMap { packet -> [UInt16] in
            if case .nack(_, let media, let lost) = packet, media == publisherSSRC { return lost }
            return []
        }
    }

    static func asksForKeyframe(_ feedback: [RTCPPacket]) -> Bool {
        feedback.contains { if case .pictureLossIndication(_, let media) = $0 { media == publisherSSRC } else { false } }
    }

    @Test func aLostPacketIsAskedForAgainAndItsResendCompletesTheFrame() throws {
        let rig = Rig()
        _ = rig.feed(Self.frame(seq: 100, ts: 0, count: 2, keyframe: true), now: 10)
        #expect(try rig.sent().count == 2)
        var lossy = Self.frame(seq: 102, ts: 3000, count: 3, keyframe: false)
        let lost = lossy.remove(at: 1)   // 103 does not come
        let following = Self.frame(seq: 105, ts: 6000, count: 2, keyframe: false)
        let feedback = rig.feed(lossy + following, now: 10.05)
        #expect(Self.nacks(feedback) == [103])
        // The frame after the gap waits too: subscribers get frames in order.
        #expect(try rig.sent().isEmpty)
        let afterResend = rig.feed([lost], now: 10.1)
        let out = try rig.sent()
        var whole = Self.frame(seq: 102, ts: 3000, count: 3, keyframe: false) + following
        whole = whole.map { Array($0[12...]) }
        #expect(out.map { Array($0.payload) } == whole)
        #expect(out.map(\.header.marker) == [false, false, true, false, true])
        #expect(!Self.asksForKeyframe(feedback + afterResend))
        #expect(rig.frames.packetsNacked.load(ordering: .relaxed) == 1)
        #expect(rig.frames.packetsRecovered.load(ordering: .relaxed) == 1)
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 0)
    }

    @Test func aPacketLostForGoodHoldsFramesBackUntilTheNextKeyframe() throws {
        let rig = Rig()
        _ = rig.feed(Self.frame(seq: 100, ts: 0, count: 2, keyframe: true))
        #expect(try rig.sent().count == 2)
        var lossy = Self.frame(seq: 102, ts: 3000, count: 3, keyframe: false)
        lossy.remove(at: 1)   // 103 is lost, and never sent again
        let feedback = rig.feed(lossy, now: 20)
        #expect(Self.nacks(feedback) == [103])
        #expect(!Self.asksForKeyframe(feedback))
        // A second later (past the wait bound) the frame is given up, and a keyframe asked for.
        let next = rig.feed(Self.frame(seq: 105, ts: 6000, count: 2, keyframe: false), now: 21)
        #expect(try rig.sent().isEmpty)
        #expect(Self.asksForKeyframe(next))
        _ = rig.feed(Self.frame(seq: 107, ts: 9000, count: 2, keyframe: true), now: 22)
        let out = try rig.sent()
        #expect(out.count == 2)
        // The subscriber's own numbering has no gap where the publisher's had one.
        #expect(out[1].header.sequenceNumber == out[0].header.sequenceNumber &+ 1)
        // 102 and 104 (the broken frame's rest), 105 and 106 (no keyframe before them).
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 4)
        #expect(rig.frames.packetsRecovered.load(ordering: .relaxed) == 0)
    }

    @Test func videoTimestampsKeepThePublishersSpacing() throws {
        let rig = Rig()
        _ = rig.feed(Self.frame(seq: 1, ts: 1_000_000, count: 1, keyframe: true))
        _ = rig.feed(Self.frame(seq: 2, ts: 1_003_000, count: 1, keyframe: false))
        let out = try rig.sent()
        #expect(out.count == 2)
        #expect(out[1].header.timestamp &- out[0].header.timestamp == 3000)
    }

    @Test func audioIsForwardedPacketByPacket() throws {
        let rig = Rig()
        let opus: [[UInt8]] = (0..<3).map { i in
            Self.packet(pt: Self.audioPT, seq: UInt16(i), ts: UInt32(960 * i), marker: false, payload: [UInt8](repeating: 7, count: 80))
        }
        _ = rig.feed(opus)
        let out = try rig.sent()
        #expect(out.count == 3 && out.allSatisfy { $0.header.payloadType == 111 && $0.payload.count == 80 })
        #expect(out[2].header.timestamp &- out[0].header.timestamp == 1920)
    }

    @Test func unknownPayloadTypesAndGarbageAreDroppedAndCounted() throws {
        let rig = Rig()
        _ = rig.feed([Self.packet(pt: 33, seq: 1, ts: 0, marker: true, payload: [1, 2, 3]), [0x80, 0x01]])
        #expect(try rig.sent().isEmpty)
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 2)
        #expect(rig.frames.packetsReceived.load(ordering: .relaxed) == 2)
    }

    @Test func aSubscribersKeyframeRequestBecomesAPLIAndItsRoomAREMB() async throws {
        let rig = Rig()
        _ = rig.feed(Self.frame(seq: 1, ts: 0, count: 1, keyframe: true), now: 10)
        rig.subscriber.requestKeyframe()
        // The hub serves at most one keyframe per spacing (on the real clock): wait it out.
        try await Task.sleep(for: MediaHub.keyframeSpacing + .milliseconds(100))
        let feedback = rig.feed(Self.frame(seq: 2, ts: 3000, count: 1, keyframe: false), now: 11)
        #expect(feedback.contains { if case .pictureLossIndication = $0 { true } else { false } })
        #expect(feedback.contains { if case .estimatedMaximumBitrate(_, let bps, let ssrcs) = $0 { bps <= 1_000_000 && ssrcs == [Self.publisherSSRC] } else { false } })
    }

    /// A one-packet VP8 frame with temporal layers in its descriptor (as
    /// camagent's publisher sends them: I, L and T; N on layer 1).
    static func layeredFrame(seq: UInt16, ts: UInt32, layer: UInt8, keyframe: Bool, tl0: UInt8) -> [UInt8] {
        var p: [UInt8] = [0x90 | (layer > 0 ? 0x20 : 0), 0xe0, 0x80, UInt8(truncatingIfNeeded: seq), tl0, layer << 6 | 0x20]
        p += keyframe ? [0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02, 0xe0, 0x01] : [0x01, 0x00, 0x00]
        return packet(pt: videoPT, seq: seq, ts: ts, marker: true, payload: p + [UInt8](repeating: 3, count: 40))
    }

    /// preferredFrameRate: a subscriber that asks for 15 of a 30 fps stream
    /// gets its base layer, every other frame; the one beside it gets all.
    @Test func aSubscriberPreferringALowerRateGetsTheBaseLayer() throws {
        let rig = Rig()
        let slower = rig.hub.makeSenders([(.audio, 111), (.video, 96)])
        rig.hub.attach(slower)
        slower.setSending([.audio, .video])
        slower.setPreferredFrameRate(15)
        var tl0: UInt8 = 0
        let packets = (0..<10).map { n -> [UInt8] in
            let layer = UInt8(n % 2)
            if layer == 0 { tl0 &+= 1 }
            return Self.layeredFrame(seq: UInt16(200 + n), ts: UInt32(n * 3000), layer: layer, keyframe: n == 0, tl0: tl0)
        }
        _ = rig.feed(packets)
        let everything = try rig.sent(), base = try MediaHubTests.drain(slower)
        #expect(everything.count == 10)
        #expect(base.map { Array($0.payload) } == packets.enumerated().filter { $0.offset % 2 == 0 }.map { Array($0.element[12...]) })
        // Its own sequence numbers run on without a gap: nothing for it to NACK.
        #expect(zip(base, base.dropFirst()).allSatisfy { $1.header.sequenceNumber == $0.header.sequenceNumber &+ 1 })
    }

}

@Suite("Receiver reports to a publisher (ReceptionCounter)")
struct ReceptionCounterTests {
    @Test func lossAndWrapAreCounted() {
        var c = ReceptionCounter(ssrc: 5, firstSequence: 65530)
        for seq: UInt16 in [65530, 65531, 65533, 65534, 65535, 0, 1, 3] { c.count(sequence: seq) }
        let first = c.report()
        #expect(first.highestSequence == 65536 + 3)
        #expect(first.cumulativeLost == 2)          // 65532 and 2
        #expect(first.fractionLost == UInt8(2 * 256 / 10))
        c.count(sequence: 4)
        let second = c.report()
        #expect(second.cumulativeLost == 2 && second.fractionLost == 0)
    }
}
