import Publisher
import RTP
import SDP
import Testing

@Suite("Subscriber offer and reception reports")
struct SubscriberSDPTests {
    @Test("a recvonly offer carries no SSRC or msid, and its sendonly answer is read")
    func recvonlyOffer() throws {
        var offer = PublisherOffer(iceUfrag: "ufrag", icePwd: "pwd0123456789012345678", fingerprint: "AB:CD",
                                   candidates: [], audio: [.opus], video: [.vp8, .h264], audioSSRC: 0, videoSSRC: 0,
                                   cname: "c", streamID: "s")
        offer.direction = "recvonly"
        let text = offer.sessionDescription(sessionID: 1).text
        #expect(text.contains("a=recvonly"))
        #expect(!text.contains("a=ssrc:") && !text.contains("a=msid") && !text.contains("a=sendonly"))
        let answerText = text
            .replacingOccurrences(of: "a=recvonly", with: "a=sendonly")
            .replacingOccurrences(of: "a=setup:actpass", with: "a=setup:passive")
        let answer = try PublisherAnswer(try SessionDescription(parsing: answerText), to: offer)
        #expect(answer.video?.name == "VP8" && answer.audio?.name == "opus")

        // A recvonly answer to a recvonly offer has nothing to send us.
        #expect(throws: SDPError.self) { try PublisherAnswer(try SessionDescription(parsing: text), to: offer) }
    }

    @Test("a publisher's offer is still sendonly with its SSRCs")
    func sendonlyOffer() {
        let offer = PublisherOffer(iceUfrag: "u", icePwd: "p", fingerprint: "AB", candidates: [], audio: [.opus],
                                   video: [.vp8], audioSSRC: 11, videoSSRC: 22, cname: "c", streamID: "s")
        let text = offer.sessionDescription(sessionID: 1).text
        #expect(text.contains("a=sendonly") && text.contains("a=ssrc:22 cname:c") && text.contains("a=msid:s s-video"))
    }

    @Test("receiver reports echo the last sender report and measure jitter")
    func receptionReport() {
        var counter = ReceptionCounter(ssrc: 5, firstSequence: 100)
        for i in 0..<10 {
            counter.count(sequence: UInt16(100 + i))
            counter.noteArrival(timestamp: UInt32(i * 3000), arrival: Double(i) / 30, clockRate: 90_000)
        }
        counter.noteSenderReport(ntpTimestamp: 0x1122_3344_5566_7788, arrival: 1.0)
        let report = counter.report(now: 1.5)
        #expect(report.lastSenderReport == 0x3344_5566)
        #expect(report.delaySinceLastSenderReport == 32768)   // 0.5 s in 1/65536 s
        #expect(report.jitter <= 1, "packets on time: no jitter")
        #expect(report.cumulativeLost == 0 && report.highestSequence == 109)

        var late = ReceptionCounter(ssrc: 6, firstSequence: 0)
        for i in 0..<20 {
            late.count(sequence: UInt16(i))
            late.noteArrival(timestamp: UInt32(i * 3000), arrival: Double(i) / 30 + (i % 2 == 0 ? 0 : 0.01), clockRate: 90_000)
        }
        #expect(late.jitterSeconds(clockRate: 90_000) > 0.004, "10 ms of alternating delay shows as jitter")
    }
}
