import ArgumentParser
import AudioDevices
import Foundation
import Logging
import MediaFiles
import MediaTypes
import Networking
import Publisher
import Session
import VideoSources
import ViewerServer
import WHIP

/// `camagent publish`: capture video and audio, encode once, and send them
/// over WebRTC to the viewers of the built-in server (the default), to a
/// WHIP server, or both, with a live status line (or JSON lines).
struct PublishCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish the camera and microphone over WebRTC: into a session of its own, a router session, or a WHIP server.",
        discussion: """
        Without --whip or --session, camagent runs the router in-process (--listen, default 0.0.0.0:8080) \
        with one session, publishes each camera into it, and prints the session page's URL with a subscriber \
        token, an operator's with a moderator token (it may talk back), each stream's WHEP endpoint, and the \
        single-stream viewer page with its access token; with --whip or --session it publishes there instead; \
        with --listen as well, it does both.
        Exit codes: 80 server unreachable (refused, no route, timeout), 81 unauthorized (401/403: \
        bad or missing token), 82 the server refused the stream (404, other 4xx, 5xx, unusable answer), \
        83 the WebRTC connection failed (ICE, DTLS, fingerprint mismatch), 84 the viewer server could not \
        listen (address in use, no such address); capture errors as for `capture`.
        """)

    @OptionGroup var video: VideoSourceOptions

    @Option(help: "Audio: an ALSA capture device, 'auto' (the default device, silence without a sound card), 'test-tone' (a 1 kHz sine), 'file:PATH' (a 16-bit PCM WAV played once, then silence: tests and demos) or 'none'.")
    var audio = "auto"

    @Option(help: "Audio channels: 1 or 2.")
    var channels = 1

    @Option(help: "WHIP endpoint URL (http:// or https://); without it the built-in viewer serves the stream.")
    var whip: String?

    @Option(help: "A camagent router session to publish into (http://HOST:PORT/v2/sessions/SID), over WHIP with --token, a publisher token of that session.")
    var session: String?

    @Option(help: "The stream's name in its session (--session, or the built-in one), which subscribers see and `subscribe --name` picks. Default: the camera's device. With several cameras each stream is \"NAME: camera N: DEVICE\" (without --name, \"camera N: DEVICE\").")
    var name: String?

    @Flag(help: "Live captions of this stream's audio (publishCaptions), recognised on this machine. In its own session (no --whip or --session) they start at once and show on the session page; with --session the router recognises speech while that session's captions run (POST /v2/sessions/SID/captions) and sends the text to subscribers that want it. Needs audio.")
    var captions = false

    @Flag(help: "With --session or --whip: also send each frame at half the width and height, on an SSRC of its own (simulcast, a=ssrc-group:SIM), so camagent's router can send subscribers that ask for a smaller picture (preferredResolution) the small one. Costs a second encode: 1.4-1.6 times the CPU of one layer at 720p.")
    var simulcast = false

    @Flag(name: .customLong("audio-fallback"), inversion: .prefixedNo,
          help: "Let the session stop sending video to a subscriber under heavy loss, and send it again when the loss clears (OpenTok's audio fallback): a router's with --session, its own otherwise.")
    var audioFallback = true

    @Option(help: "Address and port of the built-in viewer server (default 0.0.0.0:8080 when there is no --whip; port 0 picks a free one).")
    var listen: String?

    @Flag(help: "Serve viewers without an access token (anyone who can reach the port may watch).")
    var open = false

    @Option(help: "Access token for viewers (default: a random one, printed with the viewer URL).")
    var viewerToken: String?

    @Option(help: "File holding the viewers' access token, made (mode 0600, a random token) when missing; the token is then never printed: `camagent status` shows the viewer URL. The service uses /var/lib/camagent/viewer-token.")
    var viewerTokenFile: String?

    @Option(help: "Seconds without ICE consent from a viewer before it is dropped (RFC 7675 says 30).")
    var viewerTimeout = 30.0

    @Option(help: "Bearer token for the WHIP server.")
    var token: String?

    @Option(help: "Video codec to offer: vp8 or h264.", transform: { text in
        guard let codec = VideoCodec(rawValue: text.lowercased()) else { throw ValidationError("--codec takes vp8 or h264") }
        return codec
    })
    var codec: VideoCodec = .vp8

    @Option(help: "Video bitrate ceiling in kbit/s (the receiver's REMB and loss move it below).")
    var bitrate = 1000

    @Option(help: "Stop after this many seconds (default: run until interrupted).")
    var duration: Double?

    @Option(help: "STUN server host:port, for a server-reflexive ICE candidate.")
    var stun: String?

    @Option(help: "Seconds to wait for each HTTP exchange with the server.")
    var httpTimeout = 10.0

    @Option(help: "Seconds for ICE and DTLS to connect once the server answered.")
    var connectTimeout = 20.0

    @Flag(help: "Accept a WHIP server's TLS certificate without checking it (lab servers).")
    var insecureTLS = false

    @Option(help: "A PEM file of certificates to trust besides the system's: the router's self-signed certificate (router-tls.crt), or a private CA.")
    var tlsCA: String?

    // Named apart from the camera's --reconnect (wait for a lost device), which publish also takes.
    @Flag(name: .customLong("whip-reconnect"), inversion: .prefixedNo,
          help: "Reconnect to the WHIP server with backoff when an established session drops; with --session, join the session again (for up to 60 s) when its signalling drops.")
    var whipReconnect = true

    /// How long `--session` keeps joining again after its signalling dropped, before publish ends (83).
    static let sessionRejoinWindow = 60.0

    @Flag(help: "Offer loopback addresses as ICE candidates (server on the same host).")
    var loopbackCandidates = false

    @Flag(help: "Print events and stats as JSON lines on stdout.")
    var json = false

    @Flag(help: "Read commands on stdin, one per line: 'video off', 'video on', 'audio off', 'audio on' (publishVideo/publishAudio, live: nothing of it is encoded or sent while off; a session's subscribers hear videoDisabled with reason publishVideo); 'captions on', 'captions off' (publishCaptions of the stream with audio: its hasCaptions follows while the session's captions run).")
    var stdinControl = false

    @OptionGroup var global: GlobalOptions
    @OptionGroup var configFile: ConfigFileOption

    func validate() throws {
        guard channels == 1 || channels == 2 else { throw ValidationError("--channels takes 1 or 2") }
        guard (50...50_000).contains(bitrate) else { throw ValidationError("--bitrate takes 50 to 50000 kbit/s") }
        // NaN and infinity fail `> 0 && isFinite`: they must not reach a deadline's arithmetic.
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
        for (flag, value) in [("--http-timeout", httpTimeout), ("--connect-timeout", connectTimeout)]
        where !(value > 0 && value.isFinite) {
            throw ValidationError("\(flag) must be a positive number of seconds")
        }
        if let name, name.isEmpty || name.count > 200 { throw ValidationError("--name takes 1 to 200 characters") }
        if let listen, parseListenAddress(listen) == nil {
            throw ValidationError("--listen takes HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080")
        }
        guard (6...600).contains(viewerTimeout) else { throw ValidationError("--viewer-timeout takes 6 to 600 seconds") }
        if open && viewerToken != nil { throw ValidationError("--open and --viewer-token contradict each other") }
        if viewerTokenFile != nil && (open || viewerToken != nil) {
            throw ValidationError("--viewer-token-file contradicts --open and --viewer-token")
        }
        if let viewerToken, viewerToken.isEmpty { throw ValidationError("--viewer-token must not be empty") }
        if let stun, parseHostPort(stun) == nil { throw ValidationError("--stun takes host:port with a numeric IP") }
        if session != nil && whip != nil { throw ValidationError("--session and --whip contradict each other: --session is a WHIP endpoint too") }
        if session != nil && token == nil { throw ValidationError("--session needs --token: a publisher token of that session (camagent token)") }
        if simulcast && session == nil && whip == nil {
            throw ValidationError("--simulcast needs --session or --whip: the built-in session's viewers get the captured size")
        }
        // With a server and no --listen there is no built-in viewer for these to apply to.
        // (--viewer-token-file is left alone: the service passes it whatever the configuration.)
        if (session != nil || whip != nil) && listen == nil, open || viewerToken != nil {
            throw ValidationError("--open and --viewer-token are for the built-in viewer: with --session or --whip it runs only with --listen HOST:PORT")
        }
        if captions && session == nil && whip != nil && listen == nil {
            throw ValidationError("--captions needs a session: its own (no --whip, or --listen) or a router's (--session); a WHIP server is sent no captions")
        }
        if audio.hasPrefix("file:") && audio.count == 5 { throw ValidationError("--audio file: needs a path (file:PATH.wav)") }
        if video.devices.count > 1 && whip != nil {
            throw ValidationError("--whip takes one camera: a WHIP endpoint is one stream. Several cameras publish to the built-in viewer (a page each) or into a router session (--session, a stream each)")
        }
    }

    func run() throws {
        let logger = global.makeLogger()
        let out = EventPrinter(json: json)
        let service = PublishServiceNotifications(logger: logger)
        service.status("Starting: opening the camera and the microphone")
        // Read (or made) before any device opens: a bad token file fails at once (exit 78).
        let fileToken = try viewerTokenFile.map(loadViewerToken)
        try checkTrustedCertificatesFile(tlsCA)

        // Captions are recognised from the stream's audio: without audio, OpenTok's MissingAudioTrack.
        if captions && audio == "none" {
            printError("camagent: MissingAudioTrack: --captions needs audio to recognise, and --audio none publishes none")
            throw ExitCode(ExitCodes.missingAudioTrack)
        }
        // Asked of the router before any device opens, then joined: its streams are this client's
        // (routed: media over WHIP to the router; relayed: subscribers are answered here).
        let joined = try session.map { url in try joinSession(url, logger: logger, out: out) }
        // A subscriber token may join but not publish: said now, before any device opens.
        if let joined, let capabilities = joined.session.capabilities, !capabilities.publish {
            joined.stop()
            printFailure("this token cannot publish in \(joined.url) (its role may only subscribe)")
            throw ExitCode(ExitCodes.unauthorized)
        }
        // Audio first: a missing sound card should fail before the camera opens.
        var audioDevice: (any AudioDevice)?
        let format = AudioFormat(sampleRate: 48_000, channels: channels)
        switch audio {
        case "none": break
        case "test-tone": audioDevice = SilentAudioCapture(format: format, toneFrequency: 1000)
        case let name where name.hasPrefix("file:"):
            let path = String(name.dropFirst(5))
            let file: WAVFile
            do { file = try WAVFile(path: path) } catch {
                printError("camagent: --audio \(name): \(error)")
                throw ExitCode(ExitCodes.noSuchDevice)
            }
            let samples = file.converted(toRate: format.sampleRate, channels: format.channels)
            printError("audio:     \(path): \(file.sampleRate) Hz \(file.channels) ch, \((Double(samples.count / format.channels) / Double(format.sampleRate)).formatted(decimals: 1)) s, played once, then silence")
            audioDevice = SilentAudioCapture(format: format, playing: samples, name: name) { event in
                out.audioFile(event, path: path)
            }
        default:
            do {
                // --reconnect waits for a lost microphone as it does for a lost camera.
                let (device, warning) = try AudioCaptureChoice.make(name: audio, format: format, logger: logger,
                                                                    reconnect: video.reconnect)
                if let warning { printError("camagent: \(warning)") }
                audioDevice = device
            } catch { throw fail(error) }
        }

        // Each --device is a stream of its own (its own capture, encoder and
        // publisher); the microphone goes with the first camera.
        let cameraNames: [String?] = video.devices.isEmpty ? [nil] : video.devices
        let several = cameraNames.count > 1
        var captures: [(any VideoCapture)?] = []
        for name in cameraNames {
            guard name != "none" else { captures.append(nil); continue }
            let capture = video.makeCapture(device: name ?? video.resolvedDevice(logger: logger), logger: logger)
            do { try capture.initialize() } catch { throw fail(error) }
            captures.append(service.counting(capture))
        }

        // The built-in server runs when asked for, and always without a WHIP server.
        let firstEndpoint = session ?? whip
        let listenAddress = (listen ?? (firstEndpoint == nil ? "0.0.0.0:8080" : nil)).flatMap(parseListenAddress)
        var settings = PublisherSettings()
        settings.codecPreference = [codec]
        settings.videoBitrate = bitrate * 1000
        settings.includeLoopbackCandidates = loopbackCandidates
        settings.stunServer = stun.flatMap(parseHostPort)
        settings.connectTimeout = connectTimeout
        settings.reconnect = whipReconnect
        settings.viewerConsentTimeout = viewerTimeout
        settings.simulcast = simulcast

        var cameras: [PublishedCamera] = []
        // Set once the embedded session runs (after the publishers exist), read by their events.
        let embeddedSession = PThreadLocked<EmbeddedRouter?>(nil)
        for (index, capture) in captures.enumerated() {
            let cameraOut = several ? out.forCamera(index + 1) : out
            let microphone = index == 0 ? audioDevice : nil
            // In a session, several cameras are several streams: each is named after its camera.
            let device = capture?.captureSettings?.device ?? "audio"
            let streamName = several ? "\(name.map { "\($0): " } ?? "")camera \(index + 1): \(device)" : (name ?? device)
            var signaling: WHIPSignaling?
            if let whip {
                do {
                    let client = try WHIPClient(endpoint: whip, token: token, timeout: httpTimeout,
                                                allowInsecureTLS: insecureTLS, trustedCertificatesFile: tlsCA, logger: logger)
                    signaling = WHIPSignaling(client: client, logger: logger)
                } catch { throw ValidationError("\(error)") }
            }
            var cameraSettings = settings
            cameraSettings.videoTrack = capture != nil
            cameraSettings.audioTrack = microphone != nil
            // Captions are asked for the stream that carries the microphone (publishCaptions).
            cameraSettings.publishCaptions = captions && microphone != nil
            let publisher: Publisher
            do {
                let onEvent: @Sendable (PublisherEvent) -> Void = { event in
                    cameraOut.event(event)
                    // A subscriber of publish's own session that vanished: the session is told.
                    if case .viewerLeft(let id, let reason) = event {
                        embeddedSession.withLock { $0 }?.viewerLeft(viewerID: id, reason: reason)
                    }
                    if case .viewerVideoQuality(let id, let change) = event {
                        embeddedSession.withLock { $0 }?.viewerVideoQuality(viewerID: id, change: change)
                    }
                    // The camera came back in another mode: the session's stream says its new size.
                    if case .videoDimensions(let width, let height) = event {
                        embeddedSession.withLock { $0 }?.videoDimensions(camera: index + 1, width: width, height: height)
                    }
                    // publishAudio/publishVideo/publishCaptions (--stdin-control): the session's stream says so.
                    if case .publishing(let kind, let on) = event {
                        embeddedSession.withLock { $0 }?.publishing(camera: index + 1, kind: kind, on: on)
                    }
                    if case .publishingCaptions(let on) = event {
                        embeddedSession.withLock { $0 }?.publishingCaptions(camera: index + 1, on: on)
                    }
                }
                if let joined {
                    // The session gives it its signalling (routed: WHIP to the router, tied to this client).
                    publisher = try joined.session.makePublisher(settings: cameraSettings, videoCapture: capture,
                                                                 audioDevice: microphone, onEvent: onEvent)
                } else {
                    publisher = try Publisher(settings: cameraSettings, videoCapture: capture, audioDevice: microphone,
                                              signaling: signaling, logger: logger, onEvent: onEvent)
                }
            } catch let error as PublisherError {
                throw fail(error)
            } catch let error as SessionError {
                throw sessionFailure(error, joined?.url ?? "")
            }

            var negotiated = NegotiatedSummary(event: "negotiated", codec: codec == .vp8 ? "VP8" : "H264",
                                               audioCodec: microphone != nil ? "opus" : nil, whip: whip,
                                               listen: listenAddress.map { "\($0.host):\($0.port)" })
            if let s = capture?.captureSettings {
                negotiated.size = "\(s.outputFormat.width)x\(s.outputFormat.height)"
                negotiated.fps = s.grantedFramesPerSecond
                negotiated.device = s.device
                if settings.simulcast {
                    let full = FrameSize(width: s.outputFormat.width, height: s.outputFormat.height)
                    negotiated.simulcast = [full, PublisherSettings.simulcastSmallSize(of: full)].map(\.description)
                }
                if !json { cameraOut.say(s.negotiationText) }
            }
            negotiated.audioDevice = microphone?.captureSettings?.device
            if json { cameraOut.emit(negotiated) } else {
                let into = joined.map { "session \($0.url)" + ($0.isRelayed ? " (relayed)" : "") }
                let targets = [whip, into, listenAddress.map { "viewers on \($0.host):\($0.port)" }].compactMap { $0 }
                let layers = negotiated.simulcast.map { " (simulcast \($0.joined(separator: " and ")))" } ?? ""
                cameraOut.say("publish:   \(negotiated.codec)\(layers)\(negotiated.audioCodec.map { " + \($0)" } ?? "") to \(targets.joined(separator: " and "))")
            }
            cameras.append(PublishedCamera(publisher: publisher, out: cameraOut, negotiated: negotiated,
                                           streamName: streamName))
        }

        let stopRequested = PThreadLocked(false)
        // The camera whose first connection is under way: a Ctrl-C unpublishes it, which ends its
        // WHIP exchange (--http-timeout) and its wait for ICE and DTLS (--connect-timeout) at once.
        let connecting = PThreadLocked<Publisher?>(nil)
        let signals = SignalStop {
            stopRequested.withLock { $0 = true }
            connecting.withLock { $0 }?.unpublish()
        }
        defer { withExtendedLifetime(signals) {} }
        service.startWatchdog(hasCamera: captures.contains { $0 != nil })
        service.status(firstEndpoint.map { "Starting: connecting to \($0)" } ?? "Starting: capture and the viewer server")
        for (index, camera) in cameras.enumerated() {
            // Made known before the stop is looked at: a Ctrl-C either comes before that look
            // (and is seen) or finds the publisher to unpublish.
            connecting.withLock { $0 = camera.publisher }
            defer { connecting.withLock { $0 = nil } }
            do {
                if stopRequested.withLock({ $0 }) { throw PublisherError.unpublished }
                if let joined {
                    try joined.publish(camera.publisher, name: camera.streamName, audioFallback: audioFallback)
                } else {
                    try camera.publisher.publish()
                }
            } catch {
                joined?.stop()
                for started in cameras[..<index] { started.publisher.unpublish() }
                out.finishStatusLine()
                if Self.isUnpublished(error) {
                    // Stopped (Ctrl-C, SIGTERM) before this camera's first connection was made.
                    out.stoppedConnecting()
                    return
                }
                switch error {
                case let error as PublisherError:
                    if out.hasShownFailure(error.description) { throw ExitCode(ExitCodes.code(for: error)) }
                    throw fail(error)
                case let error as SessionError:
                    if case .publisher(let e) = error, out.hasShownFailure(e.description) { throw ExitCode(ExitCodes.code(for: e)) }
                    throw sessionFailure(error, joined?.url ?? "")
                default: throw error
                }
            }
        }
        // The built-in server: the router in-process, one session, the cameras' streams in it.
        var server: EmbeddedRouter?
        if let listenAddress {
            let configuration = ViewerServerConfiguration(
                host: listenAddress.host, port: listenAddress.port,
                token: open ? nil : (fileToken ?? viewerToken ?? ViewerServerConfiguration.randomToken()))
            do {
                // Captions of the cameras' own streams, in the session, when not publishing into another.
                server = try EmbeddedRouter.start(configuration: configuration, cameras: cameras.map(\.embeddedCamera),
                                                  settings: settings, captions: captions && session == nil,
                                                  audioFallback: audioFallback,
                                                  logger: logger) { text in out.say(text) }
                embeddedSession.withLock { $0 = server }
            } catch {
                for camera in cameras { camera.publisher.unpublish() }
                out.finishStatusLine()
                printError("camagent: the viewer server cannot listen on \(listenAddress.host):\(listenAddress.port): \(error)")
                throw ExitCode(ExitCodes.listenFailed)
            }
            for (index, camera) in cameras.enumerated() {
                camera.out.serving(server!, camera: index + 1, listenHost: listenAddress.host, tokenFile: viewerTokenFile)
            }
        }
        let what = cameras.map { camera in camera.negotiated.device.map { "\($0) \(camera.negotiated.size ?? "")" } ?? "audio" }
        let targets = [firstEndpoint, listenAddress.map { "viewers on \($0.host):\(server?.boundPort ?? $0.port)" }].compactMap { $0 }
        service.ready(status: "Publishing \(what.joined(separator: ", ")) to \(targets.joined(separator: " and "))")
        if stdinControl {
            let publishers = cameras.map(\.publisher)
            StdinControl.start(takesCaptions: true) { command in
                switch command {
                case .media(let kind, let on):
                    for publisher in publishers {
                        if kind == .video { publisher.publishVideo = on } else { publisher.publishAudio = on }
                    }
                case .captions(let on):
                    // The stream that carries the microphone; with none, MissingAudioTrack is said.
                    let voiced = publishers.filter(\.media.audio)
                    if voiced.isEmpty, on { printError("camagent: \(PublisherError.missingAudioTrack)") }
                    for publisher in voiced { try? publisher.setPublishCaptions(on) }
                case .preferredResolution:
                    break   // subscribe's command: not taken here
                }
            }
        }
        let started = MonotonicTimestamp.now()
        var nextStats = started + .seconds(1)
        while !stopRequested.withLock({ $0 }) {
            if let duration, (MonotonicTimestamp.now() - started).secondsDouble >= duration { break }
            if cameras.contains(where: { $0.publisher.state == .failed }) { break }
            if joined?.endReason != nil { break }
            Thread.sleep(forTimeInterval: 0.1)
            service.loopTurned()
            if MonotonicTimestamp.now() >= nextStats {
                nextStats = nextStats + .seconds(1)
                out.stats(cameras.map { ($0.out, $0.publisher.stats()) })
            }
        }
        // How each stood while it ran: the summary's state and pair. Its counts are read below, once
        // nothing is sent any more (a packet sent between a count and the stop reached the peer uncounted).
        let running = cameras.map { $0.publisher.stats() }
        // The first camera that failed says how it ended; the others stop with it.
        let failed = cameras.first { $0.publisher.state == .failed }?.publisher
        let failure = failed.map { $0.failure ?? .connection(.peerClosed) }
        let sessionEnded = joined?.endReason
        service.stopping(status: failure.map { "Stopping: \($0)" } ?? sessionEnded.map { "Stopping: \($0)" } ?? "Stopping")
        joined?.stop()
        // The session hears the streams end (clientDisconnected) before their media stops.
        server?.stop()
        for camera in cameras { camera.publisher.unpublish() }
        out.finishStatusLine()
        for (camera, before) in zip(cameras, running) {
            var final = camera.publisher.stats()
            final.state = before.state
            final.selectedPair = before.selectedPair
            camera.out.summary(final)
        }
        // The exit code says what ended it: a lost camera is 74, a dropped session 83.
        if let failure { throw ExitCode(ExitCodes.code(for: failure)) }
        if let sessionEnded {
            printError("camagent: \(sessionEnded)")
            throw ExitCode(ExitCodes.connectionFailed)
        }
    }

    /// A publisher unpublished while it connected: only a stop asked for does that.
    private static func isUnpublished(_ error: any Error) -> Bool {
        switch error {
        case PublisherError.unpublished, SessionError.publisher(.unpublished): true
        default: false
        }
    }

    /// The --session, asked of the router (its media mode, with the token)
    /// and joined, before any device opens: a refusal fails at once.
    private func joinSession(_ url: String, logger: Logger, out: EventPrinter) throws -> JoinedSession {
        do {
            _ = try Session.mediaMode(url: url, token: token ?? "", timeout: httpTimeout, trustedCertificatesFile: tlsCA)
            return try JoinedSession.join(url: url, token: token ?? "", timeout: httpTimeout, allowInsecureTLS: insecureTLS,
                                          trustedCertificatesFile: tlsCA,
                                          rejoinWindow: whipReconnect ? Self.sessionRejoinWindow : 0,
                                          logger: logger) { text in out.say(text) }
        } catch {
            var reason = error.description
            if case .signalling(let e) = error { reason = e.description.hasPrefix("WHIP: ") ? String(e.description.dropFirst(6)) : e.description }
            printError("camagent: cannot join the session \(url): \(reason)")
            throw ExitCode(Self.exitCode(for: error))
        }
    }

    /// Publishing into the session failed: a publisher's own failure is told
    /// as it would be without a session, anything else as the session's.
    private func sessionFailure(_ error: SessionError, _ url: String) -> ExitCode {
        if case .publisher(let e) = error { return fail(e) }
        printError("camagent: cannot publish into the session \(url): \(error)")
        return ExitCode(Self.exitCode(for: error))
    }

    /// A session's refusal as WHIP's would be: 401/403 the token (81), any other status 82.
    private static func exitCode(for error: SessionError) -> Int32 {
        switch error {
        case .refused(let status, _): status == 401 || status == 403 ? ExitCodes.unauthorized : ExitCodes.serverRefused
        default: ExitCodes.code(for: error)
        }
    }
}

/// One camera's stream while publishing: its publisher and where its events go.
struct PublishedCamera {
    let publisher: Publisher
    let out: EventPrinter
    let negotiated: NegotiatedSummary
    /// Its stream's name in a session: --name, or its device ("camera N: DEVICE" with several).
    var streamName = ""

    /// What the embedded session is told about this stream.
    var embeddedCamera: SessionCamera {
        let size = negotiated.size?.split(separator: "x").compactMap { Int($0) } ?? []
        return .init(publisher: publisher, name: streamName.isEmpty ? (negotiated.device ?? "camagent") : streamName,
                     hasAudio: negotiated.audioCodec != nil, hasVideo: negotiated.size != nil,
                     width: size.first ?? 0, height: size.count == 2 ? size[1] : 0)
    }
}

/// "1.2.3.4:3478" or "[::1]:3478".
func parseHostPort(_ text: String) -> TransportAddress? {
    guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return nil }
    return TransportAddress(ip: host, port: port)
}

/// "0.0.0.0:8080", "[::]:8080", "localhost:0".
func parseListenAddress(_ text: String) -> (host: String, port: Int)? {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
          (0...65535).contains(port) else { return nil }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    guard !host.isEmpty else { return nil }
    return (host, port)
}

struct NegotiatedSummary: Encodable {
    var event: String
    var codec: String
    var audioCodec: String?
    var whip: String?
    var listen: String?
    var size: String?
    var fps: Double?
    var device: String?
    var audioDevice: String?
    /// With --simulcast: each layer's size, largest first.
    var simulcast: [String]?
}

/// Prints publisher events: JSON lines on stdout, or a status line on stderr.
/// With several cameras each has a printer of its own (`forCamera`), whose
/// JSON lines carry `"camera": N` and whose text lines start "camera N:".
final class EventPrinter: Sendable {
    let json: Bool
    /// The camera this printer speaks for, when there are several.
    let camera: Int?
    private let output: SharedOutput

    /// What the cameras' printers share: the terminal's status line.
    private final class SharedOutput: Sendable {
        let statusLine = StatusLine()
        /// The last failure a `failed` event showed in text, so the exit does not say it again.
        let lastFailure = PThreadLocked<String?>(nil)
    }

    /// A `failed` event already showed this failure on stderr (text mode).
    func hasShownFailure(_ text: String) -> Bool { output.lastFailure.withLock { $0 == text } }

    convenience init(json: Bool) { self.init(json: json, camera: nil, output: SharedOutput()) }

    private init(json: Bool, camera: Int?, output: SharedOutput) {
        self.json = json
        self.camera = camera
        self.output = output
    }

    /// The printer of camera N (1-based), writing to the same stdout and status line.
    func forCamera(_ number: Int) -> EventPrinter { EventPrinter(json: json, camera: number, output: output) }

    private var statusLine: StatusLine { output.statusLine }

    func line(_ text: String) {
        printLine(text)
    }

    /// One JSON line, labelled with the camera when there are several.
    func emit<T: Encodable>(_ value: T) {
        var text = JSONOutput.line(value)
        if let camera, text.hasPrefix("{") {
            text = "{\"camera\":\(camera)" + (text == "{}" ? "}" : "," + text.dropFirst())
        }
        line(text)
    }

    /// Text on stderr, each line labelled with the camera when there are several.
    func say(_ text: String) {
        guard let camera else { return printError(text) }
        printError(text.split(separator: "\n", omittingEmptySubsequences: false).map { "camera \(camera): \($0)" }.joined(separator: "\n"))
    }

    private struct AudioFileLine: Encodable {
        var event = "audio"
        var state: String
        var path: String
        /// CLOCK_MONOTONIC seconds of the chunk (Python's time.monotonic()).
        var monotonic: Double
    }

    /// A played file's start and end, with the capture time of their chunks.
    func audioFile(_ event: SilentAudioCapture.ClipEvent, path: String) {
        let (state, time) = switch event {
        case .started(let t): ("fileStarted", t)
        case .ended(let t): ("fileEnded", t)
        }
        if json { emit(AudioFileLine(state: state, path: path, monotonic: time.seconds)) } else {
            say("audio:     \(path) \(state == "fileStarted" ? "started" : "ended, silence follows")")
        }
    }

    private struct StateLine: Encodable { var event = "state"; var state: String; var resource: String?; var codec: String?; var selectedPair: String?; var reason: String?; var error: String? }

    func event(_ event: PublisherEvent) {
        switch event {
        case .stateChanged(let state):
            if json { emit(StateLine(state: state.rawValue)) } else { status("\(state.rawValue)…") }
        case .streamCreated(let resource, let codec, let pair):
            if json {
                emit(StateLine(state: "streaming", resource: resource, codec: codec, selectedPair: pair))
            } else {
                finishStatusLine()
                say("streaming: \(codec) via \(pair ?? "?"), resource \(resource)")
            }
        case .streamDestroyed(let reason):
            if json { emit(StateLine(state: "dropped", reason: reason)) } else {
                finishStatusLine()
                say("camagent: stream dropped: \(reason)")
            }
        case .failed(let error):
            if json { emit(StateLine(state: "error", error: error.description)) } else {
                finishStatusLine()
                if camera == nil { printFailure(error.description) } else { say("camagent: \(error)") }
                output.lastFailure.withLock { $0 = error.description }
            }
        case .viewerJoined(let id, let codec, let pair):
            viewersJoined.withLock { $0 += 1 }
            if json { emit(ViewerLine(state: "joined", id: id, codec: codec, selectedPair: pair)) } else {
                finishStatusLine()
                say("viewer:    \(id) joined (\(codec) via \(pair ?? "?"))")
            }
        case .viewerVideoQuality(let id, let change):
            if json { emit(ViewerLine(state: change.rawValue, id: id)) } else {
                finishStatusLine()
                say("viewer:    \(id): \(change.rawValue) (audio fallback)")
            }
        case .viewerLeft(let id, let reason):
            if json { emit(ViewerLine(state: "left", id: id, reason: reason)) } else {
                finishStatusLine()
                say("viewer:    \(id) left: \(reason)")
            }
        case .deviceLost(let kind, let reason):
            if json { emit(DeviceLine(state: "lost", kind: kind.rawValue, reason: reason)) } else {
                finishStatusLine()
                say("device:    \(kind.rawValue) lost (\(reason)); sessions stay up, waiting for it")
            }
        case .deviceRestored(let kind, let description):
            if json { emit(DeviceLine(state: "restored", kind: kind.rawValue, reason: description)) } else {
                finishStatusLine()
                say("device:    \(kind.rawValue) \(description)")
            }
        case .videoDimensions(let width, let height):
            if json { emit(VideoSizeLine(width: width, height: height)) } else {
                finishStatusLine()
                say("video:     sending \(width)x\(height)")
            }
        case .publishing(let kind, let on):
            if json { emit(PublishingLine(kind: kind.rawValue, on: on)) } else {
                finishStatusLine()
                say("publish:   \(kind.rawValue) \(on ? "on" : "off")")
            }
        case .publishingCaptions(let on):
            if json { emit(PublishingLine(kind: "captions", on: on)) } else {
                finishStatusLine()
                say("publish:   captions \(on ? "on" : "off")")
            }
        }
    }

    private struct PublishingLine: Encodable { var event = "publishing"; var kind: String; var on: Bool }

    private struct VideoSizeLine: Encodable { var event = "videoDimensions"; var width: Int; var height: Int }
    private struct DeviceLine: Encodable { var event = "device"; var state: String; var kind: String; var reason: String }
    private struct ViewerLine: Encodable { var event = "viewer"; var state: String; var id: String; var codec: String?; var selectedPair: String?; var reason: String? }
    private struct ServingLine: Encodable {
        var event = "serving"; var url: String; var whep: String; var port: Int; var token: String?; var tokenFile: String?
        /// The embedded session: its id, this camera's stream and WHEP endpoint, the session page's link and tokens.
        var sessionId: String; var streamId: String; var streamWhep: String; var sessionUrl: String?
        var subscriberToken: String?; var moderatorToken: String?
    }
    private let viewersJoined = PThreadLocked(0)

    /// Where to watch: the session page (every stream of the embedded
    /// session, with a subscriber token, and with a moderator's for an
    /// operator who talks back), the viewer page's URL (with the token,
    /// unless it lives in `tokenFile`: logs are no place for it, nor for the
    /// session's tokens then) and the WHEP endpoints.
    func serving(_ server: EmbeddedRouter, camera number: Int, listenHost: String, tokenFile: String? = nil) {
        var host = listenHost
        if host == "0.0.0.0" || host == "::" {
            // Any address: name one a LAN viewer can use.
            host = HostInterfaces.addresses(includeLoopback: false).first { $0.ip.contains(".") }?.ip ?? "127.0.0.1"
        }
        let port = server.boundPort ?? 0
        let token = server.viewerRoutes.token
        var url = ViewerRoutes.viewerURL(publicHost: host, port: port, token: token, camera: number)
        if tokenFile != nil { url = String(url.prefix { $0 != "?" }) }
        let base = "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        let whep = base + ViewerRoutes.cameraPath(number) + "whep"
        let sessionID = server.sessionID, streamID = server.streamID(camera: number) ?? ""
        let sessionPage = base + "/?session=" + sessionID
        // Printed once, with the first camera: the session holds them all.
        let subscriberToken = number == 1 && tokenFile == nil ? server.token(role: .subscriber) : nil
        let moderatorToken = number == 1 && tokenFile == nil ? server.token(role: .moderator) : nil
        let streamWHEP = base + "/v2/sessions/\(sessionID)/streams/\(streamID)/subscribe"
        if json {
            emit(ServingLine(url: url, whep: whep, port: port,
                             token: tokenFile == nil ? token : nil, tokenFile: tokenFile,
                             sessionId: sessionID, streamId: streamID, streamWhep: streamWHEP,
                             sessionUrl: subscriberToken.map { sessionPage + "&token=" + $0 },
                             subscriberToken: subscriberToken, moderatorToken: moderatorToken))
        } else {
            finishStatusLine()
            if number == 1 {
                if let subscriberToken {
                    say("session:   open \(sessionPage)&token=\(subscriberToken)")
                } else {
                    say("session:   \(sessionID) (its tokens are not printed with --viewer-token-file)")
                }
                if let moderatorToken {
                    say("operator:  open \(sessionPage)&token=\(moderatorToken)&publish=1 (may talk back: publishes the browser's camera and microphone)")
                }
            }
            say("stream:    \(streamID) (WHEP \(streamWHEP), with a session token)")
            say("viewer:    open \(url)" + (tokenFile.map { " (with the token in \($0): camagent status prints the whole URL)" } ?? ""))
            say("whep:      \(whep)\(token == nil ? " (open: no token)" : " (token required)")")
        }
    }

    private struct StatsLine: Encodable {
        var event: String; var state: String; var video: StreamStats?; var audio: StreamStats?; var selectedPair: String?
        var connections: Int; var packetsDroppedByPacer: UInt64; var framesEncoded: UInt64; var framesDropped: UInt64
        var framesDroppedEncoderBusy: UInt64; var videoDeviceLost: Bool
        var frameRate: Double; var viewers: Int; var viewerStats: [ViewerStats]
        /// The same numbers as a W3C webrtc-stats report (outbound-rtp, remote-inbound-rtp, candidate-pair).
        var rtcStats: [RTCStatsEntry]
        init(_ event: String, _ s: PublisherStats) {
            self.event = event
            state = s.state.rawValue
            video = s.video
            audio = s.audio
            selectedPair = s.selectedPair
            connections = s.connections
            packetsDroppedByPacer = s.packetsDroppedByPacer
            framesEncoded = s.framesEncoded
            framesDropped = s.framesDropped
            framesDroppedEncoderBusy = s.framesDroppedEncoderBusy
            videoDeviceLost = s.videoDeviceLost
            frameRate = s.frameRate
            viewers = s.viewers.filter { $0.state == "connected" }.count
            viewerStats = s.viewers
            rtcStats = s.rtcStatsReport(timestamp: Date().timeIntervalSince1970 * 1000)
        }
    }

    /// Every camera's stats: a JSON line each, or one status line for them all.
    func stats(_ cameras: [(out: EventPrinter, stats: PublisherStats)]) {
        if json {
            for camera in cameras { camera.out.emit(StatsLine("stats", camera.stats)) }
            return
        }
        statusLine.show(cameras.map { camera in
            (camera.out.camera.map { "camera \($0): " } ?? "") + Self.statsText(camera.stats)
        }.joined(separator: " | "))
    }

    private static func statsText(_ s: PublisherStats) -> String {
        var parts = [s.state.rawValue + (s.videoDeviceLost ? " (camera lost)" : "")]
        let watching = s.viewers.filter { $0.state == "connected" }
        if s.state == .serving || !s.viewers.isEmpty { parts.append("\(watching.count) viewer(s)") }
        parts.append("\(s.frameRate.formatted(decimals: 1)) fps")
        if let bitrate = s.video?.bitrate ?? watching.compactMap({ $0.video?.bitrate }).max() {
            parts.append("video \(Int(bitrate / 1000)) kbps")
        }
        if let a = s.audio ?? watching.first?.audio { parts.append("audio \(Int(a.bitrate / 1000)) kbps") }
        let rtt = s.video?.rtt ?? s.audio?.rtt ?? watching.compactMap({ $0.video?.rtt ?? $0.audio?.rtt }).max()
        parts.append("rtt " + (rtt.map { "\(Int($0 * 1000)) ms" } ?? "–"))
        let lost = (s.video?.packetsLost ?? 0) + (s.audio?.packetsLost ?? 0)
            + watching.reduce(0) { $0 + ($1.video?.packetsLost ?? 0) + ($1.audio?.packetsLost ?? 0) }
        parts.append("lost \(lost)")
        return parts.joined(separator: "  ")
    }

    private struct StoppedLine: Encodable {
        var event = "publish"
        var state = "stopped"
        var reason = "stopped while connecting"
    }

    /// Stopped (Ctrl-C, SIGTERM) before the first connection was made: a clean end, exit 0.
    func stoppedConnecting() {
        if json { emit(StoppedLine()) } else {
            finishStatusLine()
            say("publish:   stopped while connecting")
        }
    }

    func summary(_ s: PublisherStats) {
        if json {
            emit(StatsLine("summary", s))
        } else {
            var text = "summary:   \(s.framesEncoded) frames encoded, \(viewersJoined.withLock { $0 }) viewer(s) served, \(s.connections) WHIP connection(s)"
            if let v = s.video { text += "; video \(v.framesEncoded) frames, \(v.packetsSent) packets, \(v.bytesSent) bytes, \(v.nackReceived) NACK, \(v.pliReceived) PLI" }
            if let a = s.audio { text += "; audio \(a.framesEncoded) frames, \(a.packetsSent) packets" }
            say(text)
        }
    }

    private func status(_ text: String) { statusLine.show((camera.map { "camera \($0): " } ?? "") + text) }

    func finishStatusLine() { statusLine.finish() }
}

extension ExitCodes {
    /// The WHIP server could not be reached (refused, no route, DNS, timeout, TLS).
    static let serverUnreachable: Int32 = 80
    /// The server said 401/403: the token is missing or wrong.
    static let unauthorized: Int32 = 81
    /// The server refused the stream (404, other 4xx, 5xx) or answered unusably.
    static let serverRefused: Int32 = 82
    /// ICE, DTLS or SRTP did not come up, the fingerprint did not match, or the session failed for good.
    static let connectionFailed: Int32 = 83
    /// The built-in viewer server could not listen (address in use, unknown address).
    static let listenFailed: Int32 = 84
    /// `--captions` without audio (OpenTok's MissingAudioTrack).
    static let missingAudioTrack: Int32 = 87

    static func code(for error: PublisherError) -> Int32 {
        switch error {
        case .signaling(let e):
            switch e.kind {
            case .badAddress: usage
            case .unreachable: serverUnreachable
            case .unauthorized: unauthorized
            case .refused: serverRefused
            }
        case .badAnswer: serverRefused
        case .connection: connectionFailed
        case .video(let e): code(for: e)
        case .audio(let e): code(for: e)
        case .encoder: driverError
        case .nothingToPublish: usage
        case .missingAudioTrack: missingAudioTrack
        case .unpublished: ok   // a Ctrl-C while connecting: a clean stop, said as such
        }
    }
}

func fail(_ error: PublisherError) -> ExitCode {
    printFailure("\(error)")
    return ExitCode(ExitCodes.code(for: error))
}
