import SDP
import Testing

@Suite("ICE credentials beyond RFC 8839's 256 characters are refused")
struct ICECredentialTests {
    /// A 70,000-character ufrag in a WHIP answer reached the ICE agent, whose first
    /// connectivity check then trapped: USERNAME ("theirs:ours") outgrew a STUN attribute's
    /// 16-bit length. Whoever answers the offer (or sits on a plain-http path) could do it.
    @Test(arguments: [(256, 22, true), (257, 22, false), (70_000, 22, false), (4, 256, true), (4, 257, false)])
    func aPublishersAnswer(ufragLength: Int, passwordLength: Int, accepted: Bool) throws {
        let text = try HeaderExtensionTests.answer(extmap: nil).text
            .replacingOccurrences(of: "a=ice-ufrag:srv", with: "a=ice-ufrag:" + String(repeating: "A", count: ufragLength))
            .replacingOccurrences(of: "a=ice-pwd:serverpasswordserverpw", with: "a=ice-pwd:" + String(repeating: "p", count: passwordLength))
        let description = try SessionDescription(parsing: text)
        if accepted {
            #expect(try PublisherAnswer(description, to: HeaderExtensionTests.offer).iceUfrag.count == ufragLength)
        } else {
            #expect(throws: SDPError.self) { try PublisherAnswer(description, to: HeaderExtensionTests.offer) }
        }
    }

    @Test func aViewersOffer() throws {
        let long = ViewerOfferAnswerTests.browserOffer
            .replacingOccurrences(of: "a=ice-ufrag:", with: "a=ice-ufrag:" + String(repeating: "A", count: 300))
            .replacingOccurrences(of: "\n", with: "\r\n")
        #expect(throws: SDPError.self) { try ViewerOffer(try SessionDescription(parsing: long)) }
        #expect(throws: Never.self) {
            try ViewerOffer(try SessionDescription(parsing: ViewerOfferAnswerTests.browserOffer.replacingOccurrences(of: "\n", with: "\r\n")))
        }
    }
}
