import ArgumentParser
import Foundation
import Logging
import MediaTypes
import Networking
import Publisher
import Session
import Subscriber
import WHIP

/// `camagent subscribe`: receive one stream (of a router session, or from
/// any WHEP endpoint), decode it, and write it out.
struct SubscribeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Receive a stream over WHEP, decode it and write it out (Y4M video, WAV audio).",
        discussion: """
            From a camagent router session: --session http://HOST:PORT/v2/sessions/SID --token T, with --stream ID,
            --name NAME or --first (the default). From any WHEP server: --whep URL [--token T].
            """
    )

    @Option(help: "A camagent router session (http://HOST:PORT/v2/sessions/SID); needs --token, a subscriber token of it.")
    var session: String?

    @Option(help: "A WHEP endpoint URL (camagent's built-in viewer: http://HOST:PORT/whep).")
    var whep: String?

    @Option(help: "Bearer token: the session's subscriber token, or the WHEP server's.")
    var token: String?

    @Option(help: "With --session: the id of the stream to receive.")
    var stream: String?

    @Option(help: "With --session: the name of the stream to receive.")
    var name: String?

    @Flag(help: "With --session: receive the first stream (the default without --stream or --name).")
    var first = false

    @Option(help: "With --session: seconds to wait for the stream to be published.")
    var waitForStream = 10.0

    @Option(help: "Where video goes: a .y4m file, a V4L2 output node (/dev/videoN of v4l2loopback: other programs see a camera), or 'none' (decoded, then dropped).")
    var videoOut = "none"

    @Option(help: "Where audio goes: a .wav file, 'alsa:DEVICE' (alsa:default, alsa:hw:1,0, alsa:plughw:…), or 'none' (decoded, then dropped).")
    var audioOut = "none"

    @Option(help: "Audio channels written: 1 or 2.")
    var channels = 1

    @Flag(help: "Do not receive audio.")
    var noAudio = false

    @Flag(help: "Do not receive video.")
    var noVideo = false

    @Option(help: "With --session: the frame rate to receive at most (preferredFrameRate). camagent's router then sends half the publisher's frames when it makes VP8 temporal layers, as camagent publish does; other publishers' streams come whole.")
    var preferredFrameRate: Double?

    @Option(help: "With --session: the picture size to receive at most, WxH (preferredResolution). camagent's router then sends the largest simulcast layer that fits (the smallest when none does) when the publisher simulcasts, as camagent publish does with its simulcast option; other streams come at their one size.")
    var preferredResolution: String?

    @Option(help: "Stop after this many seconds, counted from the start: waiting for the stream and connecting count (default: until the stream ends or interrupted).")
    var duration: Double?

    @Option(help: "Seconds for ICE and DTLS to connect once the server answered.")
    var connectTimeout = 20.0

    @Option(help: "After the media stops, seconds of reconnecting before giving up.")
    var reconnectWindow = 30.0

    @Option(help: "Seconds to wait for each HTTP exchange with the server.")
    var httpTimeout = 10.0

    @Option(help: "STUN server host:port, for a server-reflexive ICE candidate.")
    var stun: String?

    @Flag(help: "Accept a server's TLS certificate without checking it (lab servers).")
    var insecureTLS = false

    @Option(help: "A PEM file of certificates to trust besides the system's: the router's self-signed certificate (router-tls.crt), or a private CA.")
    var tlsCA: String?

    @Flag(help: "Offer loopback addresses as ICE candidates (server on the same host).")
    var loopbackCandidates = false

    @Flag(help: "With --session: receive the stream's live captions (subscribeToCaptions) and print them: each final as a line 'caption: TEXT' on stdout (partials on the status line), or every caption as a JSON line with --json.")
    var captions = false

    @Flag(help: "Print events and stats as JSON lines on stdout.")
    var json = false

    @Flag(help: "Read commands on stdin, one per line: 'video off', 'video on', 'audio off', 'audio on' (subscribeToVideo/Audio, live); with --session also 'resolution WxH' and 'resolution any' (preferredResolution, live).")
    var stdinControl = false

    @OptionGroup var global: GlobalOptions
    @OptionGroup var configFile: ConfigFileOption

    /// --preferred-resolution's WxH, within what the router takes.
    private func preferredSize(_ text: String) -> FrameSize? {
        FrameSize(parsing: text).flatMap { $0.width <= 7680 && $0.height <= 4320 ? $0 : nil }
    }

    func validate() throws {
        if (session == nil) == (whep == nil) { throw ValidationError("give one of --session URL or --whep URL") }
        if session != nil && token == nil { throw ValidationError("--session needs --token: a subscriber token of that session (camagent token)") }
        if whep != nil && (stream != nil || name != nil || first) { throw ValidationError("--stream, --name and --first choose a stream of a --session") }
        if whep != nil && captions { throw ValidationError("--captions needs --session: captions come over the session's signalling") }
        if [stream != nil, name != nil, first].filter({ $0 }).count > 1 {
            throw ValidationError("--stream, --name and --first contradict each other: give one")
        }
        if noVideo && videoOut != "none" { throw ValidationError("--no-video leaves video out: --video-out \(videoOut) would get nothing") }
        if noAudio && audioOut != "none" { throw ValidationError("--no-audio leaves audio out: --audio-out \(audioOut) would get nothing") }
        if whep != nil && preferredFrameRate != nil {
            throw ValidationError("--preferred-frame-rate needs --session: the wish goes over the session's signalling")
        }
        if whep != nil && preferredResolution != nil {
            throw ValidationError("--preferred-resolution needs --session: the wish goes over the session's signalling")
        }
        if let text = preferredResolution, preferredSize(text) == nil {
            throw ValidationError("--preferred-resolution takes WxH, 1x1 to 7680x4320 (got \(text))")
        }
        if let rate = preferredFrameRate, !(1...120).contains(rate) {
            throw ValidationError("--preferred-frame-rate must be 1 to 120")
        }
        if noAudio && noVideo { throw ValidationError("--no-audio and --no-video together leave nothing to receive") }
        if !(1...2).contains(channels) { throw ValidationError("--channels must be 1 or 2") }
        if videoOut != "none" && !videoOut.hasSuffix(".y4m") && !videoOut.hasPrefix("/dev/") {
            throw ValidationError("--video-out takes a .y4m file, a /dev/videoN output node or 'none' (got \(videoOut))")
        }
        if audioOut != "none" && !audioOut.hasSuffix(".wav") && !(audioOut.hasPrefix("alsa:") && audioOut.count > 5) {
            throw ValidationError("--audio-out takes a .wav file, alsa:DEVICE or 'none' (got \(audioOut))")
        }
        if let stun, parseHostPort(stun) == nil { throw ValidationError("--stun takes host:port with a numeric address (got \(stun))") }
        for (flag, value) in [("--wait-for-stream", waitForStream), ("--connect-timeout", connectTimeout),
                              ("--reconnect-window", reconnectWindow), ("--http-timeout", httpTimeout)]
        where !(value > 0 && value.isFinite) {
            throw ValidationError("\(flag) must be a positive number of seconds")
        }
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
    }

    func run() throws {
        // --duration bounds the whole command: waiting for the stream and connecting count.
        let started = MonotonicTimestamp.now()
        let logger = global.makeLogger()
        let out = SubscriberPrinter(json: json)
        try checkTrustedCertificatesFile(tlsCA)
        // Ctrl-C and SIGTERM stop cleanly from here on: while the stream is awaited too
        // (the session is left with a goodbye, not killed mid-wait).
        let stopRequested = PThreadLocked(false)
        // The session being joined: its connect, upgrade and wait for `connected` take up to
        // --http-timeout, and Ctrl-C ends them at once (Session.disconnect from another thread).
        let joining = PThreadLocked<Session?>(nil)
        let signals = SignalStop {
            stopRequested.withLock { $0 = true }
            joining.withLock { $0 }?.disconnect()
        }
        defer { withExtendedLifetime(signals) {} }

        // The renderers first: an unwritable file, a missing or busy device fails before any network.
        let videoRenderer: (any VideoRenderer)?
        let audioRenderer: (any AudioRenderer)?
        do {
            videoRenderer = try makeVideoRenderer()
            audioRenderer = try makeAudioRenderer(logger: logger)
        } catch {
            throw fail(SubscriberError.output(error))
        }

        let endpoint: String
        var streamLabel = "the WHEP endpoint's stream"
        // With --session: the session's signalling, for the stream's comings and goings and their reasons.
        var joined: (session: Session, stream: SessionStream, watch: SessionWatch)?
        // The publisher's video off and on, printed once per change (see below).
        var publishedVideo: PublishedVideo?
        // Left with a goodbye however run() ends (the router then says clientDisconnected,
        // not networkDisconnected): after the stream, and when none came or the token may not subscribe.
        var joinedSession: Session?
        defer { joinedSession?.disconnect() }
        if let session, let token {
            // The signalling rejoins within the media's own reconnect window.
            let client = Session(url: session, token: token, timeout: httpTimeout, allowInsecureTLS: insecureTLS, trustedCertificatesFile: tlsCA,
                                 rejoinWindow: reconnectWindow, logger: logger)
            let watch = SessionWatch { event in out.signalling(event) }
            client.delegate = watch
            // Made known before the stop is looked at: a Ctrl-C either comes before that look
            // (and is seen) or finds the session to disconnect.
            joining.withLock { $0 = client }
            var connectError: SessionError?
            if !stopRequested.withLock({ $0 }) {
                do { try client.connect() } catch { connectError = error }
            }
            joining.withLock { $0 = nil }   // from here a Ctrl-C only asks (stopRequested), as below
            if stopRequested.withLock({ $0 }) {
                // Stopped before, during or just as `connected` came (then left with a goodbye).
                client.disconnect()
                out.stoppedJoining()
                return
            }
            if let connectError { throw fail(connectError) }
            joinedSession = client
            // A publisher-only token may join but not subscribe: say so now, not after
            // waiting for a stream that it could not take anyway.
            if let capabilities = client.capabilities, !capabilities.subscribe {
                printError("camagent: this token cannot subscribe in \(client.sessionURL) (its role may only publish)")
                throw ExitCode(ExitCodes.unauthorized)
            }
            let left = (duration ?? .infinity) - (MonotonicTimestamp.now() - started).secondsDouble
            guard let chosen = try choose(in: client, out: out, waitingUpTo: max(0, min(waitForStream, left)),
                                          bound: left < waitForStream ? "within --duration \(Self.seconds(duration ?? 0))"
                                              : "after \(Self.seconds(waitForStream))",
                                          stopRequested: stopRequested) else {
                out.stoppedWaiting()
                return
            }
            var onCaptions: (@Sendable (Bool) -> Void)?
            if captions { onCaptions = { @Sendable on in out.captions(on) } }
            // The publisher turning its video off and on: the router tells the subscriber
            // (videoDisabled/videoEnabled, publishVideo), which needs the subscriber's id, known only
            // once the media connects; the session tells everyone (streamPropertyChanged hasVideo).
            // Whichever comes first is printed, once. A stream that has no video already is said here.
            let video = PublishedVideo(chosen.hasVideo) { on in out.event(on ? .videoEnabled(.publishVideo) : .videoDisabled(.publishVideo)) }
            publishedVideo = video
            watch.follow(chosen.streamId, onCaptions: onCaptions) { on in video.say(on) }
            if !chosen.hasVideo { out.event(.videoDisabled(.publishVideo)) }
            if captions && chosen.hasCaptions { out.captions(true) }
            joined = (client, chosen, watch)
            endpoint = client.subscribeURL(streamId: chosen.streamId)
            streamLabel = "stream \(chosen.streamId) (\"\(chosen.name)\")"
        } else {
            endpoint = whep!
        }

        var settings = SubscriberSettings()
        settings.receiveAudio = !noAudio
        settings.receiveVideo = !noVideo
        settings.includeLoopbackCandidates = loopbackCandidates
        settings.stunServer = stun.flatMap(parseHostPort)
        settings.connectTimeout = connectTimeout
        settings.reconnectWindow = reconnectWindow
        settings.httpTimeout = httpTimeout
        settings.allowInsecureTLS = insecureTLS
        settings.trustedCertificatesFile = tlsCA
        let subscriber: Subscriber
        do {
            if let joined {
                let streamId = joined.stream.streamId
                let video = publishedVideo
                subscriber = try joined.session.subscribe(streamId: streamId, settings: settings,
                                                          video: videoRenderer, audio: audioRenderer) { event in
                    switch event {
                    case .videoDisabled(.publishVideo): video?.say(false)
                    case .videoEnabled(.publishVideo): video?.say(true)
                    default: out.event(event, stream: streamId)
                    }
                }
                // The stream as the subscriber knows it after each change (OpenTok's subscriber.stream).
                joined.watch.onStreamChanged { [weak subscriber] property in
                    if let subscriber { out.streamChanged(property, now: subscriber.stream) }
                }
                // Said to the router once connected (and again after each reconnection).
                subscriber.subscribeToCaptions = captions
                subscriber.preferredFrameRate = preferredFrameRate
                subscriber.preferredResolution = preferredResolution.flatMap(preferredSize)
            } else {
                subscriber = try Subscriber(endpoint: endpoint, token: token, settings: settings, video: videoRenderer,
                                            audio: audioRenderer, logger: logger) { event in out.event(event) }
            }
        } catch {
            throw fail(error)
        }
        out.starting(streamLabel, endpoint: endpoint,
                     outputs: [videoRenderer.map { _ in "video → \(videoOut)" }, audioRenderer.map { _ in "audio → \(audioOut)" }].compactMap { $0 })

        subscriber.start()
        if stdinControl {
            StdinControl.start(takesResolution: session != nil) { command in
                switch command {
                case .media(.video, let on): subscriber.subscribeToVideo = on
                case .media(.audio, let on): subscriber.subscribeToAudio = on
                case .preferredResolution(let size): subscriber.preferredResolution = size
                case .captions: break   // publish's command: not taken here
                }
            }
        }
        var nextStats = MonotonicTimestamp.now() + .seconds(1)
        var previous: SubscriberStats?
        var outcome: Result<Void, SubscriberError>?
        while !stopRequested.withLock({ $0 }) {
            if let duration, (MonotonicTimestamp.now() - started).secondsDouble >= duration { break }
            if let ended = subscriber.wait(seconds: 0.1) {
                outcome = ended
                break
            }
            if MonotonicTimestamp.now() >= nextStats {
                nextStats = nextStats + .seconds(1)
                let now = subscriber.stats()
                out.stats(now, previous: previous)
                previous = now
            }
        }
        subscriber.stop()
        if outcome == nil { outcome = subscriber.wait(seconds: 5) }
        out.finishStatusLine()
        out.summary(subscriber.stats())
        if case .failure(let error)? = outcome {
            // The session says why a stream ended (its streamDestroyed may trail the media's end a little).
            if case .streamEnded = error, let joined, let reason = joined.watch.endReason(waitingUpTo: 2) {
                out.streamDestroyed(reason: reason)
                throw fail(SubscriberError.streamEnded("\(reason) (streamDestroyed)"))
            }
            throw fail(error)
        }
    }

    /// "10 s", "1.5 s" (and "1e+19 s" rather than a trap: formatted never converts past Int).
    private static func seconds(_ value: Double) -> String {
        value.formatted(decimals: value == value.rounded() ? 0 : 1) + " s"
    }

    private func makeVideoRenderer() throws(RenderError) -> (any VideoRenderer)? {
        if videoOut == "none" || noVideo { return nil }
        if videoOut.hasPrefix("/dev/") { return try V4L2OutputRenderer(device: videoOut) }
        return try Y4MFileRenderer(path: videoOut)
    }

    private func makeAudioRenderer(logger: Logger) throws(RenderError) -> (any AudioRenderer)? {
        if audioOut == "none" || noAudio { return nil }
        if audioOut.hasPrefix("alsa:") {
            return try ALSAPlaybackRenderer(device: String(audioOut.dropFirst(5)), channels: channels, logger: logger)
        }
        return try WAVFileRenderer(path: audioOut, channels: channels)
    }

    /// The stream asked for, waiting up to `seconds` (--wait-for-stream, within
    /// --duration) for it to be published; nil once a stop is requested.
    private func choose(in session: Session, out: SubscriberPrinter, waitingUpTo seconds: Double,
                        bound: String, stopRequested: PThreadLocked<Bool>) throws -> SessionStream? {
        let deadline = MonotonicTimestamp.now().seconds + seconds
        var announced = false
        while true {
            if stopRequested.withLock({ $0 }) { return nil }
            let list = session.streams
            let found: SessionStream? = if let stream { list.first { $0.streamId == stream } }
                else if let name { list.first { $0.name == name } }
                else { list.first }   // the router lists streams oldest first
            if let found { return found }
            if MonotonicTimestamp.now().seconds >= deadline {
                let wanted = stream.map { "stream \($0) is" } ?? name.map { "no stream named \"\($0)\" is" } ?? "no stream is"
                let present = list.isEmpty ? "none" : list.map { "\($0.streamId) (\"\($0.name)\")" }.joined(separator: ", ")
                printError("camagent: \(stream == nil ? wanted : wanted + " not") published in \(session.sessionURL) \(bound); streams there: \(present)")
                throw ExitCode(ExitCodes.noSuchStream)
            }
            if !announced {
                out.waiting(for: stream ?? name ?? "the first stream")
                announced = true
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
}

/// Whether the publisher sends video, as last printed: the router's word and
/// the session's may both come, in either order, and each change is said once.
final class PublishedVideo: Sendable {
    private let on: PThreadLocked<Bool>
    private let print: @Sendable (Bool) -> Void

    init(_ on: Bool, print: @escaping @Sendable (Bool) -> Void) {
        self.on = PThreadLocked(on)
        self.print = print
    }

    func say(_ now: Bool) {
        if on.withLock({ v in defer { v = now }; return v != now }) { print(now) }
    }
}

/// Follows the session's events for the subscribed stream: its end's
/// reason, its captions starting and stopping, and its video (hasVideo).
final class SessionWatch: SessionDelegate {
    /// The signalling's own comings and goings (rejoining), to print.
    private let onSignalling: @Sendable (SessionEvent) -> Void

    init(onSignalling: @escaping @Sendable (SessionEvent) -> Void) { self.onSignalling = onSignalling }

    private struct Followed {
        var streamId: String?
        var ended: String?
        var onCaptions: (@Sendable (Bool) -> Void)?
        var onVideo: (@Sendable (Bool) -> Void)?
        /// Any property of the followed stream changed (after the session took the change in).
        var onChange: (@Sendable (_ property: String) -> Void)?
    }
    private let state = PThreadLocked(Followed())

    func follow(_ streamId: String, onCaptions: (@Sendable (Bool) -> Void)? = nil, onVideo: (@Sendable (Bool) -> Void)? = nil) {
        state.withLock { $0 = Followed(streamId: streamId, onCaptions: onCaptions, onVideo: onVideo) }
    }

    /// Told the property's name each time the followed stream changes.
    func onStreamChanged(_ body: @escaping @Sendable (_ property: String) -> Void) {
        state.withLock { $0.onChange = body }
    }

    func session(_ session: Session, didReceive event: SessionEvent) {
        if case .streamPropertyChanged(let id, let property, _, _) = event {
            let callback = state.withLock { s in s.streamId == id ? s.onChange : nil }
            callback?(property)
        }
        switch event {
        case .reconnecting, .reconnected, .disconnected:
            onSignalling(event)
        case .streamDestroyed(let id, let reason):
            state.withLock { s in if s.streamId == id { s.ended = reason } }
        case .streamPropertyChanged(let id, "hasVideo", _, let value):
            let callback = state.withLock { s in s.streamId == id ? s.onVideo : nil }
            callback?(value == "true")
        case .streamPropertyChanged(let id, "hasCaptions", _, let value):
            let callback = state.withLock { s in s.streamId == id ? s.onCaptions : nil }
            callback?(value == "true")
        default:
            break
        }
    }

    /// The reason the router gave for the stream's end, waiting a little for it.
    func endReason(waitingUpTo seconds: Double) -> String? {
        let until = MonotonicTimestamp.now().seconds + seconds
        while MonotonicTimestamp.now().seconds < until {
            if let reason = state.withLock({ $0.ended }) { return reason }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return state.withLock { $0.ended }
    }
}

extension ExitCodes {
    static func code(for error: SessionError) -> Int32 {
        switch error {
        case .signalling(let e): code(for: SubscriberError.signalling(e))
        case .protocolError, .timedOut: serverRefused
        case .notConnected, .forceDisconnected: connectionFailed
        case .refused(let status, _): status == 401 || status == 403 ? unauthorized : status == 404 ? noSuchStream : serverRefused
        case .publisher(let e): code(for: e)
        case .unusablePublisher: usage
        }
    }
}

func fail(_ error: SessionError) -> ExitCode {
    printError("camagent: \(error)")
    return ExitCode(ExitCodes.code(for: error))
}

extension ExitCodes {
    /// `subscribe`: the stream asked for is not in the session (or none is published in time).
    static let noSuchStream: Int32 = 85
    /// `subscribe`: the stream ended (its publisher left, or was made to); the message gives the reason.
    static let streamEnded: Int32 = 86

    static func code(for error: SubscriberError) -> Int32 {
        switch error {
        case .signalling(let e):
            switch e {
            case .badURL: usage
            case .unreachable, .refused, .timedOut, .tls: serverUnreachable
            case .stopped: ok   // not reached: a subscriber or a session that passes a stop ends cleanly on it
            case .unauthorized: unauthorized
            case .notFound: noSuchStream
            case .rejected, .serverError, .badResponse: serverRefused
            }
        case .badAnswer: serverRefused
        case .connection, .gaveUp: connectionFailed
        case .streamEnded: streamEnded
        case .output(let e):
            // A device's own code (missing 66, not an output 67, busy 68, format 69, no sound card 72);
            // a file that cannot be written 73.
            if let device = e.deviceError { code(for: device) } else if let audio = e.audioError { code(for: audio) } else { outputError }
        }
    }
}

func fail(_ error: SubscriberError) -> ExitCode {
    printError("camagent: \(error)")
    return ExitCode(ExitCodes.code(for: error))
}

/// Prints subscriber events: JSON lines on stdout, or a status line on stderr.
final class SubscriberPrinter: Sendable {
    let json: Bool
    private let status = StatusLine()

    init(json: Bool) { self.json = json }

    private struct EventLine: Encodable {
        var event: String
        var state: String
        var codecs: String?
        var selectedPair: String?
        var reason: String?
        var width: Int?
        var height: Int?
        var stream: String?
        var endpoint: String?
    }

    func starting(_ stream: String, endpoint: String, outputs: [String]) {
        if json {
            line(EventLine(event: "subscribe", state: "connecting", stream: stream, endpoint: endpoint))
        } else {
            printError("subscribe: \(stream) via \(endpoint)\(outputs.isEmpty ? "" : ", " + outputs.joined(separator: ", "))")
        }
    }

    func waiting(for stream: String) {
        if json { line(EventLine(event: "subscribe", state: "waiting", stream: stream)) } else {
            status.show("waiting for \(stream) to be published…")
        }
    }

    /// Stopped (Ctrl-C, SIGTERM) before the session was joined: a clean end, exit 0.
    func stoppedJoining() {
        if json { line(EventLine(event: "subscribe", state: "stopped", reason: "stopped while joining the session")) } else {
            finishStatusLine()
            printError("subscribe: stopped while joining the session")
        }
    }

    /// Stopped (Ctrl-C, SIGTERM) before the stream was there: a clean end, exit 0.
    func stoppedWaiting() {
        if json { line(EventLine(event: "subscribe", state: "stopped", reason: "stopped while waiting for the stream")) } else {
            finishStatusLine()
            printError("subscribe: stopped while waiting for the stream")
        }
    }

    private struct CaptionLine: Encodable {
        var event = "caption"
        var streamId: String?
        var text: String
        var isFinal: Bool
        /// CLOCK_MONOTONIC seconds at arrival (Python's time.monotonic()), for latency measurements.
        var monotonic: Double
    }

    /// The session's signalling dropped, joined again, or ended (the media goes on meanwhile).
    func signalling(_ event: SessionEvent) {
        switch event {
        case .reconnecting(let reason):
            say(EventLine(event: "signalling", state: "reconnecting", reason: reason), "session:   signalling lost (\(reason)); joining again")
        case .reconnected(let connectionId, _, let kept):
            say(EventLine(event: "signalling", state: "reconnected", reason: connectionId),
                "session:   joined again as connection \(connectionId)\(kept ? " (kept by the router)" : "")")
        case .disconnected(let reason) where reason != SessionEvent.ownDisconnectReason:
            say(EventLine(event: "signalling", state: "disconnected", reason: reason), "session:   signalling ended (\(reason))")
        default:
            break
        }
    }

    /// The router's streamDestroyed for the subscribed stream, with its reason
    /// (clientDisconnected, forceDisconnected, networkDisconnected, ...).
    func streamDestroyed(reason: String) {
        say(EventLine(event: "stream", state: "destroyed", reason: reason), "stream destroyed by the router: \(reason)")
    }

    /// A property of the subscribed stream changed; `now` is the stream as
    /// the subscriber has it since (`Subscriber.stream`).
    func streamChanged(_ property: String, now: SessionStream?) {
        if json { line(StreamChangedLine(property: property, stream: now)) } else if let now {
            status.finish()
            printError("stream:    \(property) changed: audio \(now.hasAudio ? "on" : "off"), video \(now.hasVideo ? "on" : "off"), "
                       + "captions \(now.hasCaptions ? "on" : "off"), \(now.width)x\(now.height)")
        }
    }

    /// Its own event (the contract's message name), not a state of "stream",
    /// whose lines carry the reason a stream ended.
    private struct StreamChangedLine: Encodable {
        var event = "streamPropertyChanged"
        var property: String
        var stream: SessionStream?
    }

    /// The stream's captions started (hasCaptions true) or stopped.
    func captions(_ on: Bool) {
        say(EventLine(event: "captions", state: on ? "started" : "stopped"), on ? "captions:  started" : "captions:  stopped")
    }

    func event(_ event: SubscriberEvent, stream: String? = nil) {
        switch event {
        case .captionReceived(let text, let isFinal):
            if json {
                line(CaptionLine(streamId: stream, text: text, isFinal: isFinal, monotonic: MonotonicTimestamp.now().seconds))
            } else if isFinal {
                status.finish()
                printLine("caption: \(text)")
            } else {
                status.show("caption … \(text)")
            }
        case .connected(let codecs, let pair):
            say(EventLine(event: "state", state: "connected", codecs: codecs, selectedPair: pair),
                "connected: \(codecs) via \(pair ?? "?")")
        case .disconnected(let reason):
            say(EventLine(event: "state", state: "disconnected", reason: reason), "disconnected: \(reason); reconnecting")
        case .reconnected(let pair):
            say(EventLine(event: "state", state: "reconnected", selectedPair: pair), "reconnected via \(pair ?? "?")")
        case .videoDimensions(let width, let height):
            say(EventLine(event: "video", state: "dimensions", width: width, height: height), "video:     \(width)x\(height)")
        case .videoDisabled(let reason):
            say(EventLine(event: "video", state: "disabled", reason: reason.rawValue), "video:     disabled (\(reason.rawValue))")
        case .videoEnabled(let reason):
            say(EventLine(event: "video", state: "enabled", reason: reason.rawValue), "video:     enabled (\(reason.rawValue))")
        case .videoDisableWarning:
            say(EventLine(event: "video", state: "disableWarning", reason: "quality"), "video:     heavy loss, the router may stop video")
        case .videoDisableWarningLifted:
            say(EventLine(event: "video", state: "disableWarningLifted", reason: "quality"), "video:     loss back down")
        case .streamEnded(let reason):
            say(EventLine(event: "state", state: "ended", reason: reason), "stream ended: \(reason)")
        case .streamDestroyed(let reason):
            say(EventLine(event: "state", state: "destroyed", reason: reason), "stream destroyed: \(reason)")
        }
    }

    private struct StatsLine: Encodable {
        var event: String
        var state: String
        var video: VideoReceiveStats?
        var audio: AudioReceiveStats?
        var selectedPair: String?
        var connections: Int
        var frameRate: Double?
        var videoBitrate: Double?
        /// The same numbers as a W3C webrtc-stats report (inbound-rtp, remote-outbound-rtp, candidate-pair).
        var rtcStats: [RTCStatsEntry]?
        /// Video's render delay minus audio's, seconds, by the sender's reports.
        var avSyncOffset: Double?
    }

    func stats(_ s: SubscriberStats, previous: SubscriberStats?) {
        let fps = previous.flatMap { p in s.video.map { Double($0.framesDecoded &- (p.video?.framesDecoded ?? 0)) } }
        let bitrate = previous.flatMap { p in s.video.map { Double($0.bytesReceived &- (p.video?.bytesReceived ?? 0)) * 8 } }
        if json {
            line(StatsLine(event: "stats", state: s.state.rawValue, video: s.video, audio: s.audio, selectedPair: s.selectedPair,
                           connections: s.connections, frameRate: fps, videoBitrate: bitrate,
                           rtcStats: s.rtcStatsReport(timestamp: Date().timeIntervalSince1970 * 1000),
                           avSyncOffset: s.avSyncOffset))
            return
        }
        var parts = [s.state.rawValue]
        if let v = s.video {
            parts.append("\(v.width)x\(v.height) \(v.codec)")
            if let fps { parts.append("\(Int(fps)) fps") }
            if let bitrate { parts.append("video \(Int(bitrate / 1000)) kbps") }
            parts.append("lost \(v.packetsLost)  nack \(v.nacksSent)  pli \(v.keyframeRequestsSent)")
        }
        if let a = s.audio { parts.append("audio \(a.packetsReceived) pkts, concealed \(a.samplesConcealed)") }
        if let offset = s.avSyncOffset { parts.append("a/v \(Int((offset * 1000).rounded())) ms") }
        status.show(parts.joined(separator: "  "))
    }

    func summary(_ s: SubscriberStats) {
        if json {
            line(StatsLine(event: "summary", state: s.state.rawValue, video: s.video, audio: s.audio,
                           selectedPair: s.selectedPair, connections: s.connections))
            return
        }
        var text = "summary:   \(s.connections) connection(s)"
        if let v = s.video {
            text += "; video \(v.framesDecoded) frames decoded (\(v.keyframesDecoded) keyframes), \(v.framesDropped) dropped, \(v.packetsReceived) packets, \(v.packetsLost) lost, \(v.nacksSent) NACK, \(v.keyframeRequestsSent) PLI"
        }
        if let a = s.audio { text += "; audio \(a.packetsReceived) packets, \(a.samplesDecoded) samples, \(a.samplesConcealed) concealed" }
        printError(text)
    }

    func finishStatusLine() { status.finish() }

    private func say(_ value: EventLine, _ text: String) {
        if json { line(value) } else {
            status.finish()
            printError(text)
        }
    }

    private func line<T: Encodable>(_ value: T) {
        printLine(JSONOutput.line(value))
    }
}

