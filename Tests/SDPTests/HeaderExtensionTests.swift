import SDP
import Testing

@Suite("Video orientation (CVO) in offers and answers")
struct HeaderExtensionTests {
    static let offer = PublisherOffer(iceUfrag: "u", icePwd: "p", fingerprint: "AA:BB", candidates: [],
                                      audio: [.opus], video: [.vp8], audioSSRC: 1, videoSSRC: 2, cname: "c")

    static func answer(extmap: String?) throws -> SessionDescription {
        try SessionDescription(parsing: """
            v=0
            o=- 1 2 IN IP4 127.0.0.1
            s=-
            t=0 0
            a=group:BUNDLE 0 1
            m=audio 9 UDP/TLS/RTP/SAVPF 111
            c=IN IP4 0.0.0.0
            a=ice-ufrag:srv
            a=ice-pwd:serverpasswordserverpw
            a=fingerprint:sha-256 11:22
            a=setup:active
            a=mid:0
            a=recvonly
            a=rtcp-mux
            a=rtpmap:111 opus/48000/2
            m=video 9 UDP/TLS/RTP/SAVPF 96
            c=IN IP4 0.0.0.0
            a=mid:1
            a=recvonly
            a=rtcp-mux
            a=rtpmap:96 VP8/90000
            \(extmap.map { "a=extmap:\($0)" } ?? "a=rtcp-fb:96 nack")

            """.replacingOccurrences(of: "\n", with: "\r\n"))
    }

    @Test func theOfferCarriesCVOOnVideoOnlyWhenAsked() {
        #expect(!Self.offer.sessionDescription(sessionID: 1).text.contains("extmap"))
        var offer = Self.offer
        offer.videoOrientationExtensionID = 3
        let text = offer.sessionDescription(sessionID: 1)
        let video = text.media.first { $0.kind == "video" }, audio = text.media.first { $0.kind == "audio" }
        #expect(video?.values("extmap") == ["3 urn:3gpp:video-orientation"])
        #expect(audio?.values("extmap") == [])
    }

    @Test func theAnswerSaysWhetherThePeerTookIt() throws {
        var offer = Self.offer
        offer.videoOrientationExtensionID = 3
        #expect(try PublisherAnswer(Self.answer(extmap: "3 urn:3gpp:video-orientation"), to: offer)
            .videoOrientationExtensionID == 3)
        // An answerer may map it under a direction suffix; the id is what counts.
        #expect(try PublisherAnswer(Self.answer(extmap: "5/recvonly urn:3gpp:video-orientation"), to: offer)
            .videoOrientationExtensionID == 5)
        #expect(try PublisherAnswer(Self.answer(extmap: nil), to: offer).videoOrientationExtensionID == nil)
        #expect(try PublisherAnswer(Self.answer(extmap: "3 urn:ietf:params:rtp-hdrext:sdes:mid"), to: offer)
            .videoOrientationExtensionID == nil)
        // Not offered: an answer that names it anyway is not believed.
        #expect(try PublisherAnswer(Self.answer(extmap: "3 urn:3gpp:video-orientation"), to: Self.offer)
            .videoOrientationExtensionID == nil)
        // Two-byte ids (15 and up) cannot carry it in the one-byte form.
        #expect(try PublisherAnswer(Self.answer(extmap: "15 urn:3gpp:video-orientation"), to: offer)
            .videoOrientationExtensionID == nil)
    }

    @Test func aViewersOfferIsEchoedInTheAnswer() throws {
        let text = ViewerOfferAnswerTests.browserOffer.replacingOccurrences(
            of: "a=rtpmap:96 VP8/90000", with: "a=extmap:13 urn:3gpp:video-orientation\na=rtpmap:96 VP8/90000")
        let offer = try ViewerOffer(try SessionDescription(parsing: text.replacingOccurrences(of: "\n", with: "\r\n")))
        let section = try #require(offer.sections.firstIndex { $0.kind == "video" })
        #expect(offer.sections[section].videoOrientationExtensionID == 13)
        let codec = try #require(offer.accepting("video", codec: .vp8)).codec
        let answer = ViewerAnswer(iceUfrag: "u", icePwd: "p", fingerprint: "AA", setup: "passive", candidates: [],
                                  tracks: [.init(sectionIndex: section, codec: codec, ssrc: 7, videoOrientationExtensionID: 13)],
                                  cname: "c").sessionDescription(answering: offer, sessionID: 1)
        #expect(answer.media[section].values("extmap") == ["13 urn:3gpp:video-orientation"])
        // A viewer that does not offer it gets none.
        let plain = try ViewerOffer(try SessionDescription(
            parsing: ViewerOfferAnswerTests.browserOffer.replacingOccurrences(of: "\n", with: "\r\n")))
        #expect(plain.sections.allSatisfy { $0.videoOrientationExtensionID == nil })
    }
}
