import ArgumentParser
import AudioDevices
import Foundation
import ICE
import Logging
import MediaTypes
import Publisher
import Synchronization
import VideoSources
import WHIP

/// `camagent publish`: capture video and audio, encode, and send them over
/// WebRTC to a WHIP server, with a live status line (or JSON lines).
struct PublishCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish the camera and microphone over WebRTC to a WHIP server.",
        discussion: """
        Exit codes: 80 server unreachable (refused, no route, timeout), 81 unauthorized (401/403: \
        bad or missing token), 82 the server refused the stream (404, other 4xx, 5xx, unusable answer), \
        83 the WebRTC connection failed (ICE, DTLS, fingerprint mismatch); capture errors as for `capture`.
        """)

    @OptionGroup var video: VideoSourceOptions

    @Option(help: "Audio: an ALSA capture device, 'auto' (the default device, silence without a sound card), 'test-tone' (a 1 kHz sine) or 'none'.")
    var audio = "auto"

    @Option(help: "Audio channels: 1 or 2.")
    var channels = 1

    @Option(help: "WHIP endpoint URL (http:// or https://).")
    var whip: String?

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

    @Flag(inversion: .prefixedNo, help: "Reconnect with backoff when an established session drops.")
    var reconnect = true

    @Flag(help: "Offer loopback addresses as ICE candidates (server on the same host).")
    var loopbackCandidates = false

    @Flag(help: "Print events and stats as JSON lines on stdout.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard channels == 1 || channels == 2 else { throw ValidationError("--channels takes 1 or 2") }
        guard (50...50_000).contains(bitrate) else { throw ValidationError("--bitrate takes 50 to 50000 kbit/s") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        if whip == nil { throw ValidationError("--whip URL is required (the built-in viewer is not there yet)") }
        if let stun, parseHostPort(stun) == nil { throw ValidationError("--stun takes host:port with a numeric IP") }
    }

    func run() throws {
        let logger = global.makeLogger()
        let out = EventPrinter(json: json)

        // Audio first: a missing sound card should fail before the camera opens.
        var audioDevice: (any AudioDevice)?
        let format = AudioFormat(sampleRate: 48_000, channels: channels)
        switch audio {
        case "none": break
        case "test-tone": audioDevice = SilentAudioCapture(format: format, toneFrequency: 1000)
        default:
            do {
                let (device, warning) = try AudioCaptureChoice.make(name: audio, format: format, logger: logger)
                if let warning { printError("camagent: \(warning)") }
                audioDevice = device
            } catch { throw fail(error) }
        }

        var videoCapture: (any VideoCapture)?
        if video.device != "none" {
            let device = video.resolvedDevice(logger: logger)
            let capture = video.makeCapture(device: device, logger: logger)
            do { try capture.initialize() } catch { throw fail(error) }
            videoCapture = capture
        }

        let client: WHIPClient
        do {
            client = try WHIPClient(endpoint: whip!, token: token, timeout: httpTimeout, allowInsecureTLS: insecureTLS,
                                    logger: logger)
        } catch { throw ValidationError("\(error)") }
        var settings = PublisherSettings()
        settings.videoTrack = videoCapture != nil
        settings.audioTrack = audioDevice != nil
        settings.codecPreference = [codec]
        settings.videoBitrate = bitrate * 1000
        settings.includeLoopbackCandidates = loopbackCandidates
        settings.stunServer = stun.flatMap(parseHostPort)
        settings.connectTimeout = connectTimeout
        settings.reconnect = reconnect

        let publisher: Publisher
        do {
            publisher = try Publisher(settings: settings, videoCapture: videoCapture, audioDevice: audioDevice,
                                      signaling: WHIPSignaling(client: client, logger: logger), logger: logger) { event in
                out.event(event)
            }
        } catch { throw fail(error) }

        var negotiated = NegotiatedSummary(event: "negotiated", codec: codec == .vp8 ? "VP8" : "H264",
                                           audioCodec: audioDevice != nil ? "opus" : nil, whip: whip!)
        if let s = videoCapture?.captureSettings {
            negotiated.size = "\(s.outputFormat.width)x\(s.outputFormat.height)"
            negotiated.fps = s.grantedFramesPerSecond
            negotiated.device = s.device
            if !json { printError(s.negotiationText) }
        }
        negotiated.audioDevice = audioDevice?.captureSettings?.device
        if json { out.line(JSONOutput.line(negotiated)) } else {
            printError("publish:   \(negotiated.codec)\(negotiated.audioCodec.map { " + \($0)" } ?? "") to \(whip!)")
        }

        let stopRequested = Mutex(false)
        let signals = SignalStop { stopRequested.withLock { $0 = true } }
        defer { withExtendedLifetime(signals) {} }
        do { try publisher.publish() } catch {
            out.finishStatusLine()
            throw fail(error)
        }
        let started = MonotonicTimestamp.now()
        var nextStats = started + .seconds(1)
        while !stopRequested.withLock({ $0 }) {
            if let duration, (MonotonicTimestamp.now() - started).secondsDouble >= duration { break }
            if publisher.state == .failed { break }
            Thread.sleep(forTimeInterval: 0.1)
            if MonotonicTimestamp.now() >= nextStats {
                nextStats = nextStats + .seconds(1)
                out.stats(publisher.stats())
            }
        }
        let final = publisher.stats()
        let failed = publisher.state == .failed
        publisher.unpublish()
        out.finishStatusLine()
        out.summary(final)
        if failed { throw ExitCode(ExitCodes.connectionFailed) }
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

struct NegotiatedSummary: Encodable {
    var event: String
    var codec: String
    var audioCodec: String?
    var whip: String
    var size: String?
    var fps: Double?
    var device: String?
    var audioDevice: String?
}

/// Prints publisher events: JSON lines on stdout, or a status line on stderr.
final class EventPrinter: Sendable {
    let json: Bool
    private let lock = Mutex(false)   // true while a status line is on screen

    init(json: Bool) { self.json = json }

    func line(_ text: String) {
        let bytes = text + "\n"
        lock.withLock { _ in _ = bytes.utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) } }
    }

    private struct StateLine: Encodable { var event = "state"; var state: String; var resource: String?; var codec: String?; var selectedPair: String?; var reason: String?; var error: String? }

    func event(_ event: PublisherEvent) {
        switch event {
        case .stateChanged(let state):
            if json { line(JSONOutput.line(StateLine(state: state.rawValue))) } else { status("\(state.rawValue)…") }
        case .streamCreated(let resource, let codec, let pair):
            if json {
                line(JSONOutput.line(StateLine(state: "streaming", resource: resource, codec: codec, selectedPair: pair)))
            } else {
                finishStatusLine()
                printError("streaming: \(codec) via \(pair ?? "?"), resource \(resource)")
            }
        case .streamDestroyed(let reason):
            if json { line(JSONOutput.line(StateLine(state: "dropped", reason: reason))) } else {
                finishStatusLine()
                printError("camagent: stream dropped: \(reason)")
            }
        case .failed(let error):
            if json { line(JSONOutput.line(StateLine(state: "error", error: error.description))) }
            else { finishStatusLine(); printError("camagent: \(error)") }
        }
    }

    private struct StatsLine: Encodable { var event: String; var state: String; var video: StreamStats?; var audio: StreamStats?; var selectedPair: String?; var connections: Int; var packetsDroppedByPacer: UInt64 }

    func stats(_ s: PublisherStats) {
        if json {
            line(JSONOutput.line(StatsLine(event: "stats", state: s.state.rawValue, video: s.video, audio: s.audio,
                                           selectedPair: s.selectedPair, connections: s.connections,
                                           packetsDroppedByPacer: s.packetsDroppedByPacer)))
            return
        }
        var parts = [s.state.rawValue]
        if let v = s.video {
            parts.append("\(v.frameRate.formatted(decimals: 1)) fps")
            parts.append("video \(Int(v.bitrate / 1000)) kbps")
        }
        if let a = s.audio { parts.append("audio \(Int(a.bitrate / 1000)) kbps") }
        let rtt = s.video?.rtt ?? s.audio?.rtt
        parts.append("rtt " + (rtt.map { "\(Int($0 * 1000)) ms" } ?? "–"))
        let lost = (s.video?.packetsLost ?? 0) + (s.audio?.packetsLost ?? 0)
        parts.append("lost \(lost)")
        status(parts.joined(separator: "  "))
    }

    func summary(_ s: PublisherStats) {
        if json {
            line(JSONOutput.line(StatsLine(event: "summary", state: s.state.rawValue, video: s.video, audio: s.audio,
                                           selectedPair: s.selectedPair, connections: s.connections,
                                           packetsDroppedByPacer: s.packetsDroppedByPacer)))
        } else {
            var text = "summary:   \(s.connections) connection(s)"
            if let v = s.video { text += "; video \(v.framesEncoded) frames, \(v.packetsSent) packets, \(v.bytesSent) bytes, \(v.nackReceived) NACK, \(v.pliReceived) PLI" }
            if let a = s.audio { text += "; audio \(a.framesEncoded) frames, \(a.packetsSent) packets" }
            printError(text)
        }
    }

    /// A line rewritten in place on a terminal (a plain line each time otherwise).
    private func status(_ text: String) {
        lock.withLock { shown in
            if isatty(2) != 0 {
                let line = "\r\u{1B}[K" + text
                _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
                shown = true
            } else {
                printError(text)
            }
        }
    }

    func finishStatusLine() {
        lock.withLock { shown in
            if shown { _ = write(2, "\n", 1); shown = false }
        }
    }
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

    static func code(for error: PublisherError) -> Int32 {
        switch error {
        case .signaling(let e):
            switch e {
            case .badURL: usage
            case .unreachable, .refused, .timedOut, .tls: serverUnreachable
            case .unauthorized: unauthorized
            case .notFound, .rejected, .serverError, .badResponse: serverRefused
            }
        case .badAnswer: serverRefused
        case .connection: connectionFailed
        case .video(let e): code(for: e)
        case .audio(let e): code(for: e)
        case .encoder: driverError
        case .nothingToPublish: usage
        }
    }
}

func fail(_ error: PublisherError) -> ExitCode {
    printError("camagent: \(error)")
    return ExitCode(ExitCodes.code(for: error))
}
