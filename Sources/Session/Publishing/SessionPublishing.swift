import Foundation
import Logging
import MediaTypes
import Publisher

/// OpenTok's `Session.publish` and `unpublish`. In a routed session the
/// publisher sends its media to the router over WHIP (so it must be made by
/// `makePublisher`, which gives it that signalling); in a relayed one the
/// stream is announced and each subscriber's offer is answered by the
/// publisher itself (`Publisher.addViewer`), the media going straight to the
/// subscriber. Either way the stream belongs to this client's connection.
extension Session {
    /// A publisher for this session: in a routed session its signalling is
    /// the session's publish endpoint, with this client's token and
    /// connection; in a relayed one it needs none. Publish it with `publish`.
    public func makePublisher(settings: PublisherSettings, videoCapture: (any VideoCapture)?,
                              audioDevice: (any AudioDevice)?,
                              onEvent: @escaping @Sendable (PublisherEvent) -> Void = { _ in }) throws(SessionError) -> Publisher {
        guard let mode = mediaMode else { throw .notConnected }
        let signaling = mode == .routed ? publishSignaling() : nil
        let publisher: Publisher
        do {
            publisher = try Publisher(settings: settings, videoCapture: videoCapture, audioDevice: audioDevice,
                                      signaling: signaling, logger: logger, onEvent: onEvent)
        } catch {
            throw .publisher(error)
        }
        if let signaling { publications.madeHere(publisher, signaling: signaling) }
        return publisher
    }

    /// Publishes `publisher` as a stream of this session and returns its id
    /// once media can flow (routed: the router receives it; relayed: the
    /// stream is announced). Live captions of its audio (routed sessions)
    /// follow the publisher's `publishCaptions`, which `publishCaptions` sets
    /// when given (a publisher without audio: `missingAudioTrack`), and which
    /// may be turned on and off while it is published. `audioFallback` false
    /// keeps its subscribers on video whatever their loss (OpenTok's
    /// audioFallbackEnabled).
    @discardableResult
    public func publish(_ publisher: Publisher, name: String = "", publishCaptions: Bool? = nil, audioFallback: Bool = true,
                        onEvent: @escaping @Sendable (PublicationEvent) -> Void = { _ in }) throws(SessionError) -> String {
        guard let mode = mediaMode, let connectionId else { throw .notConnected }
        if let publishCaptions {
            do { try publisher.setPublishCaptions(publishCaptions) } catch { throw .publisher(error) }
        }
        switch mode {
        case .routed:
            guard let signaling = publications.signaling(of: publisher) else {
                throw .unusablePublisher("a routed session takes a publisher made by its makePublisher: its media goes to the router over WHIP")
            }
            var options = [String]()
            if !name.isEmpty { options.append("name=" + Self.queryEncoded(name)) }
            if !audioFallback { options.append("audioFallback=false") }
            signaling.prepare(connectionId: connectionId, options: options)
            signaling.reportPublished({ [weak publisher] in
                guard let publisher else { return .init() }
                return .init(audio: publisher.publishAudio, video: publisher.publishVideo, captions: publisher.publishCaptions)
            }, streamMade: { [weak self, weak publisher] streamId, offered in
                guard let self, let publisher else { return }
                self.tellRouter(publisher, streamId: streamId, offered: offered)
            })
            guard publications.add(.init(publisher: publisher, relayed: false, streamId: nil, name: name,
                                         connectionId: connectionId,
                                         onEvent: onEvent)) else {
                throw .notConnected
            }
            catchUpWithRejoin(publisher, publishedUnder: connectionId)
            // Heard from before its first connection: a toggle once the router has the stream
            // goes to it (before, the stream has no id yet and `streamMade` says what differs).
            observe(publisher)
            do { try publisher.publish() } catch {
                _ = publications.remove(publisher)
                throw .publisher(error)
            }
            guard let streamId = signaling.streamId else {
                unpublish(publisher)
                throw .protocolError("the router's WHIP answer named no stream")
            }
            return streamId
        case .relayed:
            // Its viewers are the session's subscribers: capture runs, nothing is sent until one offers.
            // One unpublished already (a Ctrl-C as it started) is not announced.
            if publisher.state == .closed { throw .publisher(.unpublished) }
            if publisher.state == .idle {
                do { try publisher.publish() } catch { throw .publisher(error) }
            }
            let media = publisher.media
            let (streamId, announcedUnder) = try announceRelayed(
                name: name, hasAudio: media.audio && publisher.publishAudio, hasVideo: media.video && publisher.publishVideo,
                width: media.captureSize?.width ?? 0,
                height: media.captureSize?.height ?? 0, publishCaptions: publisher.publishCaptions)
            guard publications.add(.init(publisher: publisher, relayed: true, streamId: streamId, name: name,
                                         connectionId: announcedUnder,
                                         onEvent: onEvent)) else {
                try? endRelayedStream(streamId: streamId)
                throw .notConnected
            }
            catchUpWithRejoin(publisher, publishedUnder: announcedUnder)
            observe(publisher)
            return streamId
        }
    }

    /// What a published publisher says that the session acts on: its
    /// publishAudio/publishVideo turned off or on goes to the router
    /// (`publisherProperty`, whose subscribers hear videoDisabled/videoEnabled
    /// with reason publishVideo), and so does its publishCaptions; a relayed
    /// publisher's viewer that ended on its own is a subscriber leaving.
    private func observe(_ publisher: Publisher) {
        guard publications.observeOnce(publisher) else { return }
        publisher.observeEvents { [weak self, weak publisher] event in
            guard let self, let publisher else { return }
            switch event {
            case .viewerLeft(let viewerId, let reason):
                self.relayedViewerLeft(publisher: publisher, viewerId: viewerId, reason: reason)
            case .publishing(let kind, let on):
                self.tellRouter(publisher, turned: kind, on: on)
            case .publishingCaptions(let on):
                guard let publication = self.publications.all.first(where: { $0.publisher === publisher }),
                      let streamId = self.streamId(of: publisher) else { return }
                // Captions are routed only: the router would refuse them.
                guard !publication.relayed else {
                    self.logger.notice("captions of stream \(streamId) not asked for: captions need a routed session")
                    return
                }
                self.tellRouter(streamId: streamId, publishCaptions: on)
            default:
                break
            }
        }
    }

    private func tellRouter(_ publisher: Publisher, turned kind: MediaKind, on: Bool) {
        guard let streamId = streamId(of: publisher) else { return }
        tellRouter(streamId: streamId, hasAudio: kind == .audio ? on : nil, hasVideo: kind == .video ? on : nil)
    }

    /// A routed stream the router just made of an offer: a toggle since the
    /// offer was read went to the stream before it, so what differs is said
    /// again (only for the kinds the publisher has).
    private func tellRouter(_ publisher: Publisher, streamId: String, offered: SessionPublishSignaling.Offered) {
        let media = publisher.media
        let audio = media.audio && publisher.publishAudio != offered.audio ? publisher.publishAudio : nil
        let video = media.video && publisher.publishVideo != offered.video ? publisher.publishVideo : nil
        let captions = publisher.publishCaptions != offered.captions ? publisher.publishCaptions : nil
        guard audio != nil || video != nil || captions != nil else { return }
        tellRouter(streamId: streamId, hasAudio: audio, hasVideo: video, publishCaptions: captions)
    }

    /// `publisherProperty`, its failure logged: the next toggle or publish says it again.
    private func tellRouter(streamId: String, hasAudio: Bool? = nil, hasVideo: Bool? = nil, publishCaptions: Bool? = nil) {
        do {
            try publisherProperty(streamId: streamId, hasAudio: hasAudio, hasVideo: hasVideo, publishCaptions: publishCaptions)
        } catch {
            logger.notice("publisherProperty for stream \(streamId) not sent: \(error)")
        }
    }

    /// Ends the publisher's stream in the session (streamDestroyed,
    /// clientDisconnected) and stops the publisher. Nothing happens for a
    /// publisher not published here.
    public func unpublish(_ publisher: Publisher) {
        let (publication, viewers) = publications.remove(publisher)
        guard let publication else { return }
        if publication.relayed, let streamId = publication.streamId {
            do { try endRelayedStream(streamId: streamId) } catch {
                logger.notice("relayed stream \(streamId) not ended at the router: \(error)")
            }
            for viewer in viewers { _ = publisher.removeViewer(id: viewer.viewerId) }
        }
        // Routed: the publisher's WHIP DELETE ends the stream.
        publisher.unpublish()
    }

    /// The stream a publisher published here has now (a routed one's changes when it reconnects).
    public func streamId(of publisher: Publisher) -> String? {
        guard let publication = publications.all.first(where: { $0.publisher === publisher }) else { return nil }
        return publication.streamId ?? publications.signaling(of: publisher)?.streamId
    }

    // MARK: What the router says to a publishing client

    /// A message from the router about this client's streams: relayed
    /// subscribers' offers and departures, and its streams' end.
    func publishingEvent(_ event: SessionEvent) {
        switch event {
        case .subscribeOffer(let subscriberId, let streamId, let sdp):
            answer(subscriberId: subscriberId, streamId: streamId, offer: sdp)
        case .unsubscribe(let subscriberId, _):
            guard let viewer = publications.removeViewer(subscriberId: subscriberId),
                  let publication = publications.all.first(where: { ObjectIdentifier($0.publisher) == viewer.publisher }) else { return }
            _ = publication.publisher.removeViewer(id: viewer.viewerId)
            publication.onEvent(.subscriberLeft(subscriberId: subscriberId))
        case .streamDestroyed(let streamId, let reason):
            guard let publication = publications.publication(streamId: streamId) else { return }
            // A routed stream also ends when its publisher reconnects (a new WHIP
            // exchange is a new stream): only the router's own decision ends it here.
            guard publication.relayed || reason == "forceUnpublished" || reason == "forceDisconnected" else { return }
            publication.onEvent(.ended(reason: "the router ended stream \(streamId) (\(reason))"))
        case .disconnected(let reason):
            publications.endAll(reason: "the session's signalling ended: \(reason)")
        default:
            break
        }
    }

    /// The session's signalling rejoined under the same connection, its
    /// streams kept: what each routed publisher has now (audio, video,
    /// captions) is said again, since a toggle while the signalling was
    /// down could not be. The router changes (and tells) only what differs.
    func sayPublishersAgain() {
        for publication in publications.all where !publication.relayed {
            let publisher = publication.publisher
            guard let streamId = streamId(of: publisher) else { continue }
            let media = publisher.media
            tellRouter(streamId: streamId, hasAudio: media.audio ? publisher.publishAudio : nil,
                       hasVideo: media.video ? publisher.publishVideo : nil, publishCaptions: publisher.publishCaptions)
        }
    }

    /// The session's signalling rejoined as `connectionId` after it dropped.
    /// The router ended this client's streams with the old connection, so
    /// each is published again under the new one: a routed publisher makes a
    /// new WHIP exchange at once, a relayed stream is announced again. Each
    /// publication hears its new stream id (`republished`) or why it could
    /// not be published again (`ended`).
    func publishAgain(connectionId: String) {
        for publication in publications.all { publishAgain(publication, under: connectionId) }
    }

    /// A rejoin that came while `publish` was under way may have missed this
    /// publication (not yet listed) or seen it published under the old
    /// connection: it is published again under the current one. Whichever of
    /// the two moves it first does it (`moveTo`), so it is done once.
    private func catchUpWithRejoin(_ publisher: Publisher, publishedUnder: String) {
        guard let now = connectionId, now != publishedUnder,
              let publication = publications.all.first(where: { $0.publisher === publisher }) else { return }
        publishAgain(publication, under: now)
    }

    private func publishAgain(_ publication: SessionPublications.Publication, under connectionId: String) {
        let publisher = publication.publisher
        guard publications.moveTo(publisher, connectionId: connectionId) else { return }
        if !publication.relayed, let signaling = publications.signaling(of: publisher) {
            signaling.rejoined(connectionId: connectionId)
            publisher.renewConnection()
            return
        }
        let media = publisher.media
        do {
            let (streamId, _) = try announceRelayed(
                name: publication.name, hasAudio: media.audio && publisher.publishAudio,
                hasVideo: media.video && publisher.publishVideo,
                width: media.captureSize?.width ?? 0, height: media.captureSize?.height ?? 0,
                publishCaptions: false)   // it was published without (a relayed session refuses them)
            publications.setStreamId(streamId, of: publisher)
            publication.onEvent(.republished(streamId: streamId))
        } catch {
            publication.onEvent(.ended(reason: "the stream could not be announced again after the session rejoined: \(error)"))
        }
    }

    private func publishSignaling() -> SessionPublishSignaling {
        SessionPublishSignaling(sessionURL: sessionURL, token: token, timeout: timeout, allowInsecureTLS: allowInsecureTLS,
                                trustedCertificatesFile: trustedCertificatesFile, logger: logger)
    }

    /// A subscriber's offer, answered by the stream's publisher as a viewer of its own.
    private func answer(subscriberId: String, streamId: String, offer: String) {
        guard let publication = publications.publication(streamId: streamId), publication.relayed else {
            refuse(subscriberId, code: 503, "stream \(streamId) is not published here (any more)")
            return
        }
        let publisher = publication.publisher
        let viewer: (id: String, answer: String)
        do { viewer = try publisher.addViewer(offer: offer) } catch {
            switch error {
            case .badOffer, .noCommonCodec: refuse(subscriberId, code: 400, error.description)
            case .tooManyViewers, .connection, .notPublishing: refuse(subscriberId, code: 503, error.description)
            }
            return
        }
        publications.addViewer(subscriberId: subscriberId, publisher: publisher, viewerId: viewer.id)
        do { try answerOffer(subscriberId: subscriberId, sdp: viewer.answer) } catch {
            logger.notice("answer to subscriber \(subscriberId) not sent: \(error)")
            _ = publications.removeViewer(subscriberId: subscriberId)
            _ = publisher.removeViewer(id: viewer.id)
            return
        }
        publication.onEvent(.subscriberAnswered(subscriberId: subscriberId, streamId: streamId))
    }

    /// A relayed publisher's viewer ended on its own (no DELETE: its ICE
    /// consent stopped). The router is told, so it stops counting the
    /// subscriber; a viewer let go of on the router's word is no longer here.
    private func relayedViewerLeft(publisher: Publisher, viewerId: String, reason: String) {
        guard let subscriberId = publications.removeViewer(publisher: publisher, viewerId: viewerId) else { return }
        publications.all.first { $0.publisher === publisher }?.onEvent(.subscriberGone(subscriberId: subscriberId, reason: reason))
        do { try subscriberLeft(subscriberId: subscriberId) } catch {
            logger.notice("subscriberLeft for \(subscriberId) not sent: \(error)")
        }
    }

    private func refuse(_ subscriberId: String, code: Int, _ message: String) {
        logger.notice("offer of subscriber \(subscriberId) refused: \(message)")
        try? refuseOffer(subscriberId: subscriberId, code: code, message: message)
    }

    static func queryEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+"))) ?? ""
    }
}
