/// An ICE candidate line (RFC 8839 §5.1): `candidate:<foundation> <component>
/// <transport> <priority> <address> <port> typ <type> [raddr .. rport ..] ...`.
public struct ICECandidate: Hashable, Sendable {
    public var foundation: String
    public var component: Int
    public var transport: String
    /// RFC 8445 §5.1.2.1; ICE computes it (`ICELocalCandidate.priority`), SDP only carries it.
    public var priority: UInt32
    public var address: String
    public var port: Int
    public var type: String          // host, srflx, prflx, relay
    /// raddr/rport: the base a server-reflexive candidate was learned from
    /// (RFC 8839 requires them on every candidate that is not host).
    public var relatedAddress: String?
    public var relatedPort: Int?

    public init(foundation: String, component: Int = 1, transport: String = "udp", priority: UInt32,
                address: String, port: Int, type: String = "host", relatedAddress: String? = nil, relatedPort: Int? = nil) {
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.type = type
    }

    /// The value of an `a=candidate:` attribute (or a trickled "candidate:..." line).
    public init?(parsing text: String) {
        let value = text.hasPrefix("candidate:") ? String(text.dropFirst("candidate:".count)) : text
        let f = value.split(separator: " ").map(String.init)
        guard f.count >= 8, f[6] == "typ", let component = Int(f[1]), let priority = UInt32(f[3]),
              let port = Int(f[5]), (0...65535).contains(port) else { return nil }
        self.init(foundation: f[0], component: component, transport: f[2].lowercased(), priority: priority,
                  address: f[4], port: port, type: f[7])
        if let i = f.firstIndex(of: "raddr"), i + 1 < f.count { relatedAddress = f[i + 1] }
        if let i = f.firstIndex(of: "rport"), i + 1 < f.count { relatedPort = Int(f[i + 1]) }
    }

    public var attributeValue: String {
        var text = "\(foundation) \(component) \(transport) \(priority) \(address) \(port) typ \(type)"
        if let relatedAddress, let relatedPort { text += " raddr \(relatedAddress) rport \(relatedPort)" }
        return text
    }
}

/// What a publisher puts in its offer.
public struct PublisherOffer: Sendable {
    public var iceUfrag: String
    public var icePwd: String
    /// SHA-256 of the DTLS certificate, as upper-case hex pairs joined by ':'.
    public var fingerprint: String
    public var candidates: [ICECandidate]
    public var audio: [CodecDescription]
    public var video: [CodecDescription]
    public var audioSSRC: UInt32
    public var videoSSRC: UInt32
    public var cname: String
    public var streamID: String
    /// The id to offer urn:3gpp:video-orientation under (nil: not offered).
    public var videoOrientationExtensionID: UInt8?
    /// Simulcast: every video SSRC, from the smallest layer to the largest
    /// (`videoSSRC` among them), announced as `a=ssrc-group:SIM`; empty: one layer.
    public var videoSimulcastSSRCs: [UInt32] = []
    /// The id the publisher offers CVO under.
    public static let defaultVideoOrientationID: UInt8 = 3
    /// "sendonly" for a publisher (WHIP); "recvonly" for a subscriber
    /// (WHEP), whose offer then carries no SSRC or msid of its own.
    public var direction = "sendonly"

    public init(iceUfrag: String, icePwd: String, fingerprint: String, candidates: [ICECandidate],
                audio: [CodecDescription], video: [CodecDescription], audioSSRC: UInt32, videoSSRC: UInt32,
                cname: String, streamID: String = "camagent") {
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.fingerprint = fingerprint
        self.candidates = candidates
        self.audio = audio
        self.video = video
        self.audioSSRC = audioSSRC
        self.videoSSRC = videoSSRC
        self.cname = cname
        self.streamID = streamID
    }

    /// The offer: one BUNDLEd transport, rtcp-mux, audio (mid 0) and video
    /// (mid 1) in `direction` where there are codecs for them, all candidates
    /// given up front (WHIP and WHEP without trickle), DTLS role left to the
    /// answerer (actpass).
    public func sessionDescription(sessionID: UInt64) -> SessionDescription {
        var sections: [(String, [CodecDescription], UInt32)] = []
        if !audio.isEmpty { sections.append(("audio", audio, audioSSRC)) }
        if !video.isEmpty { sections.append(("video", video, videoSSRC)) }
        let mids = sections.indices.map(String.init)
        let sends = direction != "recvonly"
        var session = SessionDescription(sessionID: sessionID, sessionName: "camagent", attributes: [
            SDPAttribute("group", "BUNDLE " + mids.joined(separator: " ")),
        ])
        if sends { session.attributes.append(SDPAttribute("msid-semantic", " WMS \(streamID)")) }
        for (index, (kind, codecs, ssrc)) in sections.enumerated() {
            var m = MediaDescription(kind: kind, formats: [], attributes: [
                SDPAttribute("rtcp", "9 IN IP4 0.0.0.0"),
                SDPAttribute("ice-ufrag", iceUfrag), SDPAttribute("ice-pwd", icePwd),
                SDPAttribute("fingerprint", "sha-256 \(fingerprint)"), SDPAttribute("setup", "actpass"),
                SDPAttribute("mid", mids[index]), SDPAttribute(direction),
            ])
            if sends { m.attributes.append(SDPAttribute("msid", "\(streamID) \(streamID)-\(kind)")) }
            m.attributes.append(SDPAttribute("rtcp-mux"))
            for codec in codecs { m.add(codec) }
            if kind == "video", let id = videoOrientationExtensionID {
                m.attributes.append(HeaderExtensions.attribute(id: id, uri: HeaderExtensions.videoOrientation))
            }
            if sends, kind == "video", videoSimulcastSSRCs.count > 1 {
                for layer in videoSimulcastSSRCs { m.attributes.append(SDPAttribute("ssrc", "\(layer) cname:\(cname)")) }
                m.attributes.append(SDPAttribute("ssrc-group", "SIM " + videoSimulcastSSRCs.map(String.init).joined(separator: " ")))
            } else if sends {
                m.attributes.append(SDPAttribute("ssrc", "\(ssrc) cname:\(cname)"))
            }
            for c in candidates { m.attributes.append(SDPAttribute("candidate", c.attributeValue)) }
            m.attributes.append(SDPAttribute("end-of-candidates"))
            session.media.append(m)
        }
        return session
    }
}

/// What a publisher needs from the answer, checked.
public struct PublisherAnswer: Hashable, Sendable {
    public var iceUfrag: String
    public var icePwd: String
    public var iceLite: Bool
    /// The peer's certificate fingerprint: algorithm and hex, as in the SDP.
    public var fingerprintAlgorithm: String
    public var fingerprint: String
    /// "active", "passive" or "actpass" as the answerer chose.
    public var setup: String
    public var candidates: [ICECandidate]
    /// The codec each side will use, nil where the answer rejected the section.
    public var audio: CodecDescription?
    public var video: CodecDescription?
    /// The id under which the answer took urn:3gpp:video-orientation (nil: it did not).
    public var videoOrientationExtensionID: UInt8?

    /// Reads an answer to `offer`. The codec chosen for each section is the
    /// first of the answer's (its preference) that matches one offered, sent
    /// with the answer's payload type.
    public init(_ answer: SessionDescription, to offer: PublisherOffer) throws(SDPError) {
        guard let first = answer.media.first else { throw .missing("media section") }
        guard let ufrag = answer.value("ice-ufrag", in: first), let pwd = answer.value("ice-pwd", in: first),
              !ufrag.isEmpty, !pwd.isEmpty else {
            throw .missing("ICE credentials (a=ice-ufrag, a=ice-pwd)")
        }
        guard ICECredentials.areWithinLimits(ufrag: ufrag, password: pwd) else { throw ICECredentials.beyondLimits }
        guard let fp = answer.value("fingerprint", in: first) else { throw .missing("DTLS fingerprint (a=fingerprint)") }
        let fpParts = fp.split(separator: " ", maxSplits: 1)
        guard fpParts.count == 2 else { throw .missing("DTLS fingerprint value") }
        iceUfrag = ufrag
        icePwd = pwd
        iceLite = answer.isICELite
        fingerprintAlgorithm = fpParts[0].lowercased()
        fingerprint = fpParts[1].uppercased()
        setup = answer.value("setup", in: first) ?? "active"
        candidates = answer.media.flatMap { $0.values("candidate") }.compactMap(ICECandidate.init(parsing:))
            + answer.attributes.filter { $0.name == "candidate" }.compactMap { $0.value.flatMap(ICECandidate.init(parsing:)) }
        // The answer's direction mirrors the offer's: a publisher's sendonly
        // is answered recvonly, a subscriber's recvonly sendonly.
        let mirrored = offer.direction == "recvonly" ? "sendonly" : "recvonly"
        func chosen(_ kind: String, _ offered: [CodecDescription]) -> CodecDescription? {
            guard let m = answer.media.first(where: { $0.kind == kind }), m.port != 0,
                  m.direction == mirrored || m.direction == "sendrecv" else { return nil }
            return m.codecs.first { c in offered.contains { $0.matches(c) } }
        }
        audio = chosen("audio", offer.audio)
        video = chosen("video", offer.video)
        if video != nil, offer.videoOrientationExtensionID != nil,
           let m = answer.media.first(where: { $0.kind == "video" }) {
            videoOrientationExtensionID = HeaderExtensions.id(of: HeaderExtensions.videoOrientation, in: m)
        }
        guard audio != nil || video != nil else { throw .missing("codec in common with the offer") }
    }
}
