import Logging
import MediaTypes
import SDP
import SecureTransport

/// The media side of the router: streams published into it over WHIP and
/// their subscribers over WHEP. Media is forwarded, never decoded: each
/// stream is one receive-only connection to its publisher feeding a hub,
/// and each subscriber one connection fed by that hub, exactly as a viewer
/// is fed by the agent's own encoder (`ViewerSessions`). Signalling — who
/// may publish or subscribe, and the events — is the session server's.
public final class StreamRouter: Sendable {
    private final class Stream: Sendable {
        let id: String
        let publication: RoutedPublication
        let offerable: ViewerSessions.Offerable
        let frames: ForwardedFrames
        let transport: PeerTransport
        let subscribers: ViewerSessions
        let events: @Sendable (RoutedStreamEvent) -> Void

        init(id: String, publication: RoutedPublication, offerable: ViewerSessions.Offerable, frames: ForwardedFrames,
             transport: PeerTransport, subscribers: ViewerSessions, events: @escaping @Sendable (RoutedStreamEvent) -> Void) {
            self.id = id
            self.publication = publication
            self.offerable = offerable
            self.frames = frames
            self.transport = transport
            self.subscribers = subscribers
            self.events = events
        }

        var counters: RoutingCounters {
            var c = RoutingCounters()
            c.packetsReceived = frames.packetsReceived.load(ordering: .relaxed)
            c.packetsForwarded = frames.packetsForwarded.load(ordering: .relaxed)
            c.bytesForwarded = frames.bytesForwarded.load(ordering: .relaxed)
            c.packetsDropped = frames.packetsDropped.load(ordering: .relaxed)
            c.packetsNacked = frames.packetsNacked.load(ordering: .relaxed)
            c.packetsRecovered = frames.packetsRecovered.load(ordering: .relaxed)
            return c
        }
    }

    private let settings: RouterMediaSettings
    private let certificate: DTLSCertificate
    private let logger: Logger
    private let streams = PThreadLocked<[String: Stream]>([:])
    /// Subscriber id → its stream id, and what to call when it ends.
    private let subscribers = PThreadLocked<[String: (stream: String, ended: @Sendable (String) -> Void)]>([:])
    /// What the streams that ended had counted.
    private let retired = PThreadLocked(RoutingCounters())
    /// Where audio fallback's steps for each subscriber are told (the session server).
    private let qualityHandler = PThreadLocked<(@Sendable (String, VideoQualityChange) -> Void)?>(nil)

    public init(settings: RouterMediaSettings = RouterMediaSettings(), logger: Logger) throws(RoutingError) {
        self.settings = settings
        self.logger = logger
        do { certificate = try DTLSCertificate() } catch { throw .connection(.dtls(error)) }
    }

    /// The video codecs the router forwards, preferred first.
    static let videoCodecs: [VideoCodec] = [.vp8, .h264]

    /// Answers a publisher's WHIP offer: a new stream `streamID`, receive-only.
    /// `events` arrive on any thread, after this returns.
    public func publish(streamID: String, offer text: String,
                        events: @escaping @Sendable (RoutedStreamEvent) -> Void) throws(RoutingError) -> RoutedPublication {
        let offer: ViewerOffer
        do { offer = try ViewerOffer(try SessionDescription(parsing: text)) } catch { throw .badOffer(error.description) }
        guard offer.fingerprintAlgorithm == "sha-256" else {
            throw .badOffer("fingerprint algorithm \(offer.fingerprintAlgorithm) (only sha-256 is supported)")
        }
        let audio = offer.accepting("audio", codec: .opus, receiving: true)
        var video: (index: Int, codec: CodecDescription, kind: VideoCodec)?
        for kind in Self.videoCodecs {
            if let found = offer.accepting("video", codec: kind.description, receiving: true) {
                video = (found.index, found.codec, kind)
                break
            }
        }
        guard audio != nil || video != nil else {
            throw .noCommonCodec("the router forwards Opus audio and VP8 or H.264 video; the offer sends none of them")
        }
        guard streams.withLock({ $0[streamID] == nil }) else { throw .streamExists(streamID) }

        // Simulcast as camagent's publisher offers it (an SSRC group), or as browsers do (RIDs,
        // named in each packet's header extension). Up to four layers, the largest: the smaller
        // ones' packets are dropped as unknown (and the answer names only the RIDs taken).
        let videoSection = video.map { offer.sections[$0.index] }
        let simulcastSSRCs = Array((videoSection?.simulcastSSRCs ?? []).suffix(Int(SimulcastLayers.maxCount)))
        let simulcastRIDs = simulcastSSRCs.isEmpty && videoSection?.streamIDExtensionID != nil
            ? Array((videoSection?.simulcastRIDs ?? []).suffix(Int(SimulcastLayers.maxCount))) : []
        let layers = max(1, simulcastSSRCs.count, simulcastRIDs.count)
        let hub = MediaHub(videoBitrateCeiling: settings.videoBitrateCeiling, sendsOnQueueingThread: true,
                           simulcastLayers: layers)
        var streamLogger = logger
        streamLogger[metadataKey: "stream"] = "\(streamID)"
        let frames = ForwardedFrames(
            hub: hub,
            codecs: .init(audioPayloadType: audio?.codec.payloadType, videoPayloadType: video?.codec.payloadType,
                          videoCodec: video?.kind,
                          simulcastSSRCs: simulcastSSRCs, simulcastRIDs: simulcastRIDs,
                          streamIDExtensionID: simulcastRIDs.isEmpty ? nil : videoSection?.streamIDExtensionID),
            logger: streamLogger,
            onDimensions: { width, height in events(.videoDimensions(width: width, height: height)) })
        let transport: PeerTransport
        do {
            transport = try PeerTransport(
                certificate: certificate, media: hub.makeSenders([]), includeLoopback: settings.includeLoopbackCandidates,
                stunServer: nil, connectTimeout: settings.connectTimeout, lite: true,
                consentTimeout: settings.publisherConsentTimeout, receiver: frames, logger: logger
            ) { [weak self] phase in
                let reason: String
                switch phase {
                case .failed(.peerClosed): reason = "clientDisconnected"
                case .failed: reason = "networkDisconnected"
                default: return
                }
                // Not on the connection's own thread: ending the stream joins it.
                Task.detached { self?.end(streamID: streamID, reason: reason) }
            }
        } catch {
            throw .connection(error)
        }
        var tracks: [ViewerAnswer.Track] = []
        if let audio { tracks.append(.init(sectionIndex: audio.index, codec: audio.codec, ssrc: 0)) }
        if let video {
            tracks.append(.init(sectionIndex: video.index, codec: video.codec, ssrc: 0, receivedRIDs: simulcastRIDs,
                                streamIDExtensionID: videoSection?.streamIDExtensionID,
                                midExtensionID: videoSection?.midExtensionID))
        }
        tracks.sort { $0.sectionIndex < $1.sectionIndex }
        let answer = ViewerAnswer(
            iceUfrag: transport.iceUfrag, icePwd: transport.icePassword, fingerprint: certificate.fingerprint,
            setup: ViewerAnswer.setup(answering: offer.setup), candidates: transport.sdpCandidates, tracks: tracks,
            cname: transport.cname, streamID: streamID, direction: "recvonly")
        let answerText = answer.sessionDescription(answering: offer, sessionID: .random(in: 1...UInt64(Int64.max))).text
        let publication = RoutedPublication(answer: answerText, hasAudio: audio != nil, hasVideo: video != nil,
                                            videoCodec: video?.codec.name)
        let offerable = ViewerSessions.Offerable(audio: audio != nil, video: video?.kind)
        var viewerSettings = PublisherSettings()
        viewerSettings.name = streamID
        viewerSettings.maxViewers = settings.maxSubscribersPerStream
        viewerSettings.includeLoopbackCandidates = settings.includeLoopbackCandidates
        viewerSettings.connectTimeout = settings.connectTimeout
        viewerSettings.viewerConsentTimeout = settings.subscriberConsentTimeout
        viewerSettings.offerVideoOrientation = false   // forwarded frames carry no orientation of ours
        viewerSettings.audioFallback = true             // OpenTok's default for routed subscribers
        let subscriberSessions = ViewerSessions(hub: hub, certificate: certificate, settings: viewerSettings,
                                                logger: logger) { [weak self] event in
            switch event {
            case .viewerLeft(let id, let reason): self?.subscriberLeft(id: id, reason: reason)
            case .viewerVideoQuality(let id, let change): self?.qualityHandler.withLock { $0 }?(id, change)
            default: break
            }
        }
        let stream = Stream(id: streamID, publication: publication, offerable: offerable, frames: frames,
                            transport: transport, subscribers: subscriberSessions, events: events)
        let added = streams.withLock { s -> Bool in
            guard s[streamID] == nil else { return false }
            s[streamID] = stream
            return true
        }
        guard added else { throw .streamExists(streamID) }
        transport.start(remote: PeerTransport.Remote(
            ufrag: offer.iceUfrag, password: offer.icePwd, isLite: false, fingerprint: offer.fingerprint,
            setup: offer.setup == "passive" ? "passive" : "active", candidates: PeerTransport.usable(offer.candidates)))
        logger.info("stream \(streamID): publisher answered (\([audio.map { _ in "audio opus" }, video.map { "video \($0.codec.name)" }].compactMap { $0 }.joined(separator: ", "))\(layers > 1 ? ", \(layers) simulcast layers" : ""))")
        return publication
    }

    /// Ends a stream (its WHIP DELETE, or its connection's end) and its subscribers.
    public func unpublish(streamID: String) {
        guard let stream = streams.withLock({ $0.removeValue(forKey: streamID) }) else { return }
        close(stream)
        logger.info("stream \(streamID): unpublished")
    }

    /// Answers a subscriber's WHEP offer for stream `streamID`.
    public func subscribe(streamID: String, subscriberID: String, offer: String,
                          ended: @escaping @Sendable (String) -> Void) throws(RoutingError) -> String {
        guard let stream = streams.withLock({ $0[streamID] }) else { throw .noSuchStream(streamID) }
        subscribers.withLock { $0[subscriberID] = (streamID, ended) }
        do {
            return try stream.subscribers.add(offer: offer, offerable: stream.offerable, id: subscriberID).answer
        } catch {
            subscribers.withLock { _ = $0.removeValue(forKey: subscriberID) }
            switch error {
            case .badOffer(let r): throw .badOffer(r)
            case .noCommonCodec(let r): throw .noCommonCodec(r)
            case .tooManyViewers(let n): throw .tooManySubscribers(n)
            case .connection(let e): throw .connection(e)
            case .notPublishing: throw .noSuchStream(streamID)
            }
        }
    }

    /// Ends one subscriber (its WHEP DELETE). False when there is no such subscriber.
    @discardableResult
    public func unsubscribe(subscriberID: String) -> Bool {
        guard let entry = subscribers.withLock({ $0.removeValue(forKey: subscriberID) }),
              let stream = streams.withLock({ $0[entry.stream] }) else { return false }
        return stream.subscribers.remove(id: subscriberID)
    }

    /// Audio fallback's steps for each subscriber (warning, video off, video
    /// back), with the subscriber's id; on any thread.
    public func onSubscriberVideoQuality(_ handler: @escaping @Sendable (_ subscriberID: String, VideoQualityChange) -> Void) {
        qualityHandler.withLock { $0 = handler }
    }

    /// The publisher's choice (OpenTok's audioFallbackEnabled): off, its
    /// subscribers get video whatever their loss. False when there is no such stream.
    @discardableResult
    public func setAudioFallback(streamID: String, enabled: Bool) -> Bool {
        guard let stream = streams.withLock({ $0[streamID] }) else { return false }
        stream.subscribers.setAudioFallback(enabled)
        return true
    }

    /// What one subscriber is sent (its subscribeToAudio / subscribeToVideo).
    /// False when there is no such subscriber.
    @discardableResult
    public func setSubscriberMedia(subscriberID: String, audio: Bool, video: Bool) -> Bool {
        guard let stream = stream(ofSubscriber: subscriberID) else { return false }
        return stream.subscribers.setMedia(id: subscriberID, audio: audio, video: video)
    }

    /// One subscriber's preferred frame rate (nil: every frame): below the
    /// publisher's rate it gets the base temporal layer, when the publisher
    /// makes layers (VP8 with TID in its descriptors). False when there is no such subscriber.
    @discardableResult
    public func setSubscriberFrameRate(subscriberID: String, _ rate: Double?) -> Bool {
        guard let stream = stream(ofSubscriber: subscriberID) else { return false }
        return stream.subscribers.setPreferredFrameRate(id: subscriberID, rate)
    }

    /// One subscriber's preferred picture size (nil: the largest): it gets
    /// the largest simulcast layer that fits, where the publisher simulcasts
    /// (`camagent publish --simulcast`). False when there is no such subscriber.
    @discardableResult
    public func setSubscriberResolution(subscriberID: String, _ size: FrameSize?) -> Bool {
        guard let stream = stream(ofSubscriber: subscriberID) else { return false }
        return stream.subscribers.setPreferredResolution(id: subscriberID, size)
    }

    /// The stream a subscriber receives, while both are there.
    private func stream(ofSubscriber id: String) -> Stream? {
        guard let entry = subscribers.withLock({ $0[id] }) else { return nil }
        return streams.withLock { $0[entry.stream] }
    }

    /// Hands a stream's audio, as it arrives, to `tap` as well (nil: to nobody
    /// else). False when there is no such stream.
    @discardableResult
    public func setAudioTap(streamID: String, _ tap: (any EncodedAudioTap)?) -> Bool {
        guard let stream = streams.withLock({ $0[streamID] }) else { return false }
        stream.frames.audioTap.withLock { $0 = tap }
        return true
    }

    /// Every stream and subscriber ends (the router stops).
    public func stopAll() {
        let all = streams.withLock { s in defer { s.removeAll() }; return Array(s.values) }
        for stream in all { close(stream) }
    }

    /// What has been forwarded so far, over all streams.
    public var counters: RoutingCounters {
        let live = streams.withLock { $0.values.map(\.counters) }
        return live.reduce(retired.withLock { $0 }, +)
    }

    /// How many subscribers are connected now, over all streams.
    public var connectedSubscribers: Int { streams.withLock { Array($0.values) }.reduce(0) { $0 + $1.subscribers.connectedCount } }

    private func end(streamID: String, reason: String) {
        guard let stream = streams.withLock({ $0.removeValue(forKey: streamID) }) else { return }
        logger.info("stream \(streamID): publisher gone (\(reason))")
        close(stream)
        stream.events(.ended(reason: reason))
    }

    private func close(_ stream: Stream) {
        stream.subscribers.removeAll()
        stream.transport.stop()
        let counted = stream.counters
        retired.withLock { $0 = $0 + counted }
    }

    private func subscriberLeft(id: String, reason: String) {
        guard let entry = subscribers.withLock({ $0.removeValue(forKey: id) }) else { return }
        entry.ended(reason)
    }
}
