import AudioDevices
import Encoders
import ICE
import Logging
import MediaTypes
import SDP
import SecureTransport
import Synchronization

/// A WebRTC publisher in the shape of OpenTok's Publisher: a video capture
/// and an audio device plugged in, one stream sent to whatever answers the
/// signaling (a WHIP server). `publish()` returns once media flows, or throws
/// what stopped it; after that, a dropped session is reconnected with
/// backoff until `unpublish()`. Events arrive through `onEvent`.
public final class Publisher: @unchecked Sendable {   // mutable state behind `control`
    public let settings: PublisherSettings
    private let video: (any VideoCapture)?
    private let audio: (any AudioDevice)?
    private let signaling: any PublisherSignaling
    private let logger: Logger
    private let onEvent: @Sendable (PublisherEvent) -> Void

    private let certificate: DTLSCertificate
    private let media: MediaSenders
    private let videoStream: Int?
    private let audioStream: Int?
    private var videoPipeline: VideoPipeline?
    private var audioPipeline: AudioPipeline?
    private let wake = WakeEvent()

    private struct Control {
        var state = PublisherState.idle
        var stop = false
        var thread: DeviceThread?
        var transport: PeerTransport?
        var firstOutcome: Result<Void, PublisherError>?
        var pipelineFailure: PublisherError?
        var codec = "none"
        var connections = 0
        var lastStats: (time: MonotonicTimestamp, video: (UInt64, UInt64), audio: (UInt64, UInt64))?
    }
    private let control = Mutex(Control())

    public init(settings: PublisherSettings, videoCapture: (any VideoCapture)?, audioDevice: (any AudioDevice)?,
                signaling: any PublisherSignaling, logger: Logger,
                onEvent: @escaping @Sendable (PublisherEvent) -> Void = { _ in }) throws(PublisherError) {
        self.settings = settings
        video = settings.videoTrack ? videoCapture : nil
        audio = settings.audioTrack ? audioDevice : nil
        self.signaling = signaling
        self.logger = logger
        self.onEvent = onEvent
        guard video != nil || audio != nil else { throw .nothingToPublish }
        do { certificate = try DTLSCertificate() } catch { throw .connection(.dtls(error)) }
        var streams: [RTPStreamSender] = []
        if audio != nil {
            streams.append(RTPStreamSender(kind: .audio, ssrc: .random(in: 1...UInt32.max), payloadType: 111,
                                           clockRate: 48_000, historySize: 256))
        }
        if video != nil {
            streams.append(RTPStreamSender(kind: .video, ssrc: .random(in: 1...UInt32.max), payloadType: 96,
                                           clockRate: 90_000, historySize: 1024))
        }
        audioStream = audio != nil ? 0 : nil
        videoStream = video != nil ? streams.count - 1 : nil
        media = MediaSenders(state: MediaSendState(streams: streams, videoBitrate: settings.videoBitrate),
                             origin: MonotonicTimestamp.now())
    }

    public var state: PublisherState { control.withLock { $0.state } }

    /// Starts capture, connects, and returns once the first session carries
    /// media (or throws why it could not).
    public func publish() throws(PublisherError) {
        let report: @Sendable (PublisherError) -> Void = { [weak self] error in self?.pipelineFailed(error) }
        if let video, let videoStream {
            let fps = video.captureSettings?.grantedFramesPerSecond ?? 30
            let pipeline = VideoPipeline(media: media, stream: videoStream, framesPerSecond: fps, logger: logger, onError: report)
            videoPipeline = pipeline
            video.setConsumer(pipeline)
            do {
                if video.captureSettings == nil { try video.initialize() }
                try video.start()
            } catch { throw .video(error) }
        }
        if let audio, let audioStream {
            do throws(PublisherError) {
                do { try audio.initializeCapture() } catch { throw .audio(error) }
                guard let settings = audio.captureSettings else { throw .audio(.noSoundCard) }
                guard settings.format.sampleRate == OpusEncoder.sampleRate else {
                    throw .audio(.formatNotSupported(device: settings.device, requested: settings.requested,
                                                     reason: "the device gave \(settings.format.sampleRate) Hz; Opus here needs 48000 Hz"))
                }
                let pipeline: AudioPipeline
                do {
                    pipeline = try AudioPipeline(media: media, stream: audioStream, format: settings.format,
                                                 bitrate: self.settings.audioBitrate, logger: logger, onError: report)
                } catch { throw .encoder(error) }
                audioPipeline = pipeline
                audio.bus.setCaptureConsumer(pipeline)
                do { try audio.startCapture() } catch { throw .audio(error) }
            } catch {
                stopCapture()
                throw error
            }
        }
        let thread = DeviceThread(name: "camagent-publish") { [self] in runControl() }
        control.withLock { $0.thread = thread }
        // Wait for the first outcome: connected, or the first failure.
        while true {
            if let outcome = control.withLock({ $0.firstOutcome }) {
                if case .failure(let error) = outcome {
                    unpublish()
                    throw error
                }
                return
            }
            _ = wake.wait(milliseconds: 100)
        }
    }

    /// Stops sending, tells the server (DELETE), stops capture.
    public func unpublish() {
        let thread: DeviceThread? = control.withLock { c in
            c.stop = true
            defer { c.thread = nil }
            return c.thread
        }
        wake.signal()
        if let thread, !thread.isCurrent { thread.join() }
        stopCapture()
        setState(.closed)
    }

    private func stopCapture() {
        videoPipeline?.setSending(false)
        audioPipeline?.setSending(false)
        video?.stop()
        video?.setConsumer(nil)
        audio?.stopCapture()
        audio?.bus.setCaptureConsumer(nil)
    }

    private func setState(_ state: PublisherState) {
        let changed = control.withLock { c -> Bool in
            guard c.state != state else { return false }
            c.state = state
            return true
        }
        if changed { onEvent(.stateChanged(state)) }
    }

    private func pipelineFailed(_ error: PublisherError) {
        control.withLock { $0.pipelineFailure = $0.pipelineFailure ?? error }
        wake.signal()
    }

    private var stopping: Bool { control.withLock { $0.stop } }

    // MARK: The control thread: connect, watch, reconnect

    private func runControl() {
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
                onEvent(.failed(error))
                if !everConnected {
                    control.withLock { $0.firstOutcome = .failure(error) }
                    wake.signal()
                    setState(.failed)
                    return
                }
                if case .video = error { setState(.failed); return }
                if case .audio = error { setState(.failed); return }
                if case .encoder = error { setState(.failed); return }
                guard settings.reconnect else { setState(.failed); return }
            case .dropped(let reason):
                onEvent(.streamDestroyed(reason: reason))
                guard settings.reconnect else { setState(.failed); return }
                delay = 1
            }
            attempt += 1
            logger.notice("reconnecting in \(delay) s")
            setState(.reconnecting)
            let until = MonotonicTimestamp.now() + .milliseconds(Int64(delay * 1000))
            while !stopping, MonotonicTimestamp.now() < until {
                _ = wake.wait(milliseconds: Int32(max(1, (until - MonotonicTimestamp.now()).milliseconds)))
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
        let transport: PeerTransport
        do {
            transport = try PeerTransport(certificate: certificate, media: media,
                                          includeLoopback: settings.includeLoopbackCandidates,
                                          stunServer: settings.stunServer, connectTimeout: settings.connectTimeout,
                                          logger: logger) { [wake] _ in wake.signal() }
        } catch {
            return .failed(.connection(error))
        }
        let (audioSSRC, videoSSRC) = media.state.withLock { s in
            (audioStream.map { s.streams[$0].ssrc } ?? 0, videoStream.map { s.streams[$0].ssrc } ?? 0)
        }
        let offer = PublisherOffer(
            iceUfrag: transport.iceUfrag, icePwd: transport.icePassword, fingerprint: certificate.fingerprint,
            candidates: transport.localCandidates.map { c in
                ICECandidate(foundation: c.foundation, priority: c.priority, address: c.ip, port: Int(c.port), type: c.type,
                             relatedAddress: c.relatedAddress?.ip, relatedPort: c.relatedAddress.map { Int($0.port) })
            },
            audio: audio != nil ? [.opus] : [], video: video != nil ? settings.codecPreference.map(\.description) : [],
            audioSSRC: audioSSRC, videoSSRC: videoSSRC, cname: transport.cname, streamID: settings.name)
        let offerText = offer.sessionDescription(sessionID: .random(in: 1...UInt64(Int64.max))).text
        logger.debug("offer:\n\(offerText)")
        let exchanged: (answer: String, resource: String)
        do { exchanged = try signaling.publish(offer: offerText) } catch { return .failed(error) }
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
        media.state.withLock { s in
            if let a = audioStream, let codec = answer.audio { s.streams[a].payloadType = UInt8(codec.payloadType) }
            if let v = videoStream, let codec = answer.video { s.streams[v].payloadType = UInt8(codec.payloadType) }
            s.keyframeRequested = true
        }
        if let codec = answer.video {
            videoPipeline?.configure(codec: codec.name.lowercased() == "h264" ? .h264 : .vp8)
            codecName.append(codec.name)
        }
        if let codec = answer.audio { codecName.append(codec.name) }
        control.withLock { $0.codec = codecName.joined(separator: "+") }
        transport.start(remote: PeerTransport.Remote(
            ufrag: answer.iceUfrag, password: answer.icePwd, isLite: answer.iceLite, fingerprint: answer.fingerprint,
            setup: answer.setup,
            candidates: answer.candidates.filter { $0.transport == "udp" && $0.component == 1 }.compactMap { c in
                guard let port = UInt16(exactly: c.port) else { return nil }
                return (c.address, port, c.priority, c.type, c.foundation)
            }))
        control.withLock { $0.transport = transport }
        defer {
            videoPipeline?.setSending(false)
            audioPipeline?.setSending(false)
            transport.stop()
            control.withLock { $0.transport = nil }
            signaling.unpublish()
        }
        var connected = false
        while true {
            if stopping { return .stopped }
            if let failure = control.withLock({ $0.pipelineFailure }) { return .failed(failure) }
            switch transport.phase {
            case .connected where !connected:
                connected = true
                control.withLock { c in
                    c.connections += 1
                    c.firstOutcome = c.firstOutcome ?? .success(())
                }
                wake.signal()
                videoPipeline?.setSending(answer.video != nil)
                audioPipeline?.setSending(answer.audio != nil)
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
        let (snapshot, pacerDropped, target) = media.state.withLock { s in (s, s.pacer.dropped, s.bitrate.target) }
        return control.withLock { c in
            let elapsed = c.lastStats.map { (now - $0.time).secondsDouble } ?? (now - media.origin).secondsDouble
            func stats(_ index: Int?, previous: (UInt64, UInt64)?) -> StreamStats? {
                guard let index else { return nil }
                let stream = snapshot.streams[index]
                let r = snapshot.reception[index], f = snapshot.feedback[index]
                let (prevBytes, prevFrames) = previous ?? (0, 0)
                let rate = elapsed > 0 ? Double(stream.bytesSent - prevBytes) * 8 / elapsed : 0
                let fps = elapsed > 0 ? Double(stream.framesSent - prevFrames) / elapsed : 0
                let codec = c.codec.split(separator: "+").first { part in
                    (stream.kind == .audio) == (part.lowercased() == "opus")
                }.map(String.init) ?? "none"
                return StreamStats(kind: stream.kind, codec: codec, ssrc: stream.ssrc, framesEncoded: stream.framesSent,
                                   keyframesEncoded: stream.keyframesSent, packetsSent: stream.packetsSent,
                                   bytesSent: stream.bytesSent, packetsRetransmitted: stream.packetsRetransmitted,
                                   bitrate: rate, frameRate: fps, targetBitrate: stream.kind == .video ? target : nil,
                                   packetsLost: r.packetsLost, fractionLost: r.fractionLost, jitter: r.jitter,
                                   rtt: r.roundTripTime, nackReceived: f.nackReceived, pliReceived: f.pliReceived,
                                   firReceived: f.firReceived)
            }
            let v = stats(videoStream, previous: c.lastStats?.video)
            let a = stats(audioStream, previous: c.lastStats?.audio)
            c.lastStats = (now, (v?.bytesSent ?? 0, v?.framesEncoded ?? 0), (a?.bytesSent ?? 0, a?.framesEncoded ?? 0))
            return PublisherStats(state: c.state, video: v, audio: a, selectedPair: c.transport?.selectedPair,
                                  packetsDroppedByPacer: pacerDropped, connections: c.connections)
        }
    }
}
