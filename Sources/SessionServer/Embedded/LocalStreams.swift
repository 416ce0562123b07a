/// In-process publishing. `camagent publish` with no server runs the router
/// in its own process with one routed session and puts each camera's stream
/// into it without a network hop: the registry announces the stream like
/// any other (`connectionCreated`, `streamCreated`), and the media engine
/// answers its subscribers from the encoder it already has, so a viewer
/// costs no extra encoding and no forwarding.
extension SessionServer {
    /// A stream published from inside this process.
    public struct LocalStream: Sendable, Equatable {
        public let sessionID: String
        public let streamID: String
        /// The connection the stream came with (`connectionCreated`), as a bare WHIP client's.
        public let connectionID: String
    }

    /// Announces a local stream in a routed session. `attach` runs with the
    /// new stream id before anyone hears of it: the engine must know the id
    /// by the time a subscriber's offer names it.
    public func publishLocalStream(
        sessionID: String, name: String, hasAudio: Bool, hasVideo: Bool, width: Int, height: Int,
        connectionData: String = "", publishCaptions: Bool = false, attach: (_ streamID: String) -> Void
    ) throws(RegistryError) -> LocalStream {
        let streamID = try registry.reserveStream(sessionID: sessionID, connectionID: nil,
                                                  dimensions: width > 0 && height > 0 ? (width, height) : nil)
        attach(streamID)
        let announced: (StreamInfo, SessionRegistry.MediaRelease?)
        do {
            announced = try registry.announceStream(
                sessionID: sessionID, streamID: streamID, publisher: .bareWHIPClient(role: .publisher, data: connectionData),
                name: name, hasAudio: hasAudio, hasVideo: hasVideo, videoType: .camera, publishCaptions: publishCaptions)
        } catch {
            registry.cancelStream(sessionID: sessionID, streamID: streamID)
            throw error
        }
        services.release(announced.1)
        if announced.0.hasCaptions { services.reconcileCaptions(sessionID: sessionID) }
        logger.info("local stream published", metadata: ["session": "\(sessionID)", "stream": "\(streamID)"])
        return LocalStream(sessionID: sessionID, streamID: streamID, connectionID: announced.0.connectionId)
    }

    /// What happened to a local stream's media: its size changed, or it ended.
    public func report(_ event: MediaEvent, of stream: LocalStream) {
        services.mediaEvents(sessionID: stream.sessionID, streamID: stream.streamID)(event)
    }

    /// A local stream's publisher turned its audio or video off or on
    /// (publishAudio/publishVideo), or its captions (publishCaptions):
    /// `streamPropertyChanged`, and its subscribers hear
    /// videoDisabled/videoEnabled (publishVideo). Only what the stream
    /// carries changes (a stream without audio stays so, and gets no captions).
    public func setLocalStreamMedia(_ stream: LocalStream, hasAudio: Bool? = nil, hasVideo: Bool? = nil,
                                    publishCaptions: Bool? = nil) {
        do {
            try registry.setStreamProperties(sessionID: stream.sessionID, streamID: stream.streamID, requester: nil,
                                             hasAudio: hasAudio, hasVideo: hasVideo, publishCaptions: publishCaptions)
        } catch {
            logger.notice("local stream's media not changed", metadata: ["stream": "\(stream.streamID)", "error": "\(error)"])
            return
        }
        if hasAudio != nil || publishCaptions != nil { services.reconcileCaptions(sessionID: stream.sessionID) }
    }

    /// Starts the session's captions from inside the process (the REST call
    /// a moderator makes, without a token): `camagent publish --captions`.
    /// They run until stopped or the process ends. Returns the captions' id.
    public func startCaptions(sessionID: String, partialCaptions: Bool = true) throws(RegistryError) -> String {
        if registry.session(sessionID)?.mediaMode == .routed, let reason = services.media.captionsUnavailable {
            throw .conflict("captions cannot run here: \(reason)")
        }
        let id = try registry.startCaptions(sessionID: sessionID, settings: CaptionsSettings(partialCaptions: partialCaptions))
        services.reconcileCaptions(sessionID: sessionID)
        return id
    }

    /// Ends a local stream (`streamDestroyed` clientDisconnected, then its
    /// connection's `connectionDestroyed`); its subscribers are let go of.
    public func endLocalStream(_ stream: LocalStream) {
        let release = registry.removeStream(sessionID: stream.sessionID, streamID: stream.streamID, reason: .clientDisconnected)
        services.release(release)
    }
}
