import Foundation
import SDP
import Testing

@Suite("WHEP: a viewer's offer and the agent's answer")
struct ViewerOfferAnswerTests {
    /// A browser-shaped recvonly offer: video first, several codecs with the
    /// browser's own payload types, an H.264 baseline and a High profile,
    /// session-level fingerprint, no candidates (they trickle, or come as
    /// peer-reflexive), a data channel section we do not serve.
    static let browserOffer = """
        v=0
        o=- 4611731400430051336 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1 2
        a=fingerprint:sha-256 1a:2b:3c:4d
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 108
        c=IN IP4 0.0.0.0
        a=ice-ufrag:Br0w
        a=ice-pwd:browserpasswordbrowserpw
        a=setup:actpass
        a=mid:0
        a=recvonly
        a=rtcp-mux
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 H264/90000
        a=fmtp:103 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtcp-fb:103 nack
        a=rtcp-fb:103 nack pli
        a=rtpmap:108 H264/90000
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=640c1f
        m=audio 9 UDP/TLS/RTP/SAVPF 111 63
        c=IN IP4 0.0.0.0
        a=ice-ufrag:Br0w
        a=ice-pwd:browserpasswordbrowserpw
        a=setup:actpass
        a=mid:1
        a=recvonly
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        m=application 9 UDP/DTLS/SCTP webrtc-datachannel
        c=IN IP4 0.0.0.0
        a=mid:2
        a=sctp-port:5000

        """

    static func answer(_ offer: ViewerOffer, video: CodecDescription = .vp8) -> (text: String, parsed: SessionDescription) {
        var tracks: [ViewerAnswer.Track] = []
        // Audio first, as the publisher lists them; the offer has video first.
        if let a = offer.accepting("audio", codec: .opus) { tracks.append(.init(sectionIndex: a.index, codec: a.codec, ssrc: 11)) }
        if let v = offer.accepting("video", codec: video) { tracks.append(.init(sectionIndex: v.index, codec: v.codec, ssrc: 22)) }
        let answer = ViewerAnswer(
            iceUfrag: "srv1", icePwd: "serverpasswordserverpass", fingerprint: "AA:BB",
            setup: ViewerAnswer.setup(answering: offer.setup),
            candidates: [ICECandidate(foundation: "1", priority: 2130706431, address: "10.77.0.1", port: 40000)],
            tracks: tracks, cname: "cam")
        let text = answer.sessionDescription(answering: offer, sessionID: 7).text
        return (text, try! SessionDescription(parsing: text))
    }

    @Test func readsWhatTheAnswerNeeds() throws {
        let offer = try ViewerOffer(try SessionDescription(parsing: Self.browserOffer))
        #expect(offer.iceUfrag == "Br0w" && offer.icePwd == "browserpasswordbrowserpw")
        #expect(offer.fingerprintAlgorithm == "sha-256" && offer.fingerprint == "1A:2B:3C:4D")
        #expect(offer.setup == "actpass" && offer.candidates.isEmpty)
        #expect(offer.sections.map(\.kind) == ["video", "audio", "application"])
        #expect(offer.sections.map(\.mid) == ["0", "1", "2"])
        #expect(offer.sections[0].wantsMedia && !offer.sections[2].wantsMedia)
    }

    @Test func picksTheViewersPayloadTypesAndSharedFeedback() throws {
        let offer = try ViewerOffer(try SessionDescription(parsing: Self.browserOffer))
        let vp8 = try #require(offer.accepting("video", codec: .vp8))
        #expect(vp8.index == 0 && vp8.codec.payloadType == 96)
        #expect(vp8.codec.feedback == ["nack", "nack pli", "ccm fir", "goog-remb"])
        // Constrained baseline (42e0), not baseline (4200) or High (640c).
        let h264 = try #require(offer.accepting("video", codec: .h264))
        #expect(h264.codec.payloadType == 103 && h264.codec.feedback == ["nack", "nack pli"])
        let opus = try #require(offer.accepting("audio", codec: .opus))
        #expect(opus.index == 1 && opus.codec.payloadType == 111)
    }

    @Test func answerMirrorsSectionsAndRejectsTheRest() throws {
        let offer = try ViewerOffer(try SessionDescription(parsing: Self.browserOffer))
        let (text, parsed) = Self.answer(offer)
        #expect(parsed.isICELite)
        // The offer's order, whatever order the tracks were given in: the tag comes first.
        #expect(parsed.value("group") == "BUNDLE 0 1")
        #expect(parsed.media.map(\.kind) == ["video", "audio", "application"])
        let video = parsed.media[0], audio = parsed.media[1], data = parsed.media[2]
        #expect(video.formats == ["96"] && video.direction == "sendonly" && video.value("mid") == "0")
        #expect(audio.formats == ["111"] && audio.direction == "sendonly" && audio.value("mid") == "1")
        #expect(data.port == 0 && data.value("mid") == "2")
        for line in ["a=setup:passive", "a=fingerprint:sha-256 AA:BB", "a=ssrc:22 cname:cam", "a=ssrc:11 cname:cam",
                     "a=candidate:1 1 udp 2130706431 10.77.0.1 40000 typ host", "a=rtcp-mux", "a=end-of-candidates"] {
            #expect(text.contains(line + "\r\n"), "answer lacks \(line)")
        }
    }

    @Test func aViewerThatWantsToBeTheDTLSServerMakesUsTheClient() {
        #expect(ViewerAnswer.setup(answering: "actpass") == "passive")
        #expect(ViewerAnswer.setup(answering: "active") == "passive")
        #expect(ViewerAnswer.setup(answering: "passive") == "active")
    }

    @Test func aSectionWithoutOurCodecIsNotAccepted() throws {
        let vp9Only = Self.browserOffer
            .replacingOccurrences(of: "96 97 102 103 108", with: "98")
            .replacingOccurrences(of: "a=rtpmap:96 VP8/90000", with: "a=rtpmap:98 VP9/90000")
        let offer = try ViewerOffer(try SessionDescription(parsing: vp9Only))
        #expect(offer.accepting("video", codec: .vp8) == nil)
        let (_, parsed) = Self.answer(offer)
        // Answered inactive, not rejected (aiortc refuses port 0), with what
        // aiortc checks in every section: ICE credentials, DTLS role, rtcp-mux, a codec.
        let idle = parsed.media[0]
        #expect(idle.port != 0 && idle.direction == "inactive" && parsed.value("group") == "BUNDLE 0 1")
        #expect(idle.value("ice-ufrag") == "srv1" && idle.value("ice-pwd") == "serverpasswordserverpass")
        #expect(idle.value("setup") == "passive" && idle.attributes.contains { $0.name == "rtcp-mux" })
        #expect(idle.codecs.map(\.name) == ["VP9"] && idle.values("ssrc").isEmpty)
        // And the candidates: as the BUNDLE tag, its transport is the one aiortc connects, with
        // this section's candidates only (an H.264-only viewer of a VP8 stream never connected).
        #expect(idle.values("candidate") == parsed.media[1].values("candidate") && !idle.values("candidate").isEmpty)
        #expect(idle.attributes.contains { $0.name == "end-of-candidates" })
    }

    @Test(arguments: [
        ("no media", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"),
        ("no ICE", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=fingerprint:sha-256 AA\r\n"),
        ("no fingerprint", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=ice-ufrag:a\r\na=ice-pwd:b\r\n"),
        ("only data", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=ice-ufrag:a\r\na=ice-pwd:b\r\na=fingerprint:sha-256 AA\r\n"),
    ])
    func offersMissingEssentialsAreErrors(_ name: String, _ text: String) throws {
        let sdp = try SessionDescription(parsing: text)
        #expect(throws: SDPError.self, "\(name)") { try ViewerOffer(sdp) }
    }

    /// The router's side of WHIP: a publisher offers to send; the answer
    /// receives what it forwards and says nothing of SSRCs of its own.
    @Test func aPublishersOfferIsAnsweredReceiveOnly() throws {
        let sending = Self.browserOffer.replacingOccurrences(of: "a=recvonly", with: "a=sendonly")
        let offer = try ViewerOffer(try SessionDescription(parsing: sending))
        #expect(offer.accepting("video", codec: .vp8) == nil)   // it wants nothing
        let video = try #require(offer.accepting("video", codec: .vp8, receiving: true))
        let audio = try #require(offer.accepting("audio", codec: .opus, receiving: true))
        #expect(video.codec.payloadType == 96 && audio.codec.payloadType == 111)
        let answer = ViewerAnswer(
            iceUfrag: "srv1", icePwd: "serverpasswordserverpass", fingerprint: "AA:BB", setup: "passive",
            candidates: [], tracks: [.init(sectionIndex: video.index, codec: video.codec, ssrc: 0),
                                     .init(sectionIndex: audio.index, codec: audio.codec, ssrc: 0)],
            cname: "router", streamID: "s1", direction: "recvonly")
        let parsed = answer.sessionDescription(answering: offer, sessionID: 9)
        #expect(parsed.media.map(\.direction) == ["recvonly", "recvonly", "inactive"])
        #expect(parsed.media.allSatisfy { $0.values("ssrc").isEmpty && $0.values("msid").isEmpty })
        #expect(parsed.media[0].codecs.map(\.name) == ["VP8"])
    }
}
