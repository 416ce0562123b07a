import MediaTypes
@testable import Publisher
import RTP
import Testing

@Suite("Publisher send side: history, pacer, RTCP feedback, bitrate")
struct SendSideTests {
    @Test func historyReturnsTheSamePacketUntilItIsOverwritten() {
        var history = PacketHistory(capacity: 4)
        for seq in UInt16(65534)...UInt16(65535) { history.store(sequence: seq) { $0 = [UInt8(seq & 0xff), 1, 2] } }
        history.store(sequence: 0) { $0 = [0, 9] }
        #expect(history.withPacket(65535) { $0 } == [0xff, 1, 2])
        #expect(history.withPacket(0) { $0 } == [0, 9])
        #expect(history.withPacket(1) { $0 } == nil)
        // Four slots: sequence 4 lands in 0's slot and replaces it.
        history.store(sequence: 4) { $0 = [4] }
        #expect(history.withPacket(0) { $0 } == nil)
        #expect(history.withPacket(4) { $0 } == [4])
    }

    @Test func senderNumbersPacketsAndMarksTheLastOfAFrame() throws {
        var sender = RTPStreamSender(kind: .video, ssrc: 0x1234, payloadType: 96, clockRate: 90_000, historySize: 64,
                                     firstSequence: 65535, timestampBase: 1000)
        var payloader = VP8Payloader(firstPictureID: 5)
        let frame = [UInt8](repeating: 7, count: 2500)
        var queued: [(UInt16, Int)] = []
        var batch = PayloadBatch()
        frame.withUnsafeBytes { batch.fill($0, payloader: &payloader, maxPayloadSize: 1100) }
        sender.append(batch, timestamp: 3000, isKeyframe: true) { queued.append(($0, $1)) }
        #expect(queued.map(\.0) == [65535, 0, 1])
        var payload = 0
        for (index, (seq, size)) in queued.enumerated() {
            let bytes = try #require(sender.history.withPacket(seq) { $0 })
            #expect(bytes.count == size)
            let packet = try RTPPacket(parsing: bytes[...])
            #expect(packet.header.ssrc == 0x1234 && packet.header.timestamp == 3000 && packet.header.payloadType == 96)
            #expect(packet.header.marker == (index == queued.count - 1))
            payload += packet.payload.count - 4   // VP8 descriptor
        }
        #expect(payload == frame.count)
        #expect(sender.framesSent == 1 && sender.keyframesSent == 1)
    }

    @Test func rtpTimeFollowsTheCaptureClock() {
        let sender = RTPStreamSender(kind: .audio, ssrc: 1, payloadType: 111, clockRate: 48_000, historySize: 8,
                                     timestampBase: UInt32.max - 100)
        let origin = MonotonicTimestamp(nanoseconds: 5_000_000_000)
        #expect(sender.rtpTimestamp(at: origin, origin: origin) == UInt32.max - 100)
        // 20 ms later: 960 ticks, wrapping around 2^32.
        #expect(sender.rtpTimestamp(at: origin + .milliseconds(20), origin: origin) == 859)
    }

    @Test func pacerSpreadsABurstAndLetsAudioThrough() {
        // 1 Mbit/s × 2.5 = 312 500 bytes/s: 40 packets of 1000 bytes need ~0.12 s.
        var pacer = Pacer(bitsPerSecond: 1_000_000)
        for seq in 0..<40 { pacer.enqueue(.init(stream: 1, sequence: UInt16(seq), size: 1000, isRetransmission: false), urgent: false) }
        var t = 100.0
        var sentAtStart = 0
        while pacer.next(now: t) != nil { sentAtStart += 1 }
        #expect(sentAtStart > 0 && sentAtStart < 40)
        pacer.enqueue(.init(stream: 0, sequence: 9, size: 100, isRetransmission: false), urgent: true)
        #expect(pacer.next(now: t)?.stream == 0)   // audio is not held behind video
        var order: [UInt16] = []
        while !pacer.isEmpty {
            t = pacer.nextDeadline(now: t) ?? t
            while let item = pacer.next(now: t) { order.append(item.sequence) }
        }
        #expect(order == (UInt16(sentAtStart)..<40).map { $0 })
        #expect(t - 100 > 0.08)   // simulated time, not wall time
        #expect(pacer.nextDeadline(now: t) == nil)
    }

    @Test func aFullPacerDropsTheOldestVideo() {
        var pacer = Pacer(bitsPerSecond: 100_000, capacity: 4)
        for seq in 0..<6 { pacer.enqueue(.init(stream: 1, sequence: UInt16(seq), size: 10_000, isRetransmission: false), urgent: false) }
        #expect(pacer.dropped == 2)
        #expect(pacer.next(now: 1)?.sequence == 2)
    }

    private func state() -> MediaSendState {
        MediaSendState(streams: [
            RTPStreamSender(kind: .audio, ssrc: 10, payloadType: 111, clockRate: 48_000, historySize: 16, firstSequence: 0),
            RTPStreamSender(kind: .video, ssrc: 20, payloadType: 96, clockRate: 90_000, historySize: 16, firstSequence: 100),
        ], videoBitrate: 1_000_000)
    }

    @Test func nackQueuesRetransmissionsFromTheHistory() {
        var s = state()
        var payloader = VP8Payloader()
        var batch = PayloadBatch()
        [UInt8](repeating: 1, count: 3000).withUnsafeBytes { batch.fill($0, payloader: &payloader, maxPayloadSize: 1100) }
        s.streams[1].append(batch, timestamp: 0, isKeyframe: false) { _, _ in }
        _ = s.handle(.nack(sender: 1, media: 20, lost: [101, 102, 90]), arrivedAtCompactNTP: 0)
        #expect(s.feedback[1].nackReceived == 1 && s.feedback[1].nackedPackets == 3)
        #expect(s.nackMisses == 1)   // 90 was never sent
        let first = s.pacer.next(now: 0), second = s.pacer.next(now: 0)
        #expect(first?.sequence == 101 && first?.isRetransmission == true && second?.sequence == 102)
    }

    @Test func pliAndFirAskForAKeyframe() {
        var s = state()
        s.keyframeLayers = 0
        _ = s.handle(.pictureLossIndication(sender: 1, media: 20), arrivedAtCompactNTP: 0)
        // A stream without layers is all layer 0.
        #expect(s.keyframeLayers == 0b1 && s.feedback[1].pliReceived == 1)
        s.keyframeLayers = 0
        _ = s.handle(.fullIntraRequest(sender: 1, media: 20, sequence: 1), arrivedAtCompactNTP: 0)
        #expect(s.keyframeLayers == 0b1 && s.feedback[1].firReceived == 1)
        // A PLI for a stream we do not send changes nothing.
        s.keyframeLayers = 0
        _ = s.handle(.pictureLossIndication(sender: 1, media: 99), arrivedAtCompactNTP: 0)
        #expect(s.keyframeLayers == 0)
    }

    @Test func receiverReportsGiveLossJitterAndRoundTrip() {
        var s = state()
        // SR sent at compact NTP 0x10000 (1 s); the receiver held it 0.5 s; it arrives at 2 s → RTT 0.5 s.
        let block = ReceptionReport(ssrc: 20, fractionLost: 64, cumulativeLost: 12, highestSequence: 500,
                                    jitter: 900, lastSenderReport: 0x10000, delaySinceLastSenderReport: 0x8000)
        _ = s.handle(.receiverReport(ssrc: 7, reports: [block]), arrivedAtCompactNTP: 0x20000)
        let r = s.reception[1]
        #expect(r.packetsLost == 12 && r.fractionLost == 0.25)
        #expect(abs(r.jitter - 0.01) < 1e-9)
        #expect(r.roundTripTime == 0.5)
        #expect(s.bitrate.target < 1_000_000)   // 25 % loss lowers the video bitrate
    }

    @Test func rembCapsTheBitrateAndACleanPathClimbsBack() {
        var controller = BitrateController(maximum: 2_000_000)
        controller.estimatedMaximum(500_000)
        #expect(controller.target == 500_000)
        controller.reportedLoss(0)
        #expect(controller.target == 500_000)   // REMB still caps it
        controller.estimatedMaximum(3_000_000)
        for _ in 0..<30 { controller.reportedLoss(0) }
        #expect(controller.target == 2_000_000)   // never above the configured maximum
        for _ in 0..<30 { controller.reportedLoss(0.5) }
        #expect(controller.target == 100_000)     // nor below the floor
    }

    @Test func byeFromThePeerEndsTheSession() {
        var s = state()
        let fromPeer = s.handle(.bye(ssrcs: [77]), arrivedAtCompactNTP: 0)
        let echoed = s.handle(.bye(ssrcs: [20]), arrivedAtCompactNTP: 0)
        #expect(fromPeer)
        #expect(!echoed)   // our own SSRC echoed: not the peer leaving
    }
}

@Suite("preferredFrameRate (FrameRateChoice)")
struct FrameRateChoiceTests {
    /// Frames 1/30 s apart, alternating layers; which got through.
    func admitted(preferring rate: Double?, frames: Int = 12, gap: UInt32 = 3000) -> [Int] {
        var choice = FrameRateChoice()
        choice.preferred = rate
        return (0..<frames).filter { n in choice.admits(layer: UInt8(n % 2), rtpTimestamp: UInt32.max - 5000 &+ UInt32(n) * gap) }
    }

    @Test func theHighestRateNotAboveThePreferredOne() {
        #expect(admitted(preferring: nil).count == 12)
        #expect(admitted(preferring: 30).count == 12)
        #expect(admitted(preferring: 28).count == 12, "29.5 or 30: within the measurement's slack")
        // Below the full rate: the base layer (the first frame goes before any rate is known).
        #expect(admitted(preferring: 25) == [0, 2, 4, 6, 8, 10])
        #expect(admitted(preferring: 5) == [0, 2, 4, 6, 8, 10], "the base layer is the least there is")
        // A 15 fps stream (6000 ticks apart) is all a 15 fps wish asks for.
        #expect(admitted(preferring: 15, gap: 6000).count == 12)
    }

    @Test func aPauseIsNotAFrameRate() {
        var choice = FrameRateChoice()
        choice.preferred = 20
        _ = choice.admits(layer: 0, rtpTimestamp: 0)
        _ = choice.admits(layer: 0, rtpTimestamp: 3000)
        _ = choice.admits(layer: 0, rtpTimestamp: 3000 + 5 * 90_000)   // the camera was away for 5 s
        #expect(choice.fullRate == 30)
        let upper = choice.admits(layer: 1, rtpTimestamp: 3000 + 5 * 90_000 + 3000)
        #expect(!upper)
    }
}
