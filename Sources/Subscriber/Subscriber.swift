import Logging
import MediaTypes
import Publisher
import SDP
import SecureTransport
import WHIP

/// Receives one stream over WHEP (RFC 9725's sibling: an SDP offer POSTed,
/// a Location to DELETE) from camagent's router, its built-in viewer, or any
/// WHEP server, decodes it and hands it to renderers. OpenTok's Subscriber.
///
/// It runs on a control thread of its own: connect, watch the connection,
/// and when the media stops (consent lost) try new WHEP exchanges until
/// `reconnectWindow` runs out. The connection's own thread receives,
/// decodes and renders (see `ReceivedMedia`).
public final class Subscriber: Sendable {
    public let endpoint: String
    /// The id of the session stream it receives; nil for a WHEP endpoint
    /// outside a session.
    public let streamId: String?
    /// OpenTok's `subscriber.stream`: the stream it receives, as its session
    /// knows it now (hasAudio, hasVideo, hasCaptions and its size follow the
    /// stream's `streamPropertyChanged`); nil outside a session, or when the
    /// session does not list the stream.
    public var stream: SessionStream? { currentStream.withLock { $0 } }
    private let currentStream = PThreadLocked<SessionStream?>(nil)
    private let client: WHIPClient
    private let settings: SubscriberSettings
    private let logger: Logger
    private let certificate: DTLSCertificate
    private let media: ReceivedMedia
    /// The owner's closure, then the delegate.
    private let onEvent: @Sendable (SubscriberEvent) -> Void
    private let delegates: PThreadLocked<Delegates>
    private let signal = StopSignal()
    private let control: PThreadLocked<Control>

    private struct Delegates {
        weak var delegate: (any SubscriberDelegate)?
        /// This subscriber, for the delegate's calls (weak: the closures it is in live in it).
        weak var subscriber: Subscriber?
    }

    private struct Control {
        var thread: StoppableThread?
        var state = SubscriberState.connecting
        var selectedPair: String?
        var connections = 0
        var outcome: Result<Void, SubscriberError>?
        var resource: String?
        var settingsHandler: (@Sendable (String, SubscriberWishes) -> Void)?
        var subscribeToCaptions = false
        var preferredFrameRate: Double?
        var preferredResolution: FrameSize?
        /// The WHEP resource answered and not yet connected: wishes changed
        /// meanwhile go to its subscriber (`resource` is set once connected).
        var answeredResource: String?
        /// `connected` was said: until then the decoder's first
        /// `videoDimensions` waits here, so events come in their natural order
        /// (the decoder's thread can get a keyframe out before this thread wakes).
        var saidConnected = false
        var heldDimensions: SubscriberEvent?
        /// The router stopped video for loss (audio fallback) and has not said
        /// it is back: a new connection starts with video again, and says so.
        var videoOffForQuality = false
    }

    /// - Parameters:
    ///   - endpoint: the WHEP URL (camagent: `http://HOST:PORT/v2/sessions/SID/streams/ID/subscribe`, or a viewer's `/whep`).
    ///   - token: sent as a bearer token (a subscriber token of the session).
    ///   - streamId: the session stream behind `endpoint`, when there is one.
    ///   - video, audio: where decoded media goes (nil: decoded, then dropped).
    public init(endpoint: String, token: String?, streamId: String? = nil, settings: SubscriberSettings = SubscriberSettings(),
                video: (any VideoRenderer)?, audio: (any AudioRenderer)?, logger: Logger,
                onEvent: @escaping @Sendable (SubscriberEvent) -> Void) throws(SubscriberError) {
        self.endpoint = endpoint
        self.streamId = streamId
        self.settings = settings
        self.logger = logger
        let delegates = PThreadLocked(Delegates())
        self.delegates = delegates
        let emit: @Sendable (SubscriberEvent) -> Void = { event in
            onEvent(event)
            let (delegate, subscriber) = delegates.withLock { ($0.delegate, $0.subscriber) }
            if let delegate, let subscriber { delegate.deliver(event, from: subscriber) }
        }
        self.onEvent = emit
        do {
            client = try WHIPClient(endpoint: endpoint, token: token, timeout: settings.httpTimeout,
                                    allowInsecureTLS: settings.allowInsecureTLS,
                                    trustedCertificatesFile: settings.trustedCertificatesFile, logger: logger)
        } catch {
            throw .signalling(error)
        }
        do { certificate = try DTLSCertificate(commonName: "camagent-subscriber") } catch {
            throw .connection(.dtls(error))
        }
        let control = PThreadLocked(Control())
        self.control = control
        media = ReceivedMedia(video: video, audio: audio, maxBitrate: settings.maxBitrate, logger: logger) { event in
            let held = control.withLock { c -> Bool in
                guard !c.saidConnected else { return false }
                c.heldDimensions = event
                return true
            }
            if !held { emit(event) }
        }
        delegates.withLock { $0.subscriber = self }
    }

    /// OpenTok's subscriber delegate (held weakly): each event, after `onEvent`.
    public var delegate: (any SubscriberDelegate)? {
        get { delegates.withLock { $0.delegate } }
        set { delegates.withLock { $0.delegate = newValue } }
    }

    // MARK: Control

    /// Connects on the subscriber's own thread; events follow.
    public func start() {
        let thread = StoppableThread(name: "camagent-subscriber", signal: signal) { [self] _ in run() }
        control.withLock { $0.thread = thread }
    }

    /// Ends the subscription (WHEP DELETE), closes the renderers, waits for the threads.
    public func stop() {
        let thread = control.withLock { $0.thread }
        if let thread { thread.stop() } else { signal.requestStop() }
    }

    /// Waits until the subscriber ends on its own (stream ended, gave up,
    /// failed) or `seconds` pass; nil while it still runs.
    public func wait(seconds: Double) -> Result<Void, SubscriberError>? {
        let until = MonotonicTimestamp.now().seconds + seconds
        while true {
            if let outcome = control.withLock({ $0.outcome }) { return outcome }
            let left = until - MonotonicTimestamp.now().seconds
            if left <= 0 { return nil }
            _ = signal.wait(milliseconds: Int32(min(left, 0.2) * 1000) + 1)
        }
    }

    /// Receive and decode video (true), or not (false); toggled live, without
    /// a new exchange: `videoDisabled`/`videoEnabled` (subscribeToVideo) at
    /// once, and through `onSettingsChange` a router stops sending it.
    /// Turning it back on starts at a keyframe.
    public var subscribeToVideo: Bool {
        get { media.decodeVideo.load(ordering: .relaxed) }
        set {
            guard media.decodeVideo.exchange(newValue, ordering: .relaxed) != newValue else { return }
            if newValue { media.restartVideo.store(true, ordering: .relaxed) }
            onEvent(newValue ? .videoEnabled(.subscribeToVideo) : .videoDisabled(.subscribeToVideo))
            settingsChanged()
        }
    }

    public var subscribeToAudio: Bool {
        get { media.decodeAudio.load(ordering: .relaxed) }
        set {
            guard media.decodeAudio.exchange(newValue, ordering: .relaxed) != newValue else { return }
            settingsChanged()
        }
    }

    /// Receive the stream's live captions (`captionReceived` events), when the
    /// stream has them (hasCaptions). Off by default, as in OpenTok; may be
    /// set before the captions start. Through `onSettingsChange` the router
    /// is told.
    public var subscribeToCaptions: Bool {
        get { control.withLock { $0.subscribeToCaptions } }
        set {
            guard control.withLock({ c in defer { c.subscribeToCaptions = newValue }; return c.subscribeToCaptions != newValue })
            else { return }
            settingsChanged()
        }
    }

    /// The frame rate this subscriber would like (OpenTok's
    /// preferredFrameRate), told to the router through `onSettingsChange`;
    /// may be set before connecting. camagent's router honours it where the
    /// publisher makes temporal layers (camagent's VP8 does): a rate below
    /// the stream's gets half its frames. nil leaves the router's choice as it was.
    public var preferredFrameRate: Double? {
        get { control.withLock { $0.preferredFrameRate } }
        set {
            guard control.withLock({ c in defer { c.preferredFrameRate = newValue }; return c.preferredFrameRate != newValue })
            else { return }
            settingsChanged()
        }
    }

    /// The picture size this subscriber would like (OpenTok's
    /// preferredResolution), told to the router through `onSettingsChange`;
    /// may be set before connecting. camagent's router honours it where the
    /// publisher simulcasts (`camagent publish --simulcast`): the subscriber
    /// gets the largest layer that fits, or the smallest when none does,
    /// switching at that layer's next keyframe. nil leaves the router's choice as it was.
    public var preferredResolution: FrameSize? {
        get { control.withLock { $0.preferredResolution } }
        set {
            guard control.withLock({ c in defer { c.preferredResolution = newValue }; return c.preferredResolution != newValue })
            else { return }
            settingsChanged()
        }
    }

    /// The subscriber's id at the server: the last segment of its WHEP
    /// resource (camagent's router names subscribers so); nil when not connected.
    public var subscriberID: String? {
        control.withLock { $0.resource }.flatMap { $0.split(separator: "/").last.map(String.init) }
    }

    /// Called (on the caller's thread) when subscribeToAudio/Video/Captions
    /// or the preferred frame rate or resolution change, and, while one is
    /// not the default, for each new subscriber at the server twice: when
    /// its WHEP answer comes (before its media connects) and once it
    /// connects; with the subscriber's id. A `Session` sends them to the
    /// router as `subscriberSettings`.
    public func onSettingsChange(_ handler: @escaping @Sendable (_ subscriberID: String, _ wishes: SubscriberWishes) -> Void) {
        control.withLock { $0.settingsHandler = handler }
    }

    /// Says subscribeToAudio/Video/Captions and the preferred frame rate and
    /// resolution again through `onSettingsChange`: its `Session` joined again under a new
    /// connection, and the router keeps them per connection.
    public func repeatSettings() { settingsChanged() }

    /// Its session's latest word on the stream (`stream`).
    package func streamChanged(_ stream: SessionStream) {
        guard stream.streamId == streamId else { return }
        currentStream.withLock { $0 = stream }
    }

    /// What the router's signalling said about this subscriber (audio
    /// fallback, captions), from its `Session`: passed on as the subscriber's
    /// own event. Captions go only while subscribeToCaptions is on.
    public func routerSaid(_ event: SubscriberEvent) {
        if case .captionReceived = event, !subscribeToCaptions { return }
        switch event {
        case .videoDisabled(.quality): control.withLock { $0.videoOffForQuality = true }
        case .videoEnabled(.quality): control.withLock { $0.videoOffForQuality = false }
        default: break
        }
        onEvent(event)
    }

    /// A session stream's preferred resolution and frame rate, given with the
    /// WHEP offer so the router honours them from the first packet
    /// (`subscriberSettings` after the answer could come after the first
    /// keyframe of another simulcast layer). Not sent to other WHEP servers.
    private var offeredWishes: [(name: String, value: String)] {
        guard streamId != nil else { return [] }
        let (resolution, frameRate) = control.withLock { ($0.preferredResolution, $0.preferredFrameRate) }
        var items: [(name: String, value: String)] = []
        if let resolution { items.append(("preferredResolution", "\(resolution.width)x\(resolution.height)")) }
        if let frameRate { items.append(("preferredFrameRate", "\(frameRate)")) }
        return items
    }

    /// Whether the router must be told anything: a wish that is not its default.
    private var wishesDiffer: Bool {
        !subscribeToVideo || !subscribeToAudio || subscribeToCaptions || preferredFrameRate != nil || preferredResolution != nil
    }

    /// Tells the wishes through `onSettingsChange`, for the connected
    /// subscriber, or the one answered and still connecting.
    private func settingsChanged() {
        let (handler, resource, captions, frameRate, resolution) = control.withLock {
            ($0.settingsHandler, $0.resource ?? $0.answeredResource, $0.subscribeToCaptions, $0.preferredFrameRate,
             $0.preferredResolution)
        }
        guard let handler, let id = resource?.split(separator: "/").last else { return }
        handler(String(id), SubscriberWishes(audio: subscribeToAudio, video: subscribeToVideo, captions: captions,
                                             frameRate: frameRate, resolution: resolution))
    }

    public var state: SubscriberState { control.withLock { $0.state } }

    /// Its stats now as a W3C webrtc-stats report (OpenTok's
    /// `rtcStatsReport`): inbound-rtp, remote-outbound-rtp, candidate-pair.
    public func rtcStatsReport() -> [RTCStatsEntry] {
        stats().rtcStatsReport(timestamp: (SenderClock.wallClockNow() * 1000).rounded())
    }

    public func stats() -> SubscriberStats {
        let received = media.stats
        return control.withLock { c in
            SubscriberStats(state: c.state, video: received.video, audio: received.audio, selectedPair: c.selectedPair,
                            connections: c.connections)
        }
    }

    // MARK: The control thread

    private enum Attempt {
        case stopped
        case ended(String)
        case failed(SubscriberError)
        /// Was connected; the media stopped.
        case dropped(String)
    }

    private func run() {
        var everConnected = false
        var lostAt: Double?
        var delay = 0.5
        var lastError = ""
        while true {
            let attempt = connectAndServe(reconnecting: lostAt != nil)
            switch attempt {
            case .stopped:
                finish(.stopped, .success(()))
                return
            case .ended(let reason):
                onEvent(.streamEnded(reason: reason))
                finish(.ended, .failure(.streamEnded(reason)))
                return
            case .failed(let error):
                // A refusal (token, unknown stream, codec) is final; so is a
                // first connection that never came up.
                if !everConnected || Self.isFinal(error) {
                    finish(.failed, .failure(error))
                    return
                }
                lastError = error.description
            case .dropped(let reason):
                // This attempt was connected: a new outage starts now (after a
                // reconnection too), with its own reconnect window.
                everConnected = true
                lastError = reason
                lostAt = MonotonicTimestamp.now().seconds
                onEvent(.disconnected(reason: reason))
                delay = 0.5
            }
            if case .failed = attempt, lostAt == nil { lostAt = MonotonicTimestamp.now().seconds }
            guard let since = lostAt else { continue }
            if MonotonicTimestamp.now().seconds - since > settings.reconnectWindow {
                let error = SubscriberError.gaveUp(seconds: settings.reconnectWindow, lastError: lastError)
                onEvent(.streamDestroyed(reason: error.description))
                finish(.failed, .failure(error))
                return
            }
            setState(.reconnecting)
            logger.notice("reconnecting in \(delay) s")
            // In slices: `wait(seconds:)` waits on the same event and can take a stop's wake-up.
            let until = MonotonicTimestamp.now().seconds + delay
            while !signal.isStopRequested {
                let left = until - MonotonicTimestamp.now().seconds   // read once: a negative poll timeout waits forever
                if left <= 0 { break }
                _ = signal.wait(milliseconds: Int32(min(left, 0.2) * 1000) + 1)
            }
            if signal.isStopRequested {
                finish(.stopped, .success(()))
                return
            }
            delay = min(delay * 2, 4)
        }
    }

    private static func isFinal(_ error: SubscriberError) -> Bool {
        switch error {
        case .signalling(.unauthorized), .signalling(.notFound), .signalling(.rejected), .signalling(.badURL),
             .badAnswer, .output, .streamEnded:
            return true
        default:
            return false
        }
    }

    private func connectAndServe(reconnecting: Bool) -> Attempt {
        if signal.isStopRequested { return .stopped }
        let transport: PeerTransport
        do {
            transport = try PeerTransport(
                receivingInto: media, certificate: certificate, includeLoopback: settings.includeLoopbackCandidates,
                stunServer: settings.stunServer, connectTimeout: settings.connectTimeout, logger: logger
            ) { [signal] _ in signal.wakeUp() }
        } catch {
            return .failed(.connection(error))
        }
        var offer = PublisherOffer(
            iceUfrag: transport.iceUfrag, icePwd: transport.icePassword, fingerprint: certificate.fingerprint,
            candidates: transport.sdpCandidates, audio: settings.receiveAudio ? [.opus] : [],
            video: settings.receiveVideo ? [.vp8, .h264] : [], audioSSRC: 0, videoSSRC: 0, cname: transport.cname,
            streamID: "camagent-subscriber")
        offer.direction = "recvonly"
        let offerText = offer.sessionDescription(sessionID: .random(in: 1...UInt64(Int64.max))).text
        logger.debug("offer:\n\(offerText)")
        let session: WHIPSession
        do { session = try client.publish(offer: offerText, query: offeredWishes, stop: signal) } catch {
            return signal.isStopRequested ? .stopped : .failed(.signalling(error))
        }
        logger.debug("answer:\n\(session.answerSDP)")
        let answer: PublisherAnswer
        do {
            answer = try PublisherAnswer(try SessionDescription(parsing: session.answerSDP), to: offer)
            guard answer.fingerprintAlgorithm == "sha-256" else {
                throw SDPError.missing("a sha-256 fingerprint (got \(answer.fingerprintAlgorithm))")
            }
        } catch {
            try? client.stop(session)
            return .failed(.badAnswer("\(error)"))
        }
        var negotiated = ReceivedMedia.Negotiated()
        var codecs: [String] = []
        if let video = answer.video {
            negotiated.videoPayloadType = UInt8(truncatingIfNeeded: video.payloadType)
            negotiated.videoCodec = video.name.lowercased() == "h264" ? .h264 : .vp8
            negotiated.videoCodecName = video.name
            codecs.append(video.name)
        }
        if let audio = answer.audio {
            negotiated.audioPayloadType = UInt8(truncatingIfNeeded: audio.payloadType)
            negotiated.audioCodec = audio.name
            codecs.append(audio.name)
        }
        do { try media.configure(negotiated) } catch {
            try? client.stop(session)
            return .failed(error)
        }
        // What differs from the defaults goes to the router now, while ICE
        // and DTLS connect: a preferred size chosen before the first
        // keyframe spares the renderer a first picture of the wrong size.
        control.withLock { $0.answeredResource = session.resourceURL }
        if wishesDiffer { settingsChanged() }
        transport.start(remote: PeerTransport.Remote(
            ufrag: answer.iceUfrag, password: answer.icePwd, isLite: answer.iceLite, fingerprint: answer.fingerprint,
            setup: answer.setup, candidates: PeerTransport.usable(answer.candidates)))
        var peerClosed = false
        defer {
            // Forgotten first: a wish changed from now on is not sent for a subscriber being deleted.
            control.withLock { c in
                c.selectedPair = nil
                c.resource = nil
                c.answeredResource = nil
            }
            transport.stop()
            if !peerClosed {
                do { try client.stop(session) } catch { logger.debug("WHEP DELETE: \(error)") }
            }
        }
        var connected = false
        while true {
            if signal.isStopRequested { return .stopped }
            if let failure = media.failure { return .failed(.output(failure)) }
            switch transport.phase {
            case .connected where !connected:
                connected = true
                let pair = transport.selectedPair
                // Video stopped for loss was the old connection's subscriber's: the router sends the
                // new one video. Forgotten with the old id in one step, so a word about the new id
                // (which needs `resource`) is never wiped.
                let videoBack = control.withLock { c in
                    defer { c.videoOffForQuality = false }
                    c.connections += 1
                    c.selectedPair = pair
                    c.resource = session.resourceURL
                    return c.videoOffForQuality
                }
                // A new subscriber id at the server: it hears what differs from the defaults, again
                // (the router takes the same wishes twice as once; one sent before the socket was up is not lost).
                if wishesDiffer { settingsChanged() }
                setState(.connected)
                onEvent(reconnecting ? .reconnected(selectedPair: pair) : .connected(codecs: codecs.joined(separator: "+"), selectedPair: pair))
                let held = control.withLock { c in
                    defer { c.heldDimensions = nil }
                    c.saidConnected = true
                    return c.heldDimensions
                }
                if let held { onEvent(held) }
                // Said only while video is wanted: turned off here, it stays off (subscribeToVideo).
                if videoBack && subscribeToVideo { onEvent(.videoEnabled(.quality)) }
            case .failed(.peerClosed):
                peerClosed = true
                return connected ? .ended("the sender closed the connection") : .failed(.connection(.peerClosed))
            case .failed(let error):
                return connected ? .dropped(error.description) : .failed(.connection(error))
            case .closed:
                return connected ? .dropped("the connection closed") : .failed(.connection(.peerClosed))
            default:
                break
            }
            _ = signal.wait(milliseconds: 200)
        }
    }

    private func setState(_ state: SubscriberState) { control.withLock { $0.state = state } }

    private func finish(_ state: SubscriberState, _ outcome: Result<Void, SubscriberError>) {
        var outcome = outcome
        do { try media.finishRenderers() } catch {
            if case .success = outcome { outcome = .failure(.output(error)) }
        }
        control.withLock { c in
            c.state = state
            c.outcome = outcome
        }
        signal.wakeUp()
    }
}
