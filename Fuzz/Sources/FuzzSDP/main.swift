// SDP: SessionDescription(parsing:) on any text, then what the agent does with
// a parsed description: a viewer's (WHEP) or routed publisher's offer through
// ViewerOffer and an answer to it, a WHIP server's answer through
// PublisherAnswer, and every candidate line through ICECandidate.
import FuzzSupport
import SDP

private let ourOffer = PublisherOffer(
    iceUfrag: "ufrag", icePwd: "passwordpasswordpassword", fingerprint: "AB:CD", candidates: [],
    audio: [.opus], video: [.vp8, .h264], audioSSRC: 1, videoSSRC: 2, cname: "fuzz")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: bytes(data, size), as: UTF8.self)
    guard let parsed = try? SessionDescription(parsing: text) else { return 0 }

    // What we write, we read back the same: text → parse is a fixed point after one round.
    let again: SessionDescription
    do { again = try SessionDescription(parsing: parsed.text) } catch {
        fatalError("our own text of a parsed description does not parse: \(error)\n\(parsed.text)")
    }
    check(again == parsed, "round trip changed the description:\n\(parsed.text)\n---\n\(again.text)")

    for value in parsed.media.flatMap({ $0.values("candidate") }) {
        guard let candidate = ICECandidate(parsing: value) else { continue }
        guard let back = ICECandidate(parsing: candidate.attributeValue) else {
            fatalError("our candidate line does not parse: \(candidate.attributeValue)")
        }
        check(back.address == candidate.address && back.port == candidate.port && back.priority == candidate.priority
              && back.type == candidate.type && back.foundation == candidate.foundation,
              "candidate round trip: \(candidate) → \(back)")
    }

    if let offer = try? ViewerOffer(parsed) {
        var tracks: [ViewerAnswer.Track] = []
        if let video = offer.accepting("video", codec: .vp8) ?? offer.accepting("video", codec: .h264) {
            tracks.append(.init(sectionIndex: video.index, codec: video.codec, ssrc: 2))
        }
        if let audio = offer.accepting("audio", codec: .opus) {
            tracks.append(.init(sectionIndex: audio.index, codec: audio.codec, ssrc: 1))
        }
        _ = offer.accepting("video", codec: .vp8, receiving: true)
        _ = offer.accepting("video", codec: .h264)   // its fmtp read even where VP8 was taken
        let answer = ViewerAnswer(iceUfrag: "ufrag", icePwd: "passwordpasswordpassword", fingerprint: "AB:CD",
                                  setup: ViewerAnswer.setup(answering: offer.setup), candidates: [],
                                  tracks: tracks, cname: "fuzz")
        let description = answer.sessionDescription(answering: offer, sessionID: 1)
        do { _ = try SessionDescription(parsing: description.text) } catch {
            fatalError("our answer does not parse: \(error)\n\(description.text)")
        }
    }
    _ = try? PublisherAnswer(parsed, to: ourOffer)
    return 0
}

runFuzzer()
