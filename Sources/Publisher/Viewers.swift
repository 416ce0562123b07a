import Logging
import MediaTypes
import SDP
import SecureTransport
import Synchronization

/// The viewers of the embedded server (WHEP): each one a connection of its
/// own (ICE-lite, DTLS server, SRTP, pacer, NACK history) fed by the one
/// encoder through `MediaHub`. A viewer that leaves — DELETE, RTCP BYE, DTLS
/// close, consent expiry, or a connection that never came up — is removed
/// by a small reaper thread, so a transport thread is never joined from itself.
final class ViewerSessions: Sendable {
    /// What a viewer can be sent, read when its offer arrives.
    struct Offerable: Sendable {
        var audio: Bool
        var video: VideoCodec?
    }

    private final class Session: Sendable {
        let id: String
        let media: MediaSenders
        let transport: PeerTransport
        let created = MonotonicTimestamp.now()
        let codecs: [MediaKind: String]
        /// What was negotiated, and what the viewer wants of it now
        /// (a subscriber's subscribeToAudio/Video): sent is both.
        let negotiated: Set<MediaKind>
        let wanted: WantedKinds
        /// Audio fallback's state, and the report count it last looked at.
        /// The counts at the previous decision: reports, packets sent, packets NACKed.
        let fallback = PThreadLocked<(policy: AudioFallback, reports: UInt64, sent: UInt64, nacked: UInt64)>((AudioFallback(), 0, 0, 0))
        /// This viewer's own audio fallback choice (a session subscriber's, as
        /// its stream's publisher set it); nil follows the publisher's setting.
        let audioFallback: Bool?
        /// Bytes and frames per kind at the previous stats call, for bitrates.
        let previous = PThreadLocked<(time: MonotonicTimestamp, counts: [MediaKind: (UInt64, UInt64)])?>(nil)
        let joined = PThreadLocked(false)

        init(id: String, media: MediaSenders, transport: PeerTransport, codecs: [MediaKind: String],
             wanted: WantedKinds, audioFallback: Bool?) {
            self.id = id
            self.audioFallback = audioFallback
            self.media = media
            self.transport = transport
            self.codecs = codecs
            negotiated = Set(codecs.keys)
            self.wanted = wanted
        }
    }

    private let hub: MediaHub
    private let certificate: DTLSCertificate
    private let settings: PublisherSettings
    private let logger: Logger
    private let onEvent: @Sendable (PublisherEvent) -> Void
    private let sessions = PThreadLocked<[String: Session]>([:])
    /// settings.audioFallback, until the publisher turns it off.
    private let audioFallback: Atomic<Bool>
    /// Places taken under the viewer limit: from admission (before the
    /// answer is made) until the viewer is closed. Checked and taken in one
    /// critical section, so concurrent offers cannot all pass the check.
    private let places = PThreadLocked(0)
    private let reaper = PThreadLocked<StoppableThread?>(nil)
    /// Stops the reaper; viewers' transports signal its event when their phase changes.
    private let reaperSignal = StopSignal()
    private var wake: WakeEvent { reaperSignal.event }

    init(hub: MediaHub, certificate: DTLSCertificate, settings: PublisherSettings, logger: Logger,
         onEvent: @escaping @Sendable (PublisherEvent) -> Void) {
        self.hub = hub
        self.certificate = certificate
        self.settings = settings
        self.logger = logger
        self.onEvent = onEvent
        audioFallback = Atomic(settings.audioFallback)
    }

    /// Audio fallback on or off for every viewer (the publisher's choice);
    /// off brings video back to those it was stopped for.
    func setAudioFallback(_ enabled: Bool) {
        audioFallback.store(enabled, ordering: .relaxed)
        guard !enabled else { return }
        for session in sessions.withLock({ Array($0.values) }) {
            let wasOff = session.fallback.withLock { f in
                defer { f.policy = AudioFallback() }
                return f.policy.state == .videoOff
            }
            if wasOff {
                apply(session)
                onEvent(.viewerVideoQuality(id: session.id, change: .enabled))
            }
        }
    }

    /// Takes a place under the viewer limit, or says there is none.
    private func takePlace() throws(ViewerError) {
        let ok = places.withLock { taken in
            guard taken < settings.maxViewers else { return false }
            taken += 1
            return true
        }
        guard ok else { throw .tooManyViewers(settings.maxViewers) }
    }

    private func releasePlace() { places.withLock { $0 -= 1 } }
    var connectedCount: Int { sessions.withLock { $0.values.filter { $0.media.isSending }.count } }

    /// Answers a viewer's offer and starts its connection; the answer lists
    /// the viewer's sections in order, ours sendonly, the rest rejected.
    /// `id` names the viewer (the router's subscriber id); by default a random one.
    func add(offer text: String, offerable: Offerable, id chosenID: String? = nil, audioFallback: Bool? = nil) throws(ViewerError)
        -> (id: String, answer: String) {
        let offer: ViewerOffer
        do { offer = try ViewerOffer(try SessionDescription(parsing: text)) } catch { throw .badOffer(error.description) }
        guard offer.fingerprintAlgorithm == "sha-256" else {
            throw .badOffer("fingerprint algorithm \(offer.fingerprintAlgorithm) (only sha-256 is supported)")
        }
        var tracks: [(kind: MediaKind, section: Int, codec: CodecDescription)] = []
        if offerable.audio, let a = offer.accepting("audio", codec: .opus) { tracks.append((.audio, a.index, a.codec)) }
        if let video = offerable.video, let v = offer.accepting("video", codec: video.description) {
            tracks.append((.video, v.index, v.codec))
        }
        let orientationID = settings.offerVideoOrientation
            ? tracks.first { $0.kind == .video }.flatMap { offer.sections[$0.section].videoOrientationExtensionID } : nil
        guard !tracks.isEmpty else {
            let sent = [offerable.audio ? "Opus audio" : nil, offerable.video.map { "\($0.description.name) video" }]
                .compactMap { $0 }.joined(separator: " and ")
            throw .noCommonCodec("the agent sends \(sent.isEmpty ? "nothing" : sent); the offer receives none of it")
        }
        try takePlace()

        let media = hub.makeSenders(tracks.map { ($0.kind, $0.codec.payloadType) })
        media.negotiated(payloadTypes: [:], videoOrientationExtensionID: orientationID)
        let kinds = Set(tracks.map(\.kind))
        let wanted = WantedKinds(kinds)
        let id = chosenID ?? Self.makeID()
        let transport: PeerTransport
        do {
            transport = try PeerTransport(
                certificate: certificate, media: media, includeLoopback: settings.includeLoopbackCandidates,
                stunServer: nil, connectTimeout: settings.connectTimeout, lite: true,
                consentTimeout: settings.viewerConsentTimeout, logger: logger
            ) { [wake] phase in
                switch phase {
                case .connected: media.setSending(kinds.intersection(wanted.kinds.withLock { $0 }))
                case .failed, .closed: media.setSending([])
                default: break
                }
                wake.signal()
            }
        } catch {
            releasePlace()
            throw .connection(error)
        }
        let ssrcs = media.ssrcs
        let answer = ViewerAnswer(
            iceUfrag: transport.iceUfrag, icePwd: transport.icePassword, fingerprint: certificate.fingerprint,
            setup: ViewerAnswer.setup(answering: offer.setup),
            candidates: transport.sdpCandidates,
            tracks: tracks.map {
                ViewerAnswer.Track(sectionIndex: $0.section, codec: $0.codec, ssrc: ssrcs[$0.kind] ?? 0,
                                   videoOrientationExtensionID: $0.kind == .video ? orientationID : nil)
            },
            cname: transport.cname, streamID: settings.name)
        let answerText = answer.sessionDescription(answering: offer, sessionID: .random(in: 1...UInt64(Int64.max))).text
        logger.debug("viewer \(id) offer:\n\(text)")
        logger.debug("viewer \(id) answer:\n\(answerText)")
        let session = Session(id: id, media: media, transport: transport,
                              codecs: Dictionary(uniqueKeysWithValues: tracks.map { ($0.kind, $0.codec.name) }),
                              wanted: wanted, audioFallback: audioFallback)
        sessions.withLock { $0[id] = session }   // its place is released when it is closed
        hub.attach(media)
        startReaper()
        // The viewer's setup names its own role; "passive" makes us the DTLS client.
        transport.start(remote: PeerTransport.Remote(
            ufrag: offer.iceUfrag, password: offer.icePwd, isLite: false, fingerprint: offer.fingerprint,
            setup: offer.setup == "passive" ? "passive" : "active",
            candidates: PeerTransport.usable(offer.candidates)))
        logger.info("viewer \(id): answered (\(tracks.map { "\($0.kind.rawValue) \($0.codec.name)" }.joined(separator: ", ")))")
        return (id, answerText)
    }

    /// What one viewer is sent from now on, of what it negotiated (a
    /// subscriber's subscribeToAudio/Video). Turning video back on starts at
    /// a keyframe. False when there is no such viewer.
    @discardableResult
    func setMedia(id: String, audio: Bool, video: Bool) -> Bool {
        guard let session = sessions.withLock({ $0[id] }) else { return false }
        var kinds: Set<MediaKind> = []
        if audio { kinds.insert(.audio) }
        if video { kinds.insert(.video) }
        session.wanted.kinds.withLock { $0 = kinds }
        apply(session)
        return true
    }

    /// A viewer's preferred frame rate (a subscriber's preferredFrameRate;
    /// nil: every frame). False when there is no such viewer.
    @discardableResult
    func setPreferredFrameRate(id: String, _ rate: Double?) -> Bool {
        guard let session = sessions.withLock({ $0[id] }) else { return false }
        session.media.setPreferredFrameRate(rate)
        return true
    }

    /// A viewer's preferred picture size (a subscriber's preferredResolution;
    /// nil: the largest simulcast layer). False when there is no such viewer.
    @discardableResult
    func setPreferredResolution(id: String, _ size: FrameSize?) -> Bool {
        guard let session = sessions.withLock({ $0[id] }) else { return false }
        session.media.setPreferredResolution(size)
        return true
    }

    /// Sends a viewer what it negotiated, wants, and (under audio fallback) can take.
    private func apply(_ session: Session) {
        var kinds = session.negotiated.intersection(session.wanted.kinds.withLock { $0 })
        if session.fallback.withLock({ $0.policy.state == .videoOff }) { kinds.remove(.video) }
        guard session.transport.phase == .connected, kinds != session.media.sendingKinds else { return }
        session.media.setSending(kinds)
        logger.info("viewer \(session.id): sending \(kinds.isEmpty ? "nothing" : kinds.map(\.rawValue).sorted().joined(separator: " and "))")
    }

    /// Audio fallback: each new receiver report of the viewer moves its policy.
    private func checkQuality(_ session: Session) {
        guard session.audioFallback ?? audioFallback.load(ordering: .relaxed), session.negotiated.contains(.video) else { return }
        let measured: MediaKind = session.media.sendingKinds.contains(.video) || !session.negotiated.contains(.audio) ? .video : .audio
        guard let reception = session.media.reception(measured) else { return }
        var loss = reception.report.fractionLost
        let action = session.fallback.withLock { f -> AudioFallback.Action? in
            guard reception.report.reportsReceived > f.reports else { return nil }
            // The reports count repaired packets as received: the share NACKed
            // since the last decision is the loss the link really has.
            let sent = reception.packetsSent &- f.sent, nacked = reception.nackedPackets &- f.nacked
            if sent > 0, f.sent > 0 { loss = max(loss, min(1, Double(nacked) / Double(sent))) }
            f.reports = reception.report.reportsReceived
            f.sent = reception.packetsSent
            f.nacked = reception.nackedPackets
            return f.policy.report(fractionLost: loss)
        }
        guard let action else { return }
        let change: VideoQualityChange
        switch action {
        case .warn: change = .warning
        case .liftWarning: change = .warningLifted
        case .disableVideo: change = .disabled
        case .enableVideo: change = .enabled
        }
        logger.notice("viewer \(session.id): \(change.rawValue) (\(measured.rawValue) loss \(Int(loss * 100)) %)")
        if action == .disableVideo || action == .enableVideo {
            // The other kind's counts from now on.
            let other = session.media.reception(action == .disableVideo ? .audio : .video)
            session.fallback.withLock { f in
                f.reports = other?.report.reportsReceived ?? 0
                f.sent = other?.packetsSent ?? 0
                f.nacked = other?.nackedPackets ?? 0
            }
            apply(session)
        }
        onEvent(.viewerVideoQuality(id: session.id, change: change))
    }

    /// Ends a viewer (its WHEP DELETE). False when there is no such viewer.
    func remove(id: String) -> Bool {
        guard let session = sessions.withLock({ $0.removeValue(forKey: id) }) else { return false }
        close(session, reason: "the viewer ended the session")
        return true
    }

    /// Ends every viewer and the reaper (the publisher stops).
    func removeAll() {
        let all = sessions.withLock { s in defer { s.removeAll() }; return Array(s.values) }
        for session in all { close(session, reason: "the publisher stopped") }
        let thread = reaper.withLock { r in defer { r = nil }; return r }
        if let thread { thread.stop() } else { reaperSignal.requestStop() }
    }

    private func close(_ session: Session, reason: String) {
        releasePlace()
        hub.detach(session.media)
        session.media.setSending([])
        session.transport.stop()
        logger.info("viewer \(session.id) left: \(reason)")
        onEvent(.viewerLeft(id: session.id, reason: reason))
    }

    /// Viewer ids are URL-safe random hex.
    private static func makeID() -> String {
        let hex = Array("0123456789abcdef")
        return String((0..<16).map { _ in hex[Int.random(in: 0..<16)] })
    }

    // MARK: The reaper: removes viewers whose connection ended, reports joins

    private func startReaper() {
        reaper.withLock { r in
            guard r == nil, !reaperSignal.isStopRequested else { return }
            r = StoppableThread(name: "camagent-viewers", signal: reaperSignal) { [self] signal in runReaper(signal) }
        }
    }

    private func runReaper(_ signal: StopSignal) {
        while !signal.isStopRequested {
            signal.wait(milliseconds: 500)
            let all = sessions.withLock { Array($0.values) }
            for session in all {
                switch session.transport.phase {
                case .connected:
                    let first = session.joined.withLock { j in defer { j = true }; return !j }
                    if first {
                        let codec = [session.codecs[.video], session.codecs[.audio]].compactMap { $0 }.joined(separator: "+")
                        logger.info("viewer \(session.id): connected via \(session.transport.selectedPair ?? "?")")
                        onEvent(.viewerJoined(id: session.id, codec: codec, selectedPair: session.transport.selectedPair))
                    }
                    checkQuality(session)
                case .failed(let error):
                    if sessions.withLock({ $0.removeValue(forKey: session.id) }) != nil { close(session, reason: error.description) }
                case .closed:
                    if sessions.withLock({ $0.removeValue(forKey: session.id) }) != nil { close(session, reason: "closed") }
                default:
                    break
                }
            }
        }
    }

    // MARK: Stats

    func stats(now: MonotonicTimestamp) -> [ViewerStats] {
        let all = sessions.withLock { $0.values.sorted { $0.created < $1.created } }
        return all.map { session in
            session.previous.withLock { previous in
                let elapsed = previous.map { (now - $0.time).secondsDouble } ?? (now - session.created).secondsDouble
                let before = previous?.counts ?? [:]
                let video = session.media.streamStats(.video, codec: session.codecs[.video] ?? "none",
                                                      previous: before[.video], elapsed: elapsed)
                let audio = session.media.streamStats(.audio, codec: session.codecs[.audio] ?? "none",
                                                      previous: before[.audio], elapsed: elapsed)
                let connected = session.media.isSending
                var counts: [MediaKind: (UInt64, UInt64)] = [:]
                if let video { counts[.video] = (video.bytesSent, video.framesEncoded) }
                if let audio { counts[.audio] = (audio.bytesSent, audio.framesEncoded) }
                previous = (now, counts)
                return ViewerStats(id: session.id, state: connected ? "connected" : "connecting",
                                   selectedPair: session.transport.selectedPair, video: video, audio: audio,
                                   age: (now - session.created).secondsDouble)
            }
        }
    }
}

extension StreamStats {
    /// One stream's counters from a connection's send state; bitrate and
    /// frame rate over `elapsed` seconds since `previous` (bytes, frames).
    init(_ state: MediaSendState, stream index: Int, codec: String, previous: (UInt64, UInt64)?, elapsed: Double) {
        let stream = state.streams[index]
        let r = state.reception[index], f = state.feedback[index]
        let (prevBytes, prevFrames) = previous ?? (0, 0)
        self.init(kind: stream.kind, codec: codec, ssrc: stream.ssrc, framesEncoded: stream.framesSent,
                  keyframesEncoded: stream.keyframesSent, packetsSent: stream.packetsSent, bytesSent: stream.bytesSent,
                  packetsRetransmitted: stream.packetsRetransmitted,
                  bitrate: elapsed > 0 ? Double(stream.bytesSent &- prevBytes) * 8 / elapsed : 0,
                  frameRate: elapsed > 0 ? Double(stream.framesSent &- prevFrames) / elapsed : 0,
                  targetBitrate: stream.kind == .video ? state.bitrate.target : nil,
                  packetsLost: r.packetsLost, fractionLost: r.fractionLost, jitter: r.jitter, rtt: r.roundTripTime,
                  nackReceived: f.nackReceived, pliReceived: f.pliReceived, firReceived: f.firReceived)
    }
}

/// What a viewer wants sent, shared by its session and its transport's
/// phase callback (which starts sending once connected).
private final class WantedKinds: Sendable {
    let kinds: PThreadLocked<Set<MediaKind>>
    init(_ kinds: Set<MediaKind>) { self.kinds = PThreadLocked(kinds) }
}
