import Encoders
import ICE
import Logging
import MediaTypes
import SDP
import SecureTransport

/// A WebRTC publisher in the shape of OpenTok's Publisher: a video capture
/// and an audio device plugged in, encoded once and sent to a WHIP server
/// (when signaling is given), to every viewer of the embedded server
/// (`addViewer`), or both. With a WHIP server `publish()` returns once media
/// flows, or throws what stopped it; after that, a dropped session is
/// reconnected with backoff until `unpublish()`. Without one it returns as
/// soon as capture runs. Events arrive through `onEvent`.
///
/// A camera that is lost while its capturer reconnects (`--reconnect`)
/// does not end anything: sessions and viewers stay connected, the events
/// say the device is lost and back, and frames resume with a keyframe (at
/// a new size if the camera came back in another mode). A camera lost for
/// good ends the publisher with that error, after a clean WHIP DELETE.
public final class Publisher: @unchecked Sendable {   // mutable state behind `control`
    public let settings: PublisherSettings
    private let videoCapture: PThreadLocked<(any VideoCapture)?>
    private let audio: (any AudioDevice)?
    private let signaling: (any PublisherSignaling)?
    /// Sizes each video frame is sent in: 2 with simulcast (to a WHIP server or router), else 1.
    private let simulcastLayers: Int
    private let logger: Logger
    /// The owner's handler, then every observer's (`observeEvents`).
    private let onEvent: @Sendable (PublisherEvent) -> Void
    private let observers: PThreadLocked<[@Sendable (PublisherEvent) -> Void]>

    private let certificate: DTLSCertificate
    private let hub: MediaHub
    /// The WHIP session's send side (nil without a WHIP server).
    private let whipMedia: MediaSenders?
    private let viewers: ViewerSessions
    private var videoPipeline: VideoPipeline?
    private var audioPipeline: AudioPipeline?
    /// Stops the control thread; its event wakes whoever waits for the
    /// connection's progress (the control thread, `publish()`).
    private let controlSignal = StopSignal()
    private var wake: WakeEvent { controlSignal.event }

    private struct Control {
        var state = PublisherState.idle
        var thread: StoppableThread?
        var transport: PeerTransport?
        var firstOutcome: Result<Void, PublisherError>?
        var pipelineFailure: PublisherError?
        var codec = "none"
        var connections = 0
        /// The error that ended the publisher, once it ended on its own.
        var failure: PublisherError?
        var videoDeviceLost = false
        /// OpenTok's publishCaptions: captions of this publisher's audio are wanted.
        var publishCaptions = false
        /// `renewConnection` was called: the current connection (or the wait before the next) ends at once.
        var renewRequested = false
        /// `publish()` is starting capture: an `unpublish()` meanwhile leaves stopping it to `publish()`,
        /// so that a device is never stopped while another thread starts it.
        var startingCapture = false
        /// The control thread's loop has returned (its last DELETE is done).
        var controlEnded = false
        var lastStats: (time: MonotonicTimestamp, video: (UInt64, UInt64), audio: (UInt64, UInt64), encoded: UInt64)?
    }
    private let control = PThreadLocked(Control())
    /// True once capture is stopped, by whichever of `publish()` and `unpublish()` comes first;
    /// held while it stops, so that the other returns only once the devices are stopped.
    private let captureStopped = PThreadLocked(false)

    public init(settings: PublisherSettings, videoCapture: (any VideoCapture)?, audioDevice: (any AudioDevice)?,
                signaling: (any PublisherSignaling)?, logger: Logger,
                onEvent: @escaping @Sendable (PublisherEvent) -> Void = { _ in }) throws(PublisherError) {
        self.settings = settings
        self.videoCapture = PThreadLocked(settings.videoTrack ? videoCapture : nil)
        let video = settings.videoTrack ? videoCapture : nil
        audio = settings.audioTrack ? audioDevice : nil
        self.signaling = signaling
        self.logger = logger
        let observers = PThreadLocked<[@Sendable (PublisherEvent) -> Void]>([])
        self.observers = observers
        let emit: @Sendable (PublisherEvent) -> Void = { event in
            onEvent(event)
            for observer in observers.withLock({ $0 }) { observer(event) }
        }
        self.onEvent = emit
        guard video != nil || audio != nil else { throw .nothingToPublish }
        if settings.publishCaptions && audio == nil { throw .missingAudioTrack }
        do { certificate = try DTLSCertificate() } catch { throw .connection(.dtls(error)) }
        simulcastLayers = settings.simulcast && signaling != nil && video != nil ? 2 : 1
        hub = MediaHub(videoBitrateCeiling: settings.videoBitrate, simulcastLayers: simulcastLayers)
        if signaling != nil {
            var streams: [(kind: MediaKind, payloadType: UInt8)] = []
            if audio != nil { streams.append((.audio, 111)) }
            if video != nil { streams.append((.video, 96)) }
            let media = hub.makeSenders(streams, simulcastLayers: simulcastLayers)
            hub.attach(media)
            whipMedia = media
        } else {
            whipMedia = nil
        }
        viewers = ViewerSessions(hub: hub, certificate: certificate, settings: settings, logger: logger, onEvent: emit)
        control.withLock { $0.publishCaptions = settings.publishCaptions }
    }

    public var state: PublisherState { control.withLock { $0.state } }
    /// Why the publisher ended on its own (state `failed`); nil otherwise.
    public var failure: PublisherError? { control.withLock { $0.failure } }
    private var video: (any VideoCapture)? { videoCapture.withLock { $0 } }

    /// Starts capture, connects, and returns once the first session carries
    /// media (or throws why it could not). `unpublish()` from another thread
    /// ends it at any step, the WHIP exchange included: it then throws
    /// `unpublished`, once the control thread is done and capture stopped (a
    /// resource the server answered with is deleted; one whose answer the
    /// stop cut off is left to the server's own timeout).
    public func publish() throws(PublisherError) {
        let proceed = control.withLock { c -> Bool in
            c.startingCapture = !stopping
            return c.startingCapture
        }
        guard proceed else { throw .unpublished }
        captureStopped.withLock { $0 = false }
        do throws(PublisherError) { try startCapture() } catch {
            control.withLock { $0.startingCapture = false }
            throw error
        }
        // Capture runs, unless `unpublish()` came meanwhile: it left stopping capture to this thread.
        // With a server, the control thread is made and stored in the same step: an `unpublish()`
        // either comes first (and no thread is made) or finds the thread to join.
        let started = control.withLock { c -> Bool in
            c.startingCapture = false
            guard !stopping else { return false }
            if signaling != nil {
                c.thread = StoppableThread(name: "camagent-publish", signal: controlSignal) { [self] _ in runControl() }
            }
            return true
        }
        guard started else { throw unpublishedWhileStarting() }
        guard signaling != nil else {
            // Only the embedded server: capture runs, viewers come and go.
            setState(.serving)
            if stopping { throw unpublishedWhileStarting() }   // `unpublish()` came as it started
            return
        }
        // Wait for the first outcome: connected, or the first failure.
        while true {
            if let outcome = control.withLock({ $0.firstOutcome }) {
                if case .failure(let error) = outcome {
                    unpublish()
                    throw error
                }
                return
            }
            if stopping { throw unpublishedWhileStarting() }
            _ = wake.wait(milliseconds: 100)
        }
    }

    /// `unpublish()` came from another thread while `publish()` ran: waits
    /// for the control thread's end (a WHIP exchange under way ends at once,
    /// then the DELETE) and for capture to be stopped, whichever thread does
    /// it, so that the caller may exit as soon as `publish()` throws this.
    private func unpublishedWhileStarting() -> PublisherError {
        endControlThread()
        stopCapture()   // or waits for `unpublish()` to be done with it
        if state != .failed { setState(.closed) }
        return .unpublished
    }

    /// Opens and starts the camera and the microphone, each feeding its encoder.
    private func startCapture() throws(PublisherError) {
        let report: @Sendable (PublisherError) -> Void = { [weak self] error in self?.pipelineFailed(error) }
        if let video {
            let fps = video.captureSettings?.grantedFramesPerSecond ?? 30
            let pipeline = VideoPipeline(hub: hub, codec: settings.codecPreference.first ?? .vp8, framesPerSecond: fps,
                                         temporalLayers: settings.videoTemporalLayers,
                                         simulcast: simulcastLayers > 1, logger: logger, onError: report,
                                         onEncodedSize: { [weak self] size in
                                             self?.onEvent(.videoDimensions(width: size.width, height: size.height))
                                         }) { [weak self] event in self?.videoEvent(event) }
            videoPipeline = pipeline
            pipeline.start()
            video.setConsumer(pipeline)
            do {
                if video.captureSettings == nil { try video.initialize() }
                try video.start()
            } catch {
                stopCapture()
                throw .video(error)
            }
        }
        if let audio {
            do throws(PublisherError) {
                do { try audio.initializeCapture() } catch { throw .audio(error) }
                guard let settings = audio.captureSettings else { throw .audio(.noSoundCard) }
                guard settings.format.sampleRate == OpusEncoder.sampleRate else {
                    throw .audio(.formatNotSupported(device: settings.device, requested: settings.requested,
                                                     reason: "the device gave \(settings.format.sampleRate) Hz; Opus here needs 48000 Hz"))
                }
                let pipeline: AudioPipeline
                do {
                    pipeline = try AudioPipeline(hub: hub, format: settings.format,
                                                 bitrate: self.settings.audioBitrate, logger: logger, onError: report) {
                        [weak self] event in self?.onEvent(event)
                    }
                } catch { throw .encoder(error) }
                audioPipeline = pipeline
                audio.bus.setCaptureConsumer(pipeline)
                do { try audio.startCapture() } catch { throw .audio(error) }
            } catch {
                stopCapture()
                throw error
            }
        }
    }

    /// Swaps the camera while live: the old one stops, the new one feeds the
    /// same encoder (made again if its size differs) and every receiver gets
    /// a keyframe. On failure the old camera is left stopped and the error
    /// says why the new one could not start.
    public func replaceVideoCapture(_ replacement: any VideoCapture) throws(PublisherError) {
        guard let pipeline = videoPipeline else { throw .nothingToPublish }
        let old = videoCapture.withLock { v in defer { v = replacement }; return v }
        if let old, old !== replacement {
            old.stop()
            old.setConsumer(nil)
        }
        replacement.setConsumer(pipeline)
        do {
            if replacement.captureSettings == nil { try replacement.initialize() }
            try replacement.start()
        } catch {
            throw .video(error)
        }
        control.withLock { $0.videoDeviceLost = false }
        hub.requestKeyframe()
        logger.info("video source replaced: \(old?.name ?? "none") -> \(replacement.name)")
        onEvent(.deviceRestored(kind: .video, description: "switched to \(replacement.name)"))
    }

    /// Stops sending, tells the server (DELETE), stops capture. From any
    /// thread, at any time: a `publish()` under way throws `unpublished`.
    public func unpublish() {
        endControlThread()   // asks first: a `publish()` starting capture sees it at its next step
        viewers.removeAll()
        if !control.withLock({ $0.startingCapture }) { stopCapture() }
        if state != .failed { setState(.closed) }
    }

    /// Stops the control thread and waits for its end, whoever joins it (from
    /// the thread itself it only asks).
    private func endControlThread() {
        controlSignal.requestStop()
        guard let thread = control.withLock({ $0.thread }), !thread.isCurrent else { return }
        thread.stop()   // joins; returns at once when another caller is joining it, hence:
        while !control.withLock({ $0.controlEnded }) { _ = wake.wait(milliseconds: 100) }
    }

    /// Ends the current connection to the server (if any) and connects
    /// again at once, through the same signalling, instead of waiting for
    /// the transport to fail and the backoff to pass. A session that rejoined
    /// after its signalling dropped calls it: the router ended the old stream,
    /// and the signalling now carries the new connection. Nothing happens
    /// without a server or after `unpublish`.
    public func renewConnection() {
        guard signaling != nil, !stopping else { return }
        control.withLock { $0.renewRequested = true }
        wake.signal()
    }

    // MARK: Viewers (the embedded server's WHEP side)

    /// Answers a viewer's WHEP offer: its id (for DELETE) and the SDP answer.
    /// The viewer's connection comes up on its own; `viewerJoined` says when.
    /// `audioFallback` is this viewer's own choice (a session subscriber's:
    /// OpenTok's audio fallback, on for routed sessions); nil follows
    /// `PublisherSettings.audioFallback`.
    public func addViewer(offer: String, audioFallback: Bool? = nil) throws(ViewerError) -> (id: String, answer: String) {
        guard [.serving, .connecting, .connected, .reconnecting].contains(state) else { throw .notPublishing }
        return try viewers.add(offer: offer, offerable: .init(audio: audioPipeline != nil, video: videoPipeline?.codec),
                               audioFallback: audioFallback)
    }

    /// Ends a viewer; false when there is no such viewer.
    public func removeViewer(id: String) -> Bool { viewers.remove(id: id) }

    /// Hands every encoded audio packet to `tap` as well (nil stops it): the
    /// captions of this publisher's own stream in `camagent publish`'s
    /// session. False when the publisher has no audio.
    @discardableResult
    public func setAudioTap(_ tap: (any EncodedAudioTap)?) -> Bool {
        guard let audioPipeline else { return false }
        audioPipeline.tap.withLock { $0 = tap }
        return true
    }

    /// What one viewer is sent from now on (a session subscriber's
    /// subscribeToAudio/Video); video comes back at a keyframe. False when
    /// there is no such viewer.
    @discardableResult
    public func setViewerMedia(id: String, audio: Bool, video: Bool) -> Bool {
        viewers.setMedia(id: id, audio: audio, video: video)
    }

    /// One viewer's preferred frame rate (a session subscriber's
    /// preferredFrameRate; nil: every frame): below the full rate it gets
    /// the base temporal layer, half the frames (`videoTemporalLayers`).
    /// False when there is no such viewer.
    @discardableResult
    public func setViewerFrameRate(id: String, _ rate: Double?) -> Bool {
        viewers.setPreferredFrameRate(id: id, rate)
    }

    /// Viewers whose connection is up.
    public var viewerCount: Int { viewers.connectedCount }

    /// Hands every event from now on to `handler` too, after the owner's
    /// own: a session this publisher publishes into hears its viewers leave.
    public func observeEvents(_ handler: @escaping @Sendable (PublisherEvent) -> Void) {
        observers.withLock { $0.append(handler) }
    }

    /// OpenTok's publishVideo: false stops encoding and sending video, and
    /// true brings it back with a keyframe. The camera keeps capturing, so
    /// coming back is at once. Every connection stays up. A session hears of
    /// the change (`PublisherEvent.publishing`, said only for a kind this
    /// publisher has) and tells the router.
    public var publishVideo: Bool {
        get { hub.isPublishing(.video) }
        set { if hub.setPublishing(.video, newValue), video != nil { onEvent(.publishing(kind: .video, on: newValue)) } }
    }

    /// OpenTok's publishAudio: false stops encoding and sending audio (and
    /// captions of it), true brings it back. The microphone stays open.
    public var publishAudio: Bool {
        get { hub.isPublishing(.audio) }
        set { if hub.setPublishing(.audio, newValue), audio != nil { onEvent(.publishing(kind: .audio, on: newValue)) } }
    }

    /// OpenTok's publishCaptions: whether live captions of this publisher's
    /// audio are wanted. A session it is published into asks the router for
    /// them (the router recognises the speech while the session's captions
    /// run); set it with `setPublishCaptions`.
    public var publishCaptions: Bool { control.withLock { $0.publishCaptions } }

    /// Turns publishCaptions on or off, now or before publishing. A session
    /// hears the change (`PublisherEvent.publishingCaptions`) and tells the
    /// router. A publisher without audio cannot have captions: turning them
    /// on throws `missingAudioTrack` (OpenTok's MissingAudioTrack) and
    /// changes nothing. A throwing method rather than a settable property,
    /// so that the refusal cannot go unnoticed.
    public func setPublishCaptions(_ on: Bool) throws(PublisherError) {
        if on && audio == nil { throw .missingAudioTrack }
        let changed = control.withLock { c -> Bool in
            guard c.publishCaptions != on else { return false }
            c.publishCaptions = on
            return true
        }
        if changed { onEvent(.publishingCaptions(on: on)) }
    }

    /// What this publisher sends: audio, video, and the size the camera
    /// captures at (nil before it is opened, or without video).
    public var media: (audio: Bool, video: Bool, captureSize: FrameSize?) {
        let size = video?.captureSettings.map { FrameSize(width: $0.outputFormat.width, height: $0.outputFormat.height) }
        return (audio != nil, video != nil, size)
    }

    private func stopCapture() {
        captureStopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            video?.stop()
            video?.setConsumer(nil)
            videoPipeline?.stop()
            audio?.stopCapture()
            audio?.bus.setCaptureConsumer(nil)
        }
    }

    /// What the camera reports: a loss it will recover from keeps every
    /// connection up; its return asks all receivers for a keyframe.
    private func videoEvent(_ event: CaptureEvent) {
        switch event {
        case .deviceLost(let error):
            control.withLock { $0.videoDeviceLost = true }
            logger.warning("camera lost, waiting for it: \(error)")
            onEvent(.deviceLost(kind: .video, reason: error.description))
        case .reconnected(let settings, let gap):
            control.withLock { $0.videoDeviceLost = false }
            hub.requestKeyframe()
            onEvent(.deviceRestored(kind: .video, description:
                "\(settings.device) back after \(gap.secondsDouble.formatted(decimals: 1)) s: \(settings.deviceFormat)"))
        case .failed(let error):
            pipelineFailed(.video(error))
        default:
            logger.notice("video: \(event)")
        }
    }

    private func setState(_ state: PublisherState) {
        let changed = control.withLock { c -> Bool in
            guard c.state != state else { return false }
            c.state = state
            return true
        }
        if changed { onEvent(.stateChanged(state)) }
    }

    /// A capture device or an encoder failed for good. With a WHIP session
    /// the control thread ends it (DELETE) and fails; with only viewers the
    /// publisher fails here.
    private func pipelineFailed(_ error: PublisherError) {
        let serving = control.withLock { c -> Bool in
            c.pipelineFailure = c.pipelineFailure ?? error
            return c.thread == nil && c.state == .serving
        }
        wake.signal()
        if serving { fail(error) }
    }

    private func fail(_ error: PublisherError) {
        let first = control.withLock { c -> Bool in
            defer { c.failure = c.failure ?? error }
            return c.failure == nil
        }
        guard first else { return }
        onEvent(.failed(error))
        setState(.failed)
    }

    private var stopping: Bool { controlSignal.isStopRequested }

    // MARK: The control thread: connect, watch, reconnect

    private func runControl() {
        defer {
            control.withLock { $0.controlEnded = true }
            wake.signal()
        }
        var attempt = 0
        var delay = 1.0
        while !stopping {
            setState(attempt == 0 ? .connecting : .reconnecting)
            let outcome = connectAndServe()
            let everConnected = control.withLock { $0.connections > 0 }
            switch outcome {
            case .stopped:
                return
            case .failed(let error):
                if !everConnected {
                    control.withLock { $0.firstOutcome = .failure(error) }
                    wake.signal()
                    fail(error)
                    return
                }
                switch error {
                case .video, .audio, .encoder: fail(error); return
                default: onEvent(.failed(error))
                }
                guard settings.reconnect else { fail(error); return }
            case .dropped(let reason):
                onEvent(.streamDestroyed(reason: reason))
                guard settings.reconnect else { fail(.connection(.peerClosed)); return }
                delay = 1
            }
            attempt += 1
            logger.notice("reconnecting in \(delay) s")
            setState(.reconnecting)
            let until = MonotonicTimestamp.now() + .milliseconds(Int64(delay * 1000))
            // In slices: `publish()` and `unpublish()` wait on the same event and can take its wake-up.
            while !stopping, MonotonicTimestamp.now() < until, !control.withLock({ $0.renewRequested }) {
                _ = wake.wait(milliseconds: Int32(max(1, min(200, (until - MonotonicTimestamp.now()).milliseconds))))
            }
            delay = min(delay * 2, settings.maxReconnectDelay)
        }
    }

    private enum SessionOutcome {
        case stopped
        case failed(PublisherError)
        case dropped(String)
    }

    private func connectAndServe() -> SessionOutcome {
        guard let signaling, let media = whipMedia else { return .stopped }
        // This exchange uses the signalling as it is now: a renewal asked before it is done.
        control.withLock { $0.renewRequested = false }
        let transport: PeerTransport
        do {
            transport = try PeerTransport(certificate: certificate, media: media,
                                          includeLoopback: settings.includeLoopbackCandidates,
                                          stunServer: settings.stunServer, connectTimeout: settings.connectTimeout,
                                          logger: logger) { [wake] _ in wake.signal() }
        } catch {
            return .failed(.connection(error))
        }
        let ssrcs = media.ssrcs
        var offer = PublisherOffer(
            iceUfrag: transport.iceUfrag, icePwd: transport.icePassword, fingerprint: certificate.fingerprint,
            candidates: transport.sdpCandidates,
            audio: audio != nil ? [.opus] : [], video: video != nil ? settings.codecPreference.map(\.description) : [],
            audioSSRC: ssrcs[.audio] ?? 0, videoSSRC: ssrcs[.video] ?? 0, cname: transport.cname, streamID: settings.name)
        offer.videoOrientationExtensionID = settings.offerVideoOrientation ? PublisherOffer.defaultVideoOrientationID : nil
        offer.videoSimulcastSSRCs = media.simulcastSSRCs
        let offerText = offer.sessionDescription(sessionID: .random(in: 1...UInt64(Int64.max))).text
        logger.debug("offer:\n\(offerText)")
        let exchanged: (answer: String, resource: String)
        do { exchanged = try signaling.publish(offer: offerText, stop: controlSignal) } catch {
            return stopping ? .stopped : .failed(error)
        }
        logger.debug("answer:\n\(exchanged.answer)")
        let answer: PublisherAnswer
        do {
            let parsed = try SessionDescription(parsing: exchanged.answer)
            answer = try PublisherAnswer(parsed, to: offer)
        } catch {
            signaling.unpublish()
            return .failed(.badAnswer("\(error)"))
        }
        guard answer.fingerprintAlgorithm == "sha-256" else {
            signaling.unpublish()
            return .failed(.badAnswer("fingerprint algorithm \(answer.fingerprintAlgorithm) (only sha-256 is supported)"))
        }
        // The answer's payload types and codec.
        var codecName = [String]()
        var payloadTypes: [MediaKind: UInt8] = [:]
        if let codec = answer.audio { payloadTypes[.audio] = UInt8(codec.payloadType) }
        if let codec = answer.video { payloadTypes[.video] = UInt8(codec.payloadType) }
        media.negotiated(payloadTypes: payloadTypes, videoOrientationExtensionID: answer.videoOrientationExtensionID)
        if let codec = answer.video {
            videoPipeline?.configure(codec: codec.name.lowercased() == "h264" ? .h264 : .vp8)
            codecName.append(codec.name)
        }
        if let codec = answer.audio { codecName.append(codec.name) }
        control.withLock { $0.codec = codecName.joined(separator: "+") }
        transport.start(remote: PeerTransport.Remote(
            ufrag: answer.iceUfrag, password: answer.icePwd, isLite: answer.iceLite, fingerprint: answer.fingerprint,
            setup: answer.setup,
            candidates: PeerTransport.usable(answer.candidates)))
        control.withLock { $0.transport = transport }
        defer {
            media.setSending([])
            transport.stop()
            control.withLock { $0.transport = nil }
            signaling.unpublish()
        }
        var connected = false
        while true {
            if stopping { return .stopped }
            if let failure = control.withLock({ $0.pipelineFailure }) { return .failed(failure) }
            if control.withLock({ $0.renewRequested }) { return .dropped("its signalling asked for a new connection") }
            switch transport.phase {
            case .connected where !connected:
                connected = true
                control.withLock { c in
                    c.connections += 1
                    c.firstOutcome = c.firstOutcome ?? .success(())
                }
                wake.signal()
                var kinds: Set<MediaKind> = []
                if answer.video != nil { kinds.insert(.video) }
                if answer.audio != nil { kinds.insert(.audio) }
                media.setSending(kinds)
                setState(.connected)
                onEvent(.streamCreated(resource: exchanged.resource, codec: codecName.joined(separator: "+"),
                                       selectedPair: transport.selectedPair))
            case .failed(let error):
                if connected { return .dropped(error.description) }
                return .failed(.connection(error))
            case .closed:
                return connected ? .dropped("transport closed") : .failed(.connection(.peerClosed))
            default:
                break
            }
            _ = wake.wait(milliseconds: 200)
        }
    }

    // MARK: Stats

    /// Network stats; bitrates are over the time since the previous call.
    public func stats() -> PublisherStats {
        let now = MonotonicTimestamp.now()
        let viewerStats = viewers.stats(now: now)
        let frames = videoPipeline?.frameCounts ?? VideoPipeline.Counts()
        var dropped = frames.droppedEncoderBusy
        if let s = video?.statistics {
            dropped += s.framesDroppedByDriver + s.framesCorrupt + s.framesTooShort
            dropped += s.framesBadJPEG + s.framesSkippedForNewer + s.framesDroppedConsumerBusy
        }
        return control.withLock { c in
            let elapsed = c.lastStats.map { (now - $0.time).secondsDouble } ?? (now - hub.origin).secondsDouble
            let codecs = c.codec.split(separator: "+").map(String.init)
            func codec(_ kind: MediaKind) -> String {
                codecs.first { (kind == .audio) == ($0.lowercased() == "opus") } ?? "none"
            }
            let v = whipMedia?.streamStats(.video, codec: codec(.video), previous: c.lastStats?.video, elapsed: elapsed)
            let a = whipMedia?.streamStats(.audio, codec: codec(.audio), previous: c.lastStats?.audio, elapsed: elapsed)
            let pacerDropped = whipMedia?.packetsDroppedByPacer ?? 0
            let fps = elapsed > 0 ? Double(frames.encoded &- (c.lastStats?.encoded ?? 0)) / elapsed : 0
            c.lastStats = (now, (v?.bytesSent ?? 0, v?.framesEncoded ?? 0), (a?.bytesSent ?? 0, a?.framesEncoded ?? 0),
                           frames.encoded)
            return PublisherStats(state: c.state, video: v, audio: a, selectedPair: c.transport?.selectedPair,
                                  packetsDroppedByPacer: pacerDropped, connections: c.connections,
                                  framesEncoded: frames.encoded, framesNotWatched: frames.notWatched,
                                  framesDropped: dropped, framesDroppedEncoderBusy: frames.droppedEncoderBusy,
                                  videoDeviceLost: c.videoDeviceLost, frameRate: fps, viewers: viewerStats)
        }
    }
}
