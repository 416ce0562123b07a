import Foundation
import SDP
import Testing

@Suite("SDP offer and answer")
struct SDPTests {
    static let offer = PublisherOffer(
        iceUfrag: "Ab12", icePwd: "0123456789abcdefghijkl", fingerprint: "AA:BB:CC",
        candidates: [ICECandidate(foundation: "1", priority: 2_130_706_431,  // host, local preference 65535
                                  address: "192.168.1.20", port: 50000)],
        audio: [.opus], video: [.vp8, .h264], audioSSRC: 1111, videoSSRC: 2222, cname: "kiosk-1")

    /// An answer as a full-ICE server would write it: its own payload type
    /// numbers, H.264 preferred, credentials at media level, LF line ends.
    static let answerText = """
        v=0
        o=- 3920000000 3920000000 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        m=audio 40000 UDP/TLS/RTP/SAVPF 109
        c=IN IP4 10.0.0.5
        a=mid:0
        a=recvonly
        a=rtcp-mux
        a=rtpmap:109 opus/48000/2
        a=candidate:0a1b 1 UDP 2122252543 10.0.0.5 40000 typ host
        a=ice-ufrag:srv1
        a=ice-pwd:serverpasswordserverpass
        a=fingerprint:sha-256 12:34:AB:cd
        a=setup:active
        m=video 40000 UDP/TLS/RTP/SAVPF 102 120
        c=IN IP4 10.0.0.5
        a=mid:1
        a=recvonly
        a=rtcp-mux
        a=rtpmap:102 H264/90000
        a=fmtp:102 packetization-mode=1;profile-level-id=42e034
        a=rtcp-fb:102 nack pli
        a=rtpmap:120 VP8/90000
        a=ice-ufrag:srv1
        a=ice-pwd:serverpasswordserverpass
        a=fingerprint:sha-256 12:34:AB:cd
        a=setup:active

        """

    @Test func offerCarriesWhatWHIPServersNeed() throws {
        let text = Self.offer.sessionDescription(sessionID: 42).text
        #expect(text.hasPrefix("v=0\r\no=- 42 2 IN IP4 127.0.0.1\r\n"))
        for line in ["a=group:BUNDLE 0 1", "m=audio 9 UDP/TLS/RTP/SAVPF 111", "m=video 9 UDP/TLS/RTP/SAVPF 96 97",
                     "a=rtpmap:96 VP8/90000", "a=rtcp-fb:96 nack pli", "a=rtcp-fb:96 ccm fir", "a=rtcp-fb:96 goog-remb",
                     "a=fmtp:97 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
                     "a=rtpmap:111 opus/48000/2", "a=setup:actpass", "a=fingerprint:sha-256 AA:BB:CC",
                     "a=sendonly", "a=rtcp-mux", "a=ssrc:2222 cname:kiosk-1",
                     "a=candidate:1 1 udp 2130706431 192.168.1.20 50000 typ host", "a=end-of-candidates"] {
            #expect(text.contains(line + "\r\n"), "offer lacks \(line)")
        }
        // What we write, we read back the same.
        let parsed = try SessionDescription(parsing: text)
        #expect(parsed == Self.offer.sessionDescription(sessionID: 42))
        #expect(parsed.media[1].codecs == [.vp8, .h264])
    }

    @Test func answerChoosesTheServersPreferredCommonCodec() throws {
        let answer = try PublisherAnswer(SessionDescription(parsing: Self.answerText), to: Self.offer)
        #expect(answer.iceUfrag == "srv1" && answer.icePwd == "serverpasswordserverpass" && !answer.iceLite)
        #expect(answer.fingerprintAlgorithm == "sha-256" && answer.fingerprint == "12:34:AB:CD")
        #expect(answer.setup == "active")
        #expect(answer.candidates == [ICECandidate(foundation: "0a1b", priority: 2_122_252_543, address: "10.0.0.5", port: 40000)])
        #expect(answer.audio?.payloadType == 109 && answer.audio?.name == "opus")
        // H.264 first in the answer, constrained baseline at another level: accepted, with the answer's PT.
        #expect(answer.video?.payloadType == 102 && answer.video?.name == "H264")
    }

    @Test func answerWithVP8OnlyAndARejectedAudioSection() throws {
        var text = Self.answerText.replacingFirst("m=audio 40000", with: "m=audio 0")
        text = text.replacingFirst("m=video 40000 UDP/TLS/RTP/SAVPF 102 120", with: "m=video 40000 UDP/TLS/RTP/SAVPF 120")
        let answer = try PublisherAnswer(SessionDescription(parsing: text), to: Self.offer)
        #expect(answer.audio == nil)
        #expect(answer.video?.name == "VP8" && answer.video?.payloadType == 120)
    }

    @Test func h264WithAnotherProfileOrModeIsNotAMatch() {
        var high = CodecDescription.h264
        high.parameters = "packetization-mode=1;profile-level-id=640c1f"
        var mode0 = CodecDescription.h264
        mode0.parameters = "profile-level-id=42e01f"
        #expect(!CodecDescription.h264.matches(high) && !CodecDescription.h264.matches(mode0))
        #expect(CodecDescription.vp8.matches(CodecDescription(payloadType: 100, name: "vp8", clockRate: 90_000)))
    }

    @Test func formatParametersThatAreOnlyAnEqualsSignAreRead() {
        // A peer's "a=fmtp:97 =" (or ";=;") once indexed past an empty split and trapped.
        var broken = CodecDescription.h264
        broken.parameters = "=;packetization-mode=1;=;profile-level-id=42e01f;x="
        #expect(broken.parameterValues == ["": "", "packetization-mode": "1", "profile-level-id": "42e01f", "x": ""])
        #expect(CodecDescription.h264.matches(broken))
    }

    @Test func brokenAnswersGetClearErrors() throws {
        #expect(throws: SDPError.missing("v= line")) { try SessionDescription(parsing: "o=- 1 1 IN IP4 0.0.0.0\n") }
        #expect(throws: SDPError.badLine(number: 2, text: "garbage")) { try SessionDescription(parsing: "v=0\ngarbage\n") }
        let noFingerprint = Self.answerText.split(separator: "\n").filter { !$0.hasPrefix("a=fingerprint") }.joined(separator: "\n")
        #expect(throws: SDPError.missing("DTLS fingerprint (a=fingerprint)")) {
            try PublisherAnswer(SessionDescription(parsing: noFingerprint), to: Self.offer)
        }
        let nothingInCommon = Self.answerText.replacingFirst("opus/48000/2", with: "PCMU/8000")
            .replacingFirst("H264/90000", with: "AV1/90000").replacingFirst("VP8/90000", with: "VP9/90000")
        #expect(throws: SDPError.missing("codec in common with the offer")) {
            try PublisherAnswer(SessionDescription(parsing: nothingInCommon), to: Self.offer)
        }
    }

    @Test func candidatesParseAndWrite() {
        let c = ICECandidate(parsing: "candidate:842163049 1 udp 1677729535 203.0.113.7 61665 typ srflx raddr 10.0.0.2 rport 61665 generation 0")
        #expect(c?.type == "srflx" && c?.address == "203.0.113.7" && c?.port == 61665 && c?.priority == 1_677_729_535)
        #expect(c?.relatedAddress == "10.0.0.2" && c?.relatedPort == 61665)
        // A server-reflexive candidate is written with its base (RFC 8839 §5.1).
        #expect(c?.attributeValue == "842163049 1 udp 1677729535 203.0.113.7 61665 typ srflx raddr 10.0.0.2 rport 61665")
        #expect(ICECandidate(parsing: "candidate:1 1 udp notanumber 1.2.3.4 5 typ host") == nil)
    }

    /// Found while writing FuzzSDP: an m= line whose port field is "/" trapped
    /// (an index out of range), so one WHIP or WHEP offer stopped the process.
    @Test func anMLineWithoutAPortIsABadLineNotACrash() throws {
        let offer = "v=0\r\no=- 1 2 IN IP4 0.0.0.0\r\ns=-\r\nm=video / UDP\r\n"
        #expect(throws: SDPError.badLine(number: 4, text: "m=video / UDP")) { try SessionDescription(parsing: offer) }
        let withCount = try SessionDescription(parsing: "v=0\no=- 1 2 IN IP4 0.0.0.0\nm=video 9/2 UDP/TLS/RTP/SAVPF 96\n")
        #expect(withCount.media.first?.port == 9)
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}
