import Foundation
import Logging
import MediaTypes
import Publisher
import SessionServer
import ViewerServer

/// `camagent publish` with no server given (or with --listen): the router
/// runs in this process, with one routed session, and each camera is a
/// stream of it published without a network hop (DESIGN.md "Sessions": one
/// server code path). Beside the session (its page at `/?session=…`, REST,
/// signalling, WHEP per stream, WHIP for a browser talking back), the same
/// server keeps the single-stream viewer routes (`/`, `/whep`, `/stats`,
/// `/metrics`, `/cameras/N/`) with the viewer token.
final class EmbeddedRouter: Sendable {
    let server: SessionServer
    let sessionID: String
    let viewerRoutes: ViewerRoutes
    private let engine: EmbeddedMediaEngine
    private let streams: StreamRouter
    private let captions: RouterCaptions
    private let localStreams: PThreadLocked<[SessionServer.LocalStream]>
    private let running: BackgroundServer

    struct StartError: Error, CustomStringConvertible { var description: String }

    private init(server: SessionServer, sessionID: String, viewerRoutes: ViewerRoutes, engine: EmbeddedMediaEngine,
                 streams: StreamRouter, captions: RouterCaptions, running: BackgroundServer) {
        self.server = server
        self.sessionID = sessionID
        self.viewerRoutes = viewerRoutes
        self.engine = engine
        self.streams = streams
        self.captions = captions
        self.running = running
        localStreams = PThreadLocked([])
    }

    /// Starts serving, makes the session, and publishes the cameras into it;
    /// returns once all that is done (or throws why not, within 15 s).
    /// `audioFallback` false keeps the cameras' subscribers on video whatever
    /// their loss (OpenTok's audioFallbackEnabled; on by default, as in a
    /// router's routed session). With `captions`, the session's captions start before the streams
    /// join, and the cameras' streams ask for them (publishCaptions); if the
    /// speech engine is missing, `say` tells why and the rest runs.
    static func start(configuration: ViewerServerConfiguration, cameras: [SessionCamera], settings: PublisherSettings,
                      captions wantCaptions: Bool = false, audioFallback: Bool = true, logger: Logger,
                      say: @escaping @Sendable (String) -> Void = { _ in }) throws(StartError) -> EmbeddedRouter {
        // Tokens live as long as this process: a key of its own, never written anywhere.
        var generator = SystemRandomNumberGenerator()
        let secret: RouterSecret
        do { secret = try RouterSecret(key: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }) } catch {
            throw StartError(description: "\(error)")
        }
        var media = RouterMediaSettings()
        media.includeLoopbackCandidates = settings.includeLoopbackCandidates
        media.subscriberConsentTimeout = settings.viewerConsentTimeout
        let streams: StreamRouter
        do { streams = try StreamRouter(settings: media, logger: logger) } catch {
            throw StartError(description: "the session's media side cannot start: \(error)")
        }
        // Captions hear a camera's stream from its encoder, anyone else's from the router.
        let local = LocalStreamMedia()
        let captions = RouterCaptions(logger: logger) { id, tap in
            if let publisher = local.publisher(of: id) { return publisher.setAudioTap(tap) }
            return streams.setAudioTap(streamID: id, tap)
        }
        let engine = EmbeddedMediaEngine(routed: RouterMediaEngine(router: streams, captions: captions), local: local)
        let viewerRoutes = ViewerRoutes(cameras: cameras.map { PublisherViewerHost(publisher: $0.publisher) },
                                        token: configuration.token, maxBodySize: configuration.maxBodySize)
        // One session, with no idle expiry: it lives as long as the publisher.
        var limits = RegistryLimits()
        limits.sessionIdleTimeout = nil
        let server = SessionServer(
            configuration: SessionServerConfiguration(
                host: configuration.host, port: configuration.port, limits: limits, maxBodySize: configuration.maxBodySize,
                serverLimits: configuration.serverLimits, additionalRoutes: viewerRoutes),
            secret: secret, mediaEngine: engine, logger: logger)
        let session: SessionInfo
        do { session = try server.registry.createSession(mediaMode: .routed) } catch {
            throw StartError(description: "the session cannot be made: \(error)")
        }

        let running: BackgroundServer
        do { running = try BackgroundServer(run: { try await server.run() }, boundPort: { server.boundPort }) } catch {
            captions.stopAll()
            streams.stopAll()
            throw StartError(description: error.description)
        }
        let embedded = EmbeddedRouter(server: server, sessionID: session.sessionID, viewerRoutes: viewerRoutes, engine: engine,
                                      streams: streams, captions: captions, running: running)
        var captioned = false
        if wantCaptions {
            do {
                let id = try server.startCaptions(sessionID: session.sessionID)
                say("captions:  started (\(id)): whisper.cpp tiny.en on this machine, shown on the session page")
                captioned = true
            } catch {
                say("captions:  unavailable: \(error); publishing goes on without them")
            }
        }
        for camera in cameras {
            do {
                let stream = try server.publishLocalStream(
                    sessionID: session.sessionID, name: camera.name, hasAudio: camera.hasAudio, hasVideo: camera.hasVideo,
                    width: camera.width, height: camera.height, connectionData: "camagent publish",
                    publishCaptions: captioned && camera.hasAudio && camera.publisher.publishCaptions
                ) { streamID in local.attach(streamID: streamID, publisher: camera.publisher) }
                if !audioFallback { engine.setAudioFallback(streamID: stream.streamID, enabled: false) }
                embedded.localStreams.withLock { $0.append(stream) }
            } catch {
                embedded.stop()
                throw StartError(description: "the camera's stream cannot join the session: \(error)")
            }
        }
        return embedded
    }

    var boundPort: Int? { server.boundPort }

    /// The stream id of camera N (1-based) in the session.
    func streamID(camera: Int) -> String? {
        localStreams.withLock { $0.indices.contains(camera - 1) ? $0[camera - 1].streamID : nil }
    }

    /// A client token of the session (the session page's link), valid for a day.
    func token(role: Role) -> String? {
        let server = server, sessionID = sessionID
        let made = try? blockingAwait(timeout: 10) {
            try? await server.tokens.makeClientToken(sessionID: sessionID, role: role)
        }
        return made ?? nil
    }

    /// Camera N (1-based) now sends pictures of another size: its stream's
    /// videoDimensions change (streamPropertyChanged, when it is news).
    func videoDimensions(camera: Int, width: Int, height: Int) {
        guard let stream = localStream(ofCamera: camera) else { return }
        server.report(.videoDimensions(width: width, height: height), of: stream)
    }

    /// A camera's publisher turned its audio or video off or on (publishAudio/publishVideo).
    func publishing(camera: Int, kind: MediaKind, on: Bool) {
        guard let stream = localStream(ofCamera: camera) else { return }
        server.setLocalStreamMedia(stream, hasAudio: kind == .audio ? on : nil, hasVideo: kind == .video ? on : nil)
    }

    /// A camera's publisher turned its captions off or on (publishCaptions).
    func publishingCaptions(camera: Int, on: Bool) {
        guard let stream = localStream(ofCamera: camera) else { return }
        server.setLocalStreamMedia(stream, publishCaptions: on)
    }

    /// Camera N's (1-based) stream in the session; nil once the streams ended.
    private func localStream(ofCamera camera: Int) -> SessionServer.LocalStream? {
        localStreams.withLock { $0.indices.contains(camera - 1) ? $0[camera - 1] : nil }
    }

    /// A publisher's viewer ended on its own: a session subscriber's, the session hears of it.
    func viewerLeft(viewerID: String, reason: String) { engine.local.viewerLeft(viewerID: viewerID, reason: reason) }

    /// Audio fallback's step for a publisher's viewer: a session subscriber's, the session hears of it.
    func viewerVideoQuality(viewerID: String, change: VideoQualityChange) {
        engine.local.viewerVideoQuality(viewerID: viewerID, change: change)
    }

    /// Ends the cameras' streams (streamDestroyed, clientDisconnected),
    /// stops routing, and stops the server gracefully, waiting at most 10 s.
    func stop() {
        for stream in localStreams.withLock({ s in defer { s = [] }; return s }) { server.endLocalStream(stream) }
        running.stop()
        captions.stopAll()
        streams.stopAll()
    }
}
