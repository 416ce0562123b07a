/// The answering side of WHEP and of the router's WHIP: a viewer (browser,
/// aiortc) offers to receive and the agent answers as an ICE-lite, send-only
/// peer; a publisher into the router offers to send and the router answers
/// receive-only. Unlike the agent's own offer, the sections, their mids and
/// order, and the payload types are the offerer's: the answer mirrors them.
public struct ViewerOffer: Hashable, Sendable {
    public struct Section: Hashable, Sendable {
        public var kind: String
        public var mid: String?
        public var codecs: [CodecDescription]
        /// The viewer's direction (recvonly or sendrecv means it wants media).
        public var direction: String
        public var formats: [String]
        public var proto: String
        /// The id the viewer maps urn:3gpp:video-orientation to (nil: it does not).
        public var videoOrientationExtensionID: UInt8?
        /// A simulcasting offerer's SSRCs from its `a=ssrc-group:SIM` (RFC
        /// 5576's ssrc-group, with libwebrtc's SIM semantics: the smallest
        /// layer first); empty without one.
        public var simulcastSSRCs: [UInt32] = []
        /// A simulcasting offerer's RIDs (RFC 8853, as browsers simulcast):
        /// the streams of its `a=simulcast:send` that an `a=rid:… send`
        /// names, each one's first alternative, in the offer's order; empty
        /// without.
        public var simulcastRIDs: [String] = []
        /// The ids the offerer maps the RID and MID header extensions to
        /// (nil: it does not): its packets name their RID with the first.
        public var streamIDExtensionID: UInt8?
        public var midExtensionID: UInt8?
        /// An audio or video section the viewer receives on (recvonly or sendrecv).
        public var wantsMedia: Bool {
            (kind == "audio" || kind == "video") && (direction == "recvonly" || direction == "sendrecv")
        }
        /// An audio or video section the offerer sends on (sendonly or sendrecv).
        public var sendsMedia: Bool {
            (kind == "audio" || kind == "video") && (direction == "sendonly" || direction == "sendrecv")
        }
    }

    public var iceUfrag: String
    public var icePwd: String
    public var fingerprintAlgorithm: String
    public var fingerprint: String
    /// The viewer's a=setup: actpass (usual), active or passive.
    public var setup: String
    public var candidates: [ICECandidate]
    public var sections: [Section]

    /// Reads a viewer's offer; what a WHEP answer cannot do without is an error.
    public init(_ offer: SessionDescription) throws(SDPError) {
        guard let first = offer.media.first else { throw .missing("media section") }
        guard let ufrag = offer.value("ice-ufrag", in: first), let pwd = offer.value("ice-pwd", in: first),
              !ufrag.isEmpty, !pwd.isEmpty else {
            throw .missing("ICE credentials (a=ice-ufrag, a=ice-pwd)")
        }
        guard ICECredentials.areWithinLimits(ufrag: ufrag, password: pwd) else { throw ICECredentials.beyondLimits }
        guard let fp = offer.value("fingerprint", in: first) else { throw .missing("DTLS fingerprint (a=fingerprint)") }
        let parts = fp.split(separator: " ", maxSplits: 1)
        guard parts.count == 2 else { throw .missing("DTLS fingerprint value") }
        iceUfrag = ufrag
        icePwd = pwd
        fingerprintAlgorithm = parts[0].lowercased()
        fingerprint = parts[1].uppercased()
        setup = offer.value("setup", in: first) ?? "actpass"
        candidates = offer.media.flatMap { $0.values("candidate") }.compactMap(ICECandidate.init(parsing:))
            + offer.attributes.filter { $0.name == "candidate" }.compactMap { $0.value.flatMap(ICECandidate.init(parsing:)) }
        sections = offer.media.map { m in
            Section(kind: m.kind, mid: m.value("mid"), codecs: m.codecs, direction: m.direction,
                    formats: m.formats, proto: m.proto,
                    videoOrientationExtensionID: HeaderExtensions.id(of: HeaderExtensions.videoOrientation, in: m),
                    simulcastSSRCs: Self.simulcastGroup(m), simulcastRIDs: Self.simulcastRIDs(m),
                    streamIDExtensionID: HeaderExtensions.id(of: HeaderExtensions.streamID, in: m),
                    midExtensionID: HeaderExtensions.id(of: HeaderExtensions.mid, in: m))
        }
        guard sections.contains(where: { $0.kind == "audio" || $0.kind == "video" }) else {
            throw .missing("audio or video section")
        }
    }

    /// The SSRCs of a section's `a=ssrc-group:SIM` (empty: none, or not all numbers).
    static func simulcastGroup(_ m: MediaDescription) -> [UInt32] {
        for value in m.values("ssrc-group") {
            let fields = value.split(separator: " ")
            guard fields.first == "SIM", fields.count > 2 else { continue }
            let ssrcs = fields.dropFirst().compactMap { UInt32($0) }
            if ssrcs.count == fields.count - 1 { return ssrcs }
        }
        return []
    }

    /// The RIDs a section sends (`a=simulcast:send a;b,c;~d` with `a=rid:a
    /// send` and so on): each stream's first alternative, its pause mark
    /// (~) dropped, when an `a=rid` line sends it; empty when there are fewer than two.
    static func simulcastRIDs(_ m: MediaDescription) -> [String] {
        let sent = Set(m.values("rid").compactMap { value -> Substring? in
            let fields = value.split(separator: " ")
            return fields.count >= 2 && fields[1] == "send" ? fields[0] : nil
        })
        for value in m.values("simulcast") {
            let fields = value.split(separator: " ")
            guard let send = fields.firstIndex(of: "send"), send + 1 < fields.count else { continue }
            var rids: [String] = []
            for stream in fields[send + 1].split(separator: ";") {
                guard var first = stream.split(separator: ",").first else { continue }
                if first.hasPrefix("~") { first = first.dropFirst() }
                // A RID named twice is one stream.
                if sent.contains(first), !rids.contains(String(first)) { rids.append(String(first)) }
            }
            return rids.count > 1 ? rids : []
        }
        return []
    }

    /// The first section of `kind` that wants media (or, `receiving`, that
    /// sends media), with the offerer's codec (in its payload type) that matches `ours`.
    public func accepting(_ kind: String, codec ours: CodecDescription, receiving: Bool = false)
        -> (index: Int, codec: CodecDescription)? {
        for (index, s) in sections.enumerated() where s.kind == kind && (receiving ? s.sendsMedia : s.wantsMedia) {
            guard let theirs = s.codecs.first(where: { ours.matches($0) }) else { return nil }
            var codec = ours
            codec.payloadType = theirs.payloadType
            codec.feedback = ours.feedback.filter { theirs.feedback.contains($0) }
            if kind == "video", ours.name.lowercased() == "h264" { codec.parameters = theirs.parameters ?? ours.parameters }
            return (index, codec)
        }
        return nil
    }
}

/// What the agent puts in its answer to a viewer.
public struct ViewerAnswer: Sendable {
    public struct Track: Sendable {
        public var sectionIndex: Int
        public var codec: CodecDescription
        public var ssrc: UInt32
        /// Taken from the viewer's offer: urn:3gpp:video-orientation under this id.
        public var videoOrientationExtensionID: UInt8?
        /// The router taking a browser's simulcast: the RIDs it receives
        /// (`a=rid:… recv`, `a=simulcast:recv`), and the offer's ids of the
        /// RID and MID header extensions, answered as offered.
        public var receivedRIDs: [String]
        public var streamIDExtensionID: UInt8?
        public var midExtensionID: UInt8?
        public init(sectionIndex: Int, codec: CodecDescription, ssrc: UInt32, videoOrientationExtensionID: UInt8? = nil,
                    receivedRIDs: [String] = [], streamIDExtensionID: UInt8? = nil, midExtensionID: UInt8? = nil) {
            self.sectionIndex = sectionIndex
            self.codec = codec
            self.ssrc = ssrc
            self.videoOrientationExtensionID = videoOrientationExtensionID
            self.receivedRIDs = receivedRIDs
            self.streamIDExtensionID = streamIDExtensionID
            self.midExtensionID = midExtensionID
        }
    }

    public var iceUfrag: String
    public var icePwd: String
    public var fingerprint: String
    /// active or passive: the opposite of what the viewer takes.
    public var setup: String
    public var candidates: [ICECandidate]
    public var tracks: [Track]
    public var cname: String
    public var streamID: String
    /// sendonly towards a viewer; recvonly towards a publisher into the
    /// router (no SSRC or msid of ours then: nothing is sent).
    public var direction: String

    public init(iceUfrag: String, icePwd: String, fingerprint: String, setup: String, candidates: [ICECandidate],
                tracks: [Track], cname: String, streamID: String = "camagent", direction: String = "sendonly") {
        self.direction = direction
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.fingerprint = fingerprint
        self.setup = setup
        self.candidates = candidates
        self.tracks = tracks
        self.cname = cname
        self.streamID = streamID
    }

    /// Our DTLS role for the viewer's a=setup: a viewer that will be the
    /// client (actpass, active) gets "passive", which makes us the server.
    public static func setup(answering theirs: String) -> String { theirs == "passive" ? "active" : "passive" }

    /// The answer: every offered section in order, those we send on with
    /// `direction` and one codec, other audio and video sections inactive
    /// (with the transport and candidates all the same),
    /// the rest (data channels) rejected (port 0); ICE-lite, one
    /// BUNDLE transport, rtcp-mux, all candidates.
    public func sessionDescription(answering offer: ViewerOffer, sessionID: UInt64) -> SessionDescription {
        // An audio or video section we have nothing for is answered inactive
        // with its first codec rather than rejected: aiortc refuses an answer
        // with a rejected (port 0) media section, and JSEP allows both.
        let idle = offer.sections.indices.filter { i in
            let s = offer.sections[i]
            return !tracks.contains { $0.sectionIndex == i } && (s.kind == "audio" || s.kind == "video")
                && !s.codecs.isEmpty && s.mid != nil
        }
        // In the offer's order: the first mid is the BUNDLE tag, and it must be the offerer's (JSEP).
        let accepted = offer.sections.indices.filter { i in tracks.contains { $0.sectionIndex == i } || idle.contains(i) }
            .compactMap { offer.sections[$0].mid }
        var session = SessionDescription(sessionID: sessionID, sessionName: "camagent", attributes: [
            SDPAttribute("ice-lite"),
            SDPAttribute("group", "BUNDLE " + accepted.joined(separator: " ")),
            SDPAttribute("msid-semantic", " WMS \(streamID)"),
        ])
        let transport = [
            SDPAttribute("rtcp", "9 IN IP4 0.0.0.0"),
            SDPAttribute("ice-ufrag", iceUfrag), SDPAttribute("ice-pwd", icePwd),
            SDPAttribute("fingerprint", "sha-256 \(fingerprint)"), SDPAttribute("setup", setup),
        ]
        for (index, section) in offer.sections.enumerated() {
            if idle.contains(index) {
                var m = MediaDescription(kind: section.kind, formats: [], attributes: [])
                m.connection = "IN IP4 0.0.0.0"
                m.attributes += transport
                if let mid = section.mid { m.attributes.append(SDPAttribute("mid", mid)) }
                m.attributes += [SDPAttribute("inactive"), SDPAttribute("rtcp-mux")]
                m.add(section.codecs[0])
                // Its candidates too: it may be the BUNDLE tag, whose transport aiortc
                // connects with that section's candidates alone.
                for c in candidates { m.attributes.append(SDPAttribute("candidate", c.attributeValue)) }
                m.attributes.append(SDPAttribute("end-of-candidates"))
                session.media.append(m)
                continue
            }
            guard let track = tracks.first(where: { $0.sectionIndex == index }) else {
                var rejected = MediaDescription(kind: section.kind, port: 0, proto: section.proto,
                                                formats: section.formats.isEmpty ? ["0"] : section.formats,
                                                attributes: [])
                rejected.connection = "IN IP4 0.0.0.0"
                if let mid = section.mid { rejected.attributes.append(SDPAttribute("mid", mid)) }
                rejected.attributes.append(SDPAttribute("inactive"))
                session.media.append(rejected)
                continue
            }
            var m = MediaDescription(kind: section.kind, formats: [], attributes: [])
            m.connection = "IN IP4 0.0.0.0"
            m.attributes += transport
            if let mid = section.mid { m.attributes.append(SDPAttribute("mid", mid)) }
            let sending = direction != "recvonly"
            m.attributes.append(SDPAttribute(direction))
            if sending { m.attributes.append(SDPAttribute("msid", "\(streamID) \(streamID)-\(section.kind)")) }
            m.attributes.append(SDPAttribute("rtcp-mux"))
            m.add(track.codec)
            if let id = track.videoOrientationExtensionID {
                m.attributes.append(HeaderExtensions.attribute(id: id, uri: HeaderExtensions.videoOrientation))
            }
            if !track.receivedRIDs.isEmpty, let ridID = track.streamIDExtensionID {
                if let midID = track.midExtensionID { m.attributes.append(HeaderExtensions.attribute(id: midID, uri: HeaderExtensions.mid)) }
                m.attributes.append(HeaderExtensions.attribute(id: ridID, uri: HeaderExtensions.streamID))
                for rid in track.receivedRIDs { m.attributes.append(SDPAttribute("rid", "\(rid) recv")) }
                m.attributes.append(SDPAttribute("simulcast", "recv " + track.receivedRIDs.joined(separator: ";")))
            }
            if sending {
                m.attributes.append(SDPAttribute("ssrc", "\(track.ssrc) cname:\(cname)"))
                m.attributes.append(SDPAttribute("ssrc", "\(track.ssrc) msid:\(streamID) \(streamID)-\(section.kind)"))
            }
            for c in candidates { m.attributes.append(SDPAttribute("candidate", c.attributeValue)) }
            m.attributes.append(SDPAttribute("end-of-candidates"))
            session.media.append(m)
        }
        return session
    }
}
