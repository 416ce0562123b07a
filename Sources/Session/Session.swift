import Foundation
import Logging
import MediaTypes
import Subscriber
import WHIP
// The stream object is the Subscriber's too (`subscriber.stream`); a client of Session names it as before.
@_exported import struct Subscriber.SessionStream

/// Receives a session's events, in order, on the session's reader thread.
public protocol SessionDelegate: AnyObject, Sendable {
    func session(_ session: Session, didReceive event: SessionEvent)
}

/// A client of one router session (OpenTok's Session): the signalling
/// WebSocket, the session's streams as they come and go, signals, and
/// subscribing to a stream over WHEP.
///
/// `connect` opens the WebSocket and waits for `connected`; a reader thread
/// then delivers every message as a `SessionEvent`, through `events` (an
/// AsyncStream) and the delegate, and keeps `streams` current. It pings the
/// router every few seconds, so a dead path is found even when no socket
/// error comes. With a `rejoinWindow`, a WebSocket that drops (not a forced
/// disconnect) is opened again within that time: `reconnecting`, then
/// `reconnected`. The client asks for its own connection back: within the
/// router's rejoin grace it gets it, streams and all, and hears what it
/// missed. Later it gets a new connection id, and this client's streams are
/// published again (the router ended the old ones with the old connection).
/// Either way its subscribers say their settings again (their media goes on
/// meanwhile).
public final class Session: Sendable {
    /// `http(s)://HOST:PORT/v2/sessions/SID`.
    public let sessionURL: String
    public let events: AsyncStream<SessionEvent>
    private let continuation: AsyncStream<SessionEvent>.Continuation
    let token: String
    let timeout: Double
    let allowInsecureTLS: Bool
    let trustedCertificatesFile: String?
    /// Seconds to keep trying to join again when the signalling drops; 0: end at once.
    public let rejoinWindow: Double
    let logger: Logger
    private let state = PThreadLocked<State>(State())
    /// The streams this client publishes here (`publish`).
    let publications = SessionPublications()
    /// The subscribers made here, to hand them what the router says about them.
    private let subscribers = PThreadLocked<[WeakSubscriber]>([])

    private struct WeakSubscriber {
        weak var subscriber: Subscriber?
        let streamId: String
    }
    private let readerStop = StopSignal()

    private struct State {
        var socket: WebSocketConnection?
        var reader: StoppableThread?
        var connectionId: String?
        var capabilities: SessionCapabilities?
        var mediaMode: SessionMediaMode?
        var streams: [SessionStream] = []
        var connection: SessionConnection?
        var connections: [SessionConnection] = []
        /// What the router asks, with the connection id, to take this connection back after a drop.
        var rejoinKey: String?
        weak var delegate: (any SessionDelegate)?
        var ended = false
    }

    /// - Parameters:
    ///   - trustedCertificatesFile: PEM certificates trusted besides the system's (a router's self-signed one).
    ///   - rejoinWindow: how long to keep trying to join again, with backoff, when the signalling drops
    ///     (0, the default: the session ends with `disconnected`).
    public init(url: String, token: String, timeout: Double = 10, allowInsecureTLS: Bool = false,
                trustedCertificatesFile: String? = nil, rejoinWindow: Double = 0, logger: Logger) {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        sessionURL = base
        self.token = token.trimmingCharacters(in: .whitespacesAndNewlines)
        self.timeout = timeout
        self.allowInsecureTLS = allowInsecureTLS
        self.trustedCertificatesFile = trustedCertificatesFile
        self.rejoinWindow = max(0, rejoinWindow)
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream(of: SessionEvent.self, bufferingPolicy: .bufferingNewest(1000))
    }

    public var delegate: (any SessionDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    public var connectionId: String? { state.withLock { $0.connectionId } }
    public var capabilities: SessionCapabilities? { state.withLock { $0.capabilities } }
    /// Known once connected.
    public var mediaMode: SessionMediaMode? { state.withLock { $0.mediaMode } }
    /// The session's streams now, oldest first.
    public var streams: [SessionStream] { state.withLock { $0.streams } }
    /// This client's own connection (OpenTok's `session.connection`), once connected.
    public var connection: SessionConnection? { state.withLock { $0.connection } }
    /// The session's other connections now, in the order they joined.
    public var connections: [SessionConnection] { state.withLock { $0.connections } }

    /// Opens the signalling WebSocket and waits (within the timeout) for `connected`.
    /// A `disconnect()` meanwhile, from another thread, ends it at once (`notConnected`):
    /// in the TCP connect, the TLS handshake, the upgrade or the wait for `connected`.
    public func connect() throws(SessionError) {
        let joined = try openSignalling()
        adopt(joined)
        // disconnect() came while `connected` was on its way: it may have found no socket to close.
        guard !readerStop.isStopRequested else {
            joined.socket.close()
            throw .notConnected
        }
        deliver(.connected(connectionId: joined.connectionId, capabilities: joined.capabilities, streams: joined.streams))
        let reader = StoppableThread(name: "camagent-session", signal: readerStop) { [self] stop in read(joined.socket, stop) }
        state.withLock { $0.reader = reader }
    }

    /// An open signalling WebSocket and what its `connected` said.
    private struct Joined {
        let socket: WebSocketConnection
        let connectionId: String
        let capabilities: SessionCapabilities
        let mediaMode: SessionMediaMode
        let streams: [SessionStream]
        let connection: SessionConnection?
        let connections: [SessionConnection]
        let rejoinKey: String?
    }

    /// - Parameter resuming: this client's connection to ask back (a rejoin), and its key.
    private func openSignalling(resuming: (connectionId: String, rejoinKey: String)? = nil) throws(SessionError) -> Joined {
        var connectURL = sessionURL + "/connect"
        if connectURL.hasPrefix("http") { connectURL = "ws" + connectURL.dropFirst(4) }
        if let resuming {
            let key = resuming.rejoinKey.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            connectURL += "?connectionId=\(resuming.connectionId)&rejoinKey=\(key)"
        }
        let socket: WebSocketConnection
        do {
            socket = try WebSocketConnection.connect(url: connectURL, headers: [("Authorization", "Bearer \(token)")],
                                                     timeout: timeout, allowInsecureTLS: allowInsecureTLS,
                                                     trustedCertificatesFile: trustedCertificatesFile, stop: readerStop)
        } catch {
            if case .stopped = error { throw .notConnected }  // disconnect() (or the reader's stop, for a rejoin)
            throw .signalling(error)
        }
        let deadline = MonotonicTimestamp.now().seconds + timeout
        while true {
            let left = deadline - MonotonicTimestamp.now().seconds
            guard left > 0 else {
                socket.close()
                throw .timedOut(seconds: timeout)
            }
            // In short waits, so that disconnect() (or the reader's stop, for a rejoin) ends it.
            guard !readerStop.isStopRequested else {
                socket.close()
                throw .notConnected
            }
            let message: WebSocketConnection.Message?
            do { message = try socket.receive(timeout: min(left, 0.25)) } catch {
                socket.close()
                throw .signalling(error)
            }
            guard let message else { continue }
            guard case .text(let text) = message else {
                socket.close()
                // The connection asked back was forced out by a moderator while this client was away.
                if case .closed(_, "forceDisconnected") = message { throw .forceDisconnected }
                throw .protocolError("the WebSocket closed before `connected`")
            }
            // Decoded once: the event, and the fields beyond it (mode, connections).
            guard let fields = try? JSONDecoder().decode(Incoming.self, from: Data(text.utf8)),
                  case .connected(let id, let capabilities, let streams)? = Self.event(from: fields) else {
                socket.close()
                throw .protocolError("the first message is not `connected`: \(text.prefix(200))")
            }
            return Joined(socket: socket, connectionId: id, capabilities: capabilities,
                          mediaMode: fields.mediaMode.flatMap(SessionMediaMode.init(rawValue:)) ?? .routed, streams: streams,
                          connection: fields.connection, connections: fields.connections ?? [], rejoinKey: fields.rejoinKey)
        }
    }

    private func adopt(_ joined: Joined) {
        state.withLock { s in
            s.socket = joined.socket
            s.connectionId = joined.connectionId
            s.capabilities = joined.capabilities
            s.mediaMode = joined.mediaMode
            s.streams = joined.streams
            s.connection = joined.connection
            s.connections = joined.connections
            s.rejoinKey = joined.rejoinKey
        }
    }

    /// Unpublishes what this client published here, then closes the
    /// WebSocket (the router then says connectionDestroyed to the others).
    public func disconnect() {
        for publication in publications.all { unpublish(publication.publisher) }
        // The stop first: a connect under way either sees it or has stored its socket to be closed here.
        readerStop.requestStop()
        let (socket, reader) = state.withLock { s in (s.socket, s.reader) }
        socket?.close()
        reader?.stop()
    }

    // MARK: Messages to the router

    /// A signal to every connection, or to one (`to`: its connectionId).
    public func signal(type: String?, data: String, to connectionId: String? = nil) throws(SessionError) {
        var message: [String: Any] = ["type": "signal", "data": data]
        if let type { message["signalType"] = type }
        if let connectionId { message["to"] = connectionId }
        try send(message)
    }

    /// Tells the router what a subscriber wants (subscribeToVideo etc.); nil leaves a setting as it is.
    public func subscriberSettings(subscriberId: String, subscribeToAudio: Bool? = nil, subscribeToVideo: Bool? = nil,
                                   subscribeToCaptions: Bool? = nil, preferredFrameRate: Double? = nil,
                                   preferredResolution: FrameSize? = nil) throws(SessionError) {
        var message: [String: Any] = ["type": "subscriberSettings", "subscriberId": subscriberId]
        if let subscribeToAudio { message["subscribeToAudio"] = subscribeToAudio }
        if let subscribeToVideo { message["subscribeToVideo"] = subscribeToVideo }
        if let subscribeToCaptions { message["subscribeToCaptions"] = subscribeToCaptions }
        if let preferredFrameRate { message["preferredFrameRate"] = preferredFrameRate }
        if let preferredResolution {
            message["preferredResolution"] = ["width": preferredResolution.width, "height": preferredResolution.height]
        }
        try send(message)
    }

    /// A publisher's property (hasAudio, hasVideo, publishCaptions) for its stream.
    public func publisherProperty(streamId: String, hasAudio: Bool? = nil, hasVideo: Bool? = nil,
                                  publishCaptions: Bool? = nil) throws(SessionError) {
        var message: [String: Any] = ["type": "publisherProperty", "streamId": streamId]
        if let hasAudio { message["hasAudio"] = hasAudio }
        if let hasVideo { message["hasVideo"] = hasVideo }
        if let publishCaptions { message["publishCaptions"] = publishCaptions }
        try send(message)
    }

    // MARK: Publishing into a relayed session

    /// The media mode of the session at `url`, asked before joining it (GET
    /// /v2/sessions/SID with any token of that session).
    public static func mediaMode(url: String, token: String, timeout: Double = 10,
                                 trustedCertificatesFile: String? = nil) throws(SessionError) -> SessionMediaMode {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        let response = try rest("GET", base, token: token.trimmingCharacters(in: .whitespacesAndNewlines), body: nil,
                                timeout: timeout, trustedCertificatesFile: trustedCertificatesFile)
        struct Description: Decodable { var mediaMode: SessionMediaMode }
        guard response.status == 200, let description = try? JSONDecoder().decode(Description.self, from: Data(response.body)) else {
            throw refusal(response)
        }
        return description.mediaMode
    }

    /// Announces a stream this connection publishes in a relayed session
    /// (streamCreated to everyone) and returns its id. The router then
    /// passes each subscriber's offer here as `subscribeOffer`.
    public func announceRelayedStream(name: String, hasAudio: Bool, hasVideo: Bool,
                                      width: Int, height: Int, publishCaptions: Bool = false) throws(SessionError) -> String {
        try announceRelayed(name: name, hasAudio: hasAudio, hasVideo: hasVideo, width: width, height: height,
                            publishCaptions: publishCaptions).streamId
    }

    /// `announceRelayedStream`, and the connection the stream was announced under.
    func announceRelayed(name: String, hasAudio: Bool, hasVideo: Bool, width: Int, height: Int,
                         publishCaptions: Bool) throws(SessionError) -> (streamId: String, connectionId: String) {
        guard let connectionId else { throw .notConnected }
        let body: [String: Any] = ["hasAudio": hasAudio, "hasVideo": hasVideo, "videoType": "camera",
                                   "width": width, "height": height]
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
        var query = "connectionId=\(connectionId)"
        if !name.isEmpty { query += "&name=" + Self.queryEncoded(name) }
        // Captions are for routed sessions: the router says so plainly.
        if publishCaptions { query += "&publishCaptions=true" }
        let response = try Self.rest("POST", "\(sessionURL)/publish?\(query)", token: token, body: Array(data),
                                     timeout: timeout, trustedCertificatesFile: trustedCertificatesFile)
        struct Announced: Decodable { var streamId: String }
        guard response.status == 201, let announced = try? JSONDecoder().decode(Announced.self, from: Data(response.body)) else {
            throw Self.refusal(response)
        }
        return (announced.streamId, connectionId)
    }

    /// Ends a stream announced with `announceRelayedStream` (streamDestroyed, clientDisconnected).
    public func endRelayedStream(streamId: String) throws(SessionError) {
        let response = try Self.rest("DELETE", "\(sessionURL)/publish/\(streamId)", token: token, body: nil,
                                     timeout: timeout, trustedCertificatesFile: trustedCertificatesFile)
        guard response.status == 204 else { throw Self.refusal(response) }
    }

    /// The answer to a `subscribeOffer`: the subscriber's WHEP request gets it.
    public func answerOffer(subscriberId: String, sdp: String) throws(SessionError) {
        try send(["type": "subscribeAnswer", "subscriberId": subscriberId, "sdp": sdp])
    }

    /// Refuses a `subscribeOffer`: `code` 400 (an offer this publisher
    /// cannot answer) or 503 (no room), passed to the subscriber with `message`.
    public func refuseOffer(subscriberId: String, code: Int, message: String) throws(SessionError) {
        try send(["type": "subscribeError", "subscriberId": subscriberId, "code": code, "message": message])
    }

    /// Tells the router that this publisher's connection to a subscriber
    /// ended without the subscriber's DELETE (its ICE consent stopped), so
    /// the router stops counting it.
    public func subscriberLeft(subscriberId: String) throws(SessionError) {
        try send(["type": "subscriberLeft", "subscriberId": subscriberId])
    }

    private static func rest(_ method: String, _ url: String, token: String, body: [UInt8]?, timeout: Double,
                             trustedCertificatesFile: String?) throws(SessionError) -> PlainHTTPResponse {
        var headers = [("Authorization", "Bearer \(token)")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        do {
            return try plainHTTPRequest(method: method, url: url, headers: headers, body: body ?? [], timeout: timeout,
                                        trustedCertificatesFile: trustedCertificatesFile)
        } catch {
            throw .signalling(error)
        }
    }

    /// The router's `{"code","message"}` as an error.
    private static func refusal(_ response: PlainHTTPResponse) -> SessionError {
        struct Refusal: Decodable { var message: String }
        let message = (try? JSONDecoder().decode(Refusal.self, from: Data(response.body)))?.message
            ?? String(decoding: response.body.prefix(200), as: UTF8.self)
        return .refused(status: response.status, message: message)
    }

    /// The WHEP endpoint of a stream, tied to this connection.
    public func subscribeURL(streamId: String) -> String {
        let base = "\(sessionURL)/streams/\(streamId)/subscribe"
        guard let id = connectionId else { return base }
        return base + "?connectionId=\(id)"
    }

    /// A subscriber of one of the session's streams (not started).
    public func subscribe(streamId: String, settings: SubscriberSettings = SubscriberSettings(),
                          video: (any VideoRenderer)?, audio: (any AudioRenderer)?,
                          onEvent: @escaping @Sendable (SubscriberEvent) -> Void) throws(SubscriberError) -> Subscriber {
        let subscriber = try Subscriber(endpoint: subscribeURL(streamId: streamId), token: token, streamId: streamId, settings: settings,
                                        video: video, audio: audio, logger: logger, onEvent: onEvent)
        // Listed and given the stream in one step with `updateSubscriberStreams`: a change the
        // reader thread takes in meanwhile reaches it either way.
        subscribers.withLock { list in
            list.removeAll { $0.subscriber == nil }
            list.append(WeakSubscriber(subscriber: subscriber, streamId: streamId))
            if let stream = streams.first(where: { $0.streamId == streamId }) { subscriber.streamChanged(stream) }
        }
        // subscribeToAudio/Video/Captions reach the router, which then sends only what is wanted.
        subscriber.onSettingsChange { [weak self, logger] id, wishes in
            do {
                try self?.subscriberSettings(subscriberId: id, subscribeToAudio: wishes.audio, subscribeToVideo: wishes.video,
                                             subscribeToCaptions: wishes.captions, preferredFrameRate: wishes.frameRate,
                                             preferredResolution: wishes.resolution)
            } catch {
                logger.notice("subscriberSettings for \(id) not sent: \(error)")
            }
        }
        return subscriber
    }

    /// Ends a subscriber made by `subscribe` (its WHEP DELETE; the router
    /// stops sending to it) and forgets it.
    public func unsubscribe(_ subscriber: Subscriber) {
        subscriber.stop()
        subscribers.withLock { list in list.removeAll { $0.subscriber == nil || $0.subscriber === subscriber } }
    }

    private func send(_ message: [String: Any]) throws(SessionError) {
        guard let socket = state.withLock({ $0.ended ? nil : $0.socket }) else { throw .notConnected }
        guard let data = try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys]) else {
            throw .protocolError("a message that is not JSON")
        }
        do { try socket.send(text: String(decoding: data, as: UTF8.self)) } catch { throw .signalling(error) }
    }

    // MARK: The reader thread

    /// How often the reader pings the router, and how long it waits to hear anything before it
    /// takes the path for dead (the router answers every `ping` with a `pong`).
    static let pingInterval = 5.0
    static let silenceLimit = 20.0

    private func read(_ first: WebSocketConnection, _ stop: StopSignal) {
        var socket = first
        while true {
            switch follow(socket, stop) {
            case .stopped:
                // `disconnect` may have closed the socket before a rejoin replaced it.
                socket.close()
                end(SessionEvent.ownDisconnectReason)
                return
            case .ended(let reason):
                socket.close()
                end(reason)
                return
            case .lost(let reason):
                guard rejoinWindow > 0 else {
                    socket.close()
                    end(reason)
                    return
                }
                // No close frame: a router that still hears this socket would take it
                // for the client leaving, and end the connection the rejoin asks back.
                socket.abandon()
                switch rejoin(after: reason, stop) {
                case .rejoined(let next): socket = next
                case .stopped: end(SessionEvent.ownDisconnectReason)
                    return
                case .gaveUp(let why): end("\(reason); \(why)")
                    return
                }
            }
        }
    }

    private enum Followed {
        case stopped
        /// The router ended this connection on purpose (a forced disconnect): not rejoined.
        case ended(String)
        /// The WebSocket failed, closed or went silent.
        case lost(String)
    }

    /// Reads one WebSocket's messages until it ends, pinging the router on the way.
    private func follow(_ socket: WebSocketConnection, _ stop: StopSignal) -> Followed {
        var lastHeard = MonotonicTimestamp.now().seconds
        var nextPing = lastHeard + Self.pingInterval
        while !stop.isStopRequested {
            let now = MonotonicTimestamp.now().seconds
            if now >= nextPing {
                nextPing = now + Self.pingInterval
                do { try socket.send(text: #"{"type":"ping"}"#) } catch {
                    return stop.isStopRequested ? .stopped : .lost("signalling failed: \(error)")
                }
            }
            if now - lastHeard > Self.silenceLimit {
                return .lost("nothing heard from the router for \(Int(Self.silenceLimit)) s")
            }
            let message: WebSocketConnection.Message?
            do { message = try socket.receive(timeout: 0.25) } catch {
                return stop.isStopRequested ? .stopped : .lost("signalling failed: \(error)")
            }
            guard let message else { continue }
            lastHeard = MonotonicTimestamp.now().seconds
            switch message {
            case .closed(let code, let reason):
                if stop.isStopRequested { return .stopped }
                // No close code: the connection broke (reset, or closed without a close frame).
                let why = code.map { "the router closed the session's WebSocket (\($0)\(reason.isEmpty ? "" : ": \(reason)"))" }
                    ?? "the session's WebSocket broke: \(reason.isEmpty ? "closed without a close frame" : reason)"
                return reason == "forceDisconnected" ? .ended(why) : .lost(why)
            case .text(let text):
                guard let event = Self.parse(text) else {
                    logger.debug("session: a message this client does not know: \(text.prefix(200))")
                    continue
                }
                state.withLock { s in
                    switch event {
                    case .streamCreated(let stream): s.streams.append(stream)
                    case .streamDestroyed(let id, _): s.streams.removeAll { $0.streamId == id }
                    case .streamPropertyChanged(let id, let property, _, let newValue):
                        if let index = s.streams.firstIndex(where: { $0.streamId == id }) {
                            _ = s.streams[index].apply(property: property, newValue: newValue)
                        }
                    case .connectionCreated(let connection): s.connections.append(connection)
                    case .connectionDestroyed(let id, _): s.connections.removeAll { $0.connectionId == id }
                    default: break
                    }
                }
                forwardToSubscriber(event)
                if case .streamPropertyChanged = event { updateSubscriberStreams() }
                deliver(event)
            }
        }
        return .stopped
    }

    private enum Rejoined {
        case rejoined(WebSocketConnection)
        case stopped
        case gaveUp(String)
    }

    /// Joins the session again after its WebSocket was lost, with backoff,
    /// within `rejoinWindow`. A refusal that will not change (the token is
    /// refused, or the session is gone) ends it at once.
    private func rejoin(after reason: String, _ stop: StopSignal) -> Rejoined {
        state.withLock { $0.socket = nil }
        logger.notice("session signalling lost (\(reason)); joining again for up to \(rejoinWindow.formatted(decimals: 0)) s")
        deliver(.reconnecting(reason: reason))
        let deadline = MonotonicTimestamp.now().seconds + rejoinWindow
        var delay = 0.5
        var lastError = "no attempt"
        let (previous, key, known) = state.withLock { ($0.connectionId, $0.rejoinKey, $0.streams) }
        while !stop.isStopRequested {
            do {
                let joined = try openSignalling(resuming: previous.flatMap { id in key.map { (id, $0) } })
                let kept = joined.connectionId == previous
                let missed = kept ? missedEvents(joined) : []
                adopt(joined)
                updateSubscriberStreams()
                // `disconnect` came while joining: its reader ends with the new socket.
                if stop.isStopRequested { return .rejoined(joined.socket) }
                logger.notice("session joined again as connection \(joined.connectionId)\(kept ? ", kept by the router with its streams" : "")")
                // Kept: the streams this client knew, which the events after bring up to date.
                deliver(.reconnected(connectionId: joined.connectionId, streams: kept ? known : joined.streams, sameConnection: kept))
                for event in missed { deliver(event) }
                // A kept connection's streams went on (what their publishers changed meanwhile is
                // said again); a new one's are published again.
                if kept { sayPublishersAgain() } else { publishAgain(connectionId: joined.connectionId) }
                // Subscribers' media never went through the signalling; their settings are the new connection's to say.
                for subscriber in subscribers.withLock({ $0.compactMap(\.subscriber) }) { subscriber.repeatSettings() }
                return .rejoined(joined.socket)
            } catch {
                if case .notConnected = error, stop.isStopRequested { break }   // disconnect() ended the attempt
                lastError = error.description
                if case .signalling(let e) = error {
                    switch e {
                    case .unauthorized, .notFound: return .gaveUp("could not join again: \(lastError)")
                    default: break
                    }
                }
                if case .forceDisconnected = error { return .gaveUp("forceDisconnected: a moderator disconnected this client") }
                logger.notice("joining the session again failed: \(lastError)")
            }
            let left = deadline - MonotonicTimestamp.now().seconds
            guard left > 0 else { break }
            _ = stop.wait(milliseconds: Int32(min(delay, left) * 1000))
            delay = min(delay * 2, 4)
        }
        if stop.isStopRequested { return .stopped }
        return .gaveUp("could not join again within \(rejoinWindow.formatted(decimals: 0)) s: \(lastError)")
    }

    /// What a kept connection's `connected` says that this client had not
    /// heard (its last messages before the socket broke may have been lost
    /// on the way): streams and connections that came or went, and stream
    /// properties that changed, as events. One gone this way has no reason
    /// to give but that (`missedReason`). Signals lost that way stay lost.
    private func missedEvents(_ joined: Joined) -> [SessionEvent] {
        let (streams, connections) = state.withLock { ($0.streams, $0.connections) }
        let streamIDs = Set(joined.streams.map(\.streamId)), knownStreamIDs = Set(streams.map(\.streamId))
        let connectionIDs = Set(joined.connections.map(\.connectionId))
        let knownConnectionIDs = Set(connections.map(\.connectionId))
        var events: [SessionEvent] = []
        for stream in streams where !streamIDs.contains(stream.streamId) {
            events.append(.streamDestroyed(streamId: stream.streamId, reason: SessionEvent.missedReason))
        }
        for connection in connections where !connectionIDs.contains(connection.connectionId) {
            events.append(.connectionDestroyed(connectionId: connection.connectionId, reason: SessionEvent.missedReason))
        }
        for connection in joined.connections where !knownConnectionIDs.contains(connection.connectionId) {
            events.append(.connectionCreated(connection))
        }
        for stream in joined.streams where !knownStreamIDs.contains(stream.streamId) {
            events.append(.streamCreated(stream))
        }
        // Properties of the streams it knew that changed (hasAudio, hasVideo, hasCaptions, videoDimensions).
        for now in joined.streams {
            guard let before = streams.first(where: { $0.streamId == now.streamId }) else { continue }
            for (property, old, new) in [("hasAudio", before.hasAudio, now.hasAudio), ("hasVideo", before.hasVideo, now.hasVideo),
                                         ("hasCaptions", before.hasCaptions, now.hasCaptions)] where old != new {
                events.append(.streamPropertyChanged(streamId: now.streamId, property: property, oldValue: "\(old)", newValue: "\(new)"))
            }
            if (before.width, before.height) != (now.width, now.height) {
                events.append(.streamPropertyChanged(
                    streamId: now.streamId, property: "videoDimensions",
                    oldValue: JSONText.object(["width": before.width, "height": before.height]),
                    newValue: JSONText.object(["width": now.width, "height": now.height])))
            }
        }
        return events
    }

    /// Each subscriber's `stream` as the session knows it now (a stream that
    /// ended keeps what it was last).
    private func updateSubscriberStreams() {
        // Under the subscribers' lock (the state's taken inside it, never the other way round),
        // so that `subscribe` cannot list a subscriber between the read and the update.
        subscribers.withLock { list in
            let streams = state.withLock { $0.streams }
            for entry in list {
                guard let subscriber = entry.subscriber, let stream = streams.first(where: { $0.streamId == entry.streamId }) else { continue }
                subscriber.streamChanged(stream)
            }
        }
    }

    /// Audio fallback's steps and the publisher's video off and on, to the
    /// subscriber they name (if it is one of ours); captions, to our
    /// subscribers of that stream.
    private func forwardToSubscriber(_ event: SessionEvent) {
        if case .caption(let streamId, let text, let isFinal) = event {
            let mine = subscribers.withLock { list in list.filter { $0.streamId == streamId }.compactMap(\.subscriber) }
            for subscriber in mine { subscriber.routerSaid(.captionReceived(text: text, isFinal: isFinal)) }
            return
        }
        let id: String
        let change: SubscriberEvent
        switch event {
        // A subscriber says its own subscribeToVideo changes at once, without the router.
        case .videoDisabled(_, "subscribeToVideo"), .videoEnabled(_, "subscribeToVideo"):
            return
        case .videoDisabled(let s, let reason):
            (id, change) = (s, .videoDisabled(VideoChangeReason(rawValue: reason) ?? .quality))
        case .videoEnabled(let s, let reason):
            (id, change) = (s, .videoEnabled(VideoChangeReason(rawValue: reason) ?? .quality))
        case .videoDisableWarning(let s): (id, change) = (s, .videoDisableWarning)
        case .videoDisableWarningLifted(let s): (id, change) = (s, .videoDisableWarningLifted)
        default: return
        }
        let mine = subscribers.withLock { list in list.compactMap(\.subscriber).first { $0.subscriberID == id } }
        mine?.routerSaid(change)
    }

    private func end(_ reason: String) {
        let first = state.withLock { s -> Bool in
            defer { s.ended = true }
            return !s.ended
        }
        guard first else { return }
        deliver(.disconnected(reason: reason))
        continuation.finish()
    }

    private func deliver(_ event: SessionEvent) {
        publishingEvent(event)
        continuation.yield(event)
        state.withLock { $0.delegate }?.session(self, didReceive: event)
    }

    // MARK: Parsing

    private struct Incoming: Decodable {
        var type: String
        var connectionId: String?
        var capabilities: SessionCapabilities?
        var streams: [SessionStream]?
        var connections: [SessionConnection]?
        var connection: SessionConnection?
        var rejoinKey: String?
        var stream: SessionStream?
        var streamId: String?
        var reason: String?
        var property: String?
        var oldValue: JSONText?
        var newValue: JSONText?
        var signalType: String?
        var data: JSONText?
        var from: String?
        var text: String?
        var isFinal: Bool?
        var subscriberId: String?
        var code: Int?
        var message: String?
        var mediaMode: String?
        var sdp: String?
    }

    /// Any JSON value, kept as its JSON text (stream properties and signal data are of several types).
    private struct JSONText: Decodable {
        var text: String
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let b = try? container.decode(Bool.self) { text = b ? "true" : "false" }
            else if let i = try? container.decode(Int.self) { text = String(i) }
            else if let d = try? container.decode(Double.self) { text = String(d) }
            else if let s = try? container.decode(String.self) { text = s }
            else if let o = try? container.decode([String: Int].self) { text = Self.object(o) }
            else if container.decodeNil() { text = "null" }
            else { text = "…" }
        }

        /// An object of whole numbers as its text here (keys sorted): videoDimensions' values.
        static func object(_ fields: [String: Int]) -> String {
            "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
    }

    static func parse(_ text: String) -> SessionEvent? {
        (try? JSONDecoder().decode(Incoming.self, from: Data(text.utf8))).flatMap(event(from:))
    }

    private static func event(from m: Incoming) -> SessionEvent? {
        switch m.type {
        case "connected":
            guard let id = m.connectionId, let capabilities = m.capabilities else { return nil }
            return .connected(connectionId: id, capabilities: capabilities, streams: m.streams ?? [])
        case "connectionCreated":
            return m.connection.map { .connectionCreated($0) }
        case "connectionDestroyed":
            guard let id = m.connectionId else { return nil }
            return .connectionDestroyed(connectionId: id, reason: m.reason ?? "")
        case "streamCreated":
            return m.stream.map { .streamCreated($0) }
        case "streamDestroyed":
            guard let id = m.streamId else { return nil }
            return .streamDestroyed(streamId: id, reason: m.reason ?? "")
        case "streamPropertyChanged":
            guard let id = m.streamId, let property = m.property else { return nil }
            return .streamPropertyChanged(streamId: id, property: property, oldValue: m.oldValue?.text ?? "null",
                                          newValue: m.newValue?.text ?? "null")
        case "signal":
            return .signal(type: m.signalType, data: m.data?.text ?? "", from: m.from ?? "")
        case "caption":
            guard let id = m.streamId, let text = m.text else { return nil }
            return .caption(streamId: id, text: text, isFinal: m.isFinal ?? false)
        case "videoDisabled", "videoEnabled":
            guard let id = m.subscriberId else { return nil }
            return m.type == "videoDisabled" ? .videoDisabled(subscriberId: id, reason: m.reason ?? "")
                : .videoEnabled(subscriberId: id, reason: m.reason ?? "")
        case "videoDisableWarning", "videoDisableWarningLifted":
            guard let id = m.subscriberId else { return nil }
            return m.type == "videoDisableWarning" ? .videoDisableWarning(subscriberId: id)
                : .videoDisableWarningLifted(subscriberId: id)
        case "error":
            return .error(code: m.code, message: m.message ?? "")
        case "subscribeOffer":
            guard let subscriber = m.subscriberId, let stream = m.streamId, let sdp = m.sdp else { return nil }
            return .subscribeOffer(subscriberId: subscriber, streamId: stream, sdp: sdp)
        case "unsubscribe":
            guard let subscriber = m.subscriberId, let stream = m.streamId else { return nil }
            return .unsubscribe(subscriberId: subscriber, streamId: stream)
        default:
            return nil   // pong, and messages of later versions
        }
    }
}
