import RTP
import Testing

@Suite("RTCP (RFC 3550, 4585, 5104, REMB)")
struct RTCPTests {
    func roundTrip(_ packets: [RTCPPacket]) throws -> [RTCPPacket] {
        var bytes: [UInt8] = []
        for p in packets { p.write(to: &bytes) }
        #expect(bytes.count % 4 == 0)
        return try RTCPPacket.parseCompound(bytes[...])
    }

    @Test func pictureLossIndicationBytes() {
        var bytes: [UInt8] = []
        RTCPPacket.pictureLossIndication(sender: 1, media: 0x0a0b_0c0d).write(to: &bytes)
        // V=2 FMT=1, PT=206, length 2 words after the header.
        #expect(bytes == [0x81, 0xce, 0x00, 0x02, 0, 0, 0, 1, 0x0a, 0x0b, 0x0c, 0x0d])
    }

    @Test func compoundSenderReportSourceDescriptionBye() throws {
        var sr = SenderReport(ssrc: 0x1234_5678, ntpTimestamp: 0xe000_0000_8000_0000, rtpTimestamp: 90_000,
                              packetCount: 10, octetCount: 12_000)
        sr.reports = [ReceptionReport(ssrc: 9, fractionLost: 64, cumulativeLost: -3, highestSequence: 70_000,
                                      jitter: 12, lastSenderReport: 0xabcd, delaySinceLastSenderReport: 0x10)]
        let packets: [RTCPPacket] = [.senderReport(sr), .sourceDescription(ssrc: 0x1234_5678, cname: "camagent-kiosk"),
                                     .bye(ssrcs: [0x1234_5678])]
        #expect(try roundTrip(packets) == packets)
    }

    @Test func nackCarriesLostPacketsAsPIDAndBitmask() throws {
        let lost: [UInt16] = [100, 101, 105, 117, 65535, 0]
        var bytes: [UInt8] = []
        RTCPPacket.nack(sender: 1, media: 2, lost: lost).write(to: &bytes)
        // 100 with bits for 101 and 105; 117 alone; 65535 with the bit for 0 (across the wrap).
        #expect(Array(bytes[12...]) == [0, 100, 0x00, 0x11, 0, 117, 0, 0, 0xff, 0xff, 0, 1])
        #expect(try RTCPPacket.parseCompound(bytes[...]) == [.nack(sender: 1, media: 2, lost: lost)])
    }

    @Test func firAndRembRoundTrip() throws {
        let packets: [RTCPPacket] = [.fullIntraRequest(sender: 5, media: 6, sequence: 3),
                                     .estimatedMaximumBitrate(sender: 5, bitsPerSecond: 1_500_000, ssrcs: [6, 7])]
        #expect(try roundTrip(packets) == packets)
    }

    @Test func rembKeepsEighteenBitsOfMantissa() throws {
        let parsed = try roundTrip([.estimatedMaximumBitrate(sender: 1, bitsPerSecond: 123_456_789, ssrcs: [2])])
        guard case .estimatedMaximumBitrate(_, let bps, _) = parsed[0] else { Issue.record("not REMB"); return }
        #expect(bps <= 123_456_789 && bps > 123_456_789 - (1 << 9))
    }

    @Test func roundTripTimeFromAReportBlock() {
        let block = ReceptionReport(ssrc: 1, fractionLost: 0, cumulativeLost: 0, highestSequence: 0, jitter: 0,
                                    lastSenderReport: 0x0001_0000, delaySinceLastSenderReport: 0x0000_8000)
        #expect(block.roundTripSeconds(arrivedAtCompactNTP: 0x0002_8000) == 1.0)
        var none = block
        none.lastSenderReport = 0
        #expect(none.roundTripSeconds(arrivedAtCompactNTP: 0x0002_8000) == nil)
    }

    @Test func unknownTypesAreKeptAndBrokenPacketsRefused() throws {
        // An XR (207) packet with one word of body.
        #expect(try RTCPPacket.parseCompound([0x80, 207, 0, 1, 0, 0, 0, 1][...]) == [.other(packetType: 207, format: 0)])
        #expect(throws: RTCPError.truncated) { try RTCPPacket.parseCompound([0x80, 200, 0, 6, 0, 0][...]) }
        #expect(throws: RTCPError.badVersion) { try RTCPPacket.parseCompound([0x40, 200, 0, 0][...]) }
    }
}
