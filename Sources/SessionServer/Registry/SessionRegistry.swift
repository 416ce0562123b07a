import FoundationEssentials
import MediaTypes

/// Every session, connection, stream and subscriber the router holds, and
/// the one place their events are made. Each change and the events it
/// causes happen under one lock, and events go into the connections'
/// outboxes right there, so every connection sees them in the order they
/// happened, after its own `connected`. Calls never block on the network;
/// what a change asks of the media engine is returned to the caller, which
/// does it after the lock is released.
public final class SessionRegistry: Sendable {
    public let limits: RegistryLimits
    private let state = PThreadLocked(State())
    private let now: @Sendable () -> Date

    public init(limits: RegistryLimits = RegistryLimits(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.limits = limits
        self.now = now
    }

    // MARK: State

    private struct State {
        var sessions: [String: SessionState] = [:]
        /// Every subscriber, to its session and stream (ids are unique
        /// router-wide), the `jti` of the token that subscribed, whether
        /// its client turned its video off (subscribeToVideo false: said once
        /// per change, whichever connection of that client says it again),
        /// and whether it gets no video because it decodes none of the
        /// stream's codecs (codecNotSupported: the publisher's video on and
        /// off is nothing to it).
        var subscribers: [String: (sessionID: String, streamID: String, tokenID: String?, videoOff: Bool,
                                   videoCodecNotSupported: Bool)] = [:]
        /// Every running captions id, to its session.
        var captions: [String: String] = [:]
        /// The last `Away.id` given.
        var lastAwayID = 0
    }

    private struct SessionState {
        var info: SessionInfo
        /// In the order they joined.
        var connections: [ConnectionState] = []
        /// In the order they were announced.
        var streams: [StreamState] = []
        /// Streams being answered by the media engine: they hold a place
        /// under the limit, and what the engine reports before they are
        /// announced is kept here.
        var pendingStreams: [String: PendingStream] = [:]
        /// Live captions, while started (REST captions start/stop).
        var captions: CaptionsInfo?
        /// Since when it has had no connection, stream or captions (nil while it has any): for expiry.
        var idleSince: Date?
        /// The last connections a moderator forced out (id, rejoin key): their clients may
        /// not take them back, and are told why (one away when it was forced never heard it).
        var forcedOut: [(connectionID: String, rejoinKey: String)] = []
        static let forcedOutRemembered = 100

        var isIdle: Bool { connections.isEmpty && streams.isEmpty && pendingStreams.isEmpty && captions == nil }

        func connectionIndex(_ id: String) -> Int? { connections.firstIndex { $0.info.connectionId == id } }

        /// A subscriber went: what its client wished of it goes too (or each subscribe
        /// and unsubscribe would leave an entry behind for the connection's lifetime).
        mutating func forgetSettings(ofSubscribers ids: [String]) {
            guard !ids.isEmpty else { return }
            for c in connections.indices where !connections[c].subscriberSettings.isEmpty {
                for id in ids { connections[c].subscriberSettings[id] = nil }
            }
        }
        /// The connections a client is told of in its `connected`: every one but its own.
        func connectionInfos(besides id: String) -> [ConnectionInfo] { connections.map(\.info).filter { $0.connectionId != id } }
        func streamIndex(_ id: String) -> Int? { streams.firstIndex { $0.info.streamId == id } }

        /// Queues `text` for every connection with a socket, but `except`.
        func broadcast(_ text: String, except: String? = nil) {
            for connection in connections where connection.info.connectionId != except {
                connection.outbox?.send(text)
            }
        }
    }

    private struct ConnectionState {
        var info: ConnectionInfo
        var role: Role
        /// nil for a bare WHIP client's connection: it has no socket. While
        /// the connection is away, the backlog its client gets on return.
        var outbox: Outbox?
        /// Its socket broke and it waits for its client (`rejoinGrace`).
        var away: Away? = nil
        /// What its client shows to take it back (a signalling connection's; nil for a bare WHIP client's).
        var rejoinKey: String? = nil
        /// The `jti` of the token it joined with: a WHIP stream tied to it
        /// (`?connectionId=`) and the subscribers whose settings it says must
        /// come with the same token (nil: a bare WHIP client's, or made without one).
        var tokenID: String? = nil
        var subscriberSettings: [String: SubscriberSettings] = [:]
    }

    private struct StreamState {
        var info: StreamInfo
        /// Subscribers answered by the engine, in order.
        var subscribers: [String] = []
        /// Subscribers being answered: they hold a place under the limit.
        var pendingSubscribers: Set<String> = []
        /// The stream's publisher is a bare WHIP client whose connection
        /// exists only for this stream: it goes when the stream goes.
        var ownsConnection: Bool
        /// The `jti` of the token whose WHIP POST made it (nil: made otherwise).
        var publisherTokenID: String?
        /// Its publisher asks for captions (publishCaptions).
        var publishCaptions = false
        /// It carries audio at all (hasAudio only says whether that audio is on now).
        var hasAudioTrack: Bool
        /// It carries video at all (hasVideo only says whether that video is on now).
        var hasVideoTrack: Bool
    }

    /// A connection kept for its client after its socket broke: what the
    /// client had been told by then, to say again when it comes back, ahead
    /// of what happened since (queued in the backlog outbox).
    private struct Away {
        /// Which time away this is (a late expiry of an earlier one does nothing).
        var id: Int
        var connections: [ConnectionInfo]
        var streams: [StreamInfo]
    }

    private struct PendingStream {
        var endedReason: StreamEndReason?
        var dimensions: (width: Int, height: Int)?
    }

    // MARK: Sessions

    public func createSession(mediaMode: MediaMode) throws(RegistryError) -> SessionInfo {
        let created = now()
        return try state.withLock { (state) throws(RegistryError) -> SessionInfo in
            guard state.sessions.count < limits.maxSessions else {
                throw .limitReached("this router holds its maximum of \(limits.maxSessions) sessions")
            }
            var id = RandomID.make()
            while state.sessions[id] != nil { id = RandomID.make() }
            let info = SessionInfo(sessionID: id, mediaMode: mediaMode, createdAt: created)
            state.sessions[id] = SessionState(info: info, idleSince: created)
            return info
        }
    }

    /// Removes the sessions idle for `limits.sessionIdleTimeout` or longer, and
    /// returns their ids. Idleness is looked at here: a session busy now starts
    /// its idle time again at the next call after it empties, so call this
    /// regularly (SessionServer: every minute).
    public func expireIdleSessions() -> [String] {
        guard let timeout = limits.sessionIdleTimeout else { return [] }
        let at = now()
        return state.withLock { state in
            var expired: [String] = []
            for (id, session) in state.sessions {
                guard session.isIdle else {
                    state.sessions[id]?.idleSince = nil
                    continue
                }
                guard let since = session.idleSince else {
                    state.sessions[id]?.idleSince = at
                    continue
                }
                if at.timeIntervalSince(since) >= Double(timeout.components.seconds) { expired.append(id) }
            }
            for id in expired { state.sessions[id] = nil }
            return expired.sorted()
        }
    }

    public func session(_ sessionID: String) -> SessionInfo? {
        state.withLock { $0.sessions[sessionID]?.info }
    }

    public func counts() -> RegistryCounts {
        state.withLock { state in
            var counts = RegistryCounts(sessions: state.sessions.count, connections: 0, streams: 0, subscribers: 0)
            for session in state.sessions.values {
                counts.connections += session.connections.count
                counts.streams += session.streams.count
                for stream in session.streams { counts.subscribers += stream.subscribers.count }
            }
            return counts
        }
    }

    // MARK: Connections

    /// Throws when a connection to that session would be refused now (no
    /// such session, it is full, or `resuming` names another client's
    /// connection): checked before a WebSocket upgrade, so the refusal is
    /// an HTTP status. `connect` checks again.
    public func checkCanConnect(sessionID: String, resuming: Rejoin? = nil, tokenID: String? = nil) throws(RegistryError) {
        try state.withLock { (state) throws(RegistryError) in
            guard let session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            // Its client is let in, to be told it was forced out (`wasForcedOut`).
            if let resuming, Self.wasForcedOut(session, resuming) { return }
            if let resuming, limits.rejoinGrace != nil, let index = session.connectionIndex(resuming.connectionID) {
                try Self.checkCanResume(session.connections[index], resuming, tokenID: tokenID)
                return
            }
            try checkConnectionRoom(session)
        }
    }

    /// What a client shows to come back to its connection (`?connectionId=&rejoinKey=`).
    public struct Rejoin: Sendable, Equatable {
        public var connectionID: String
        public var rejoinKey: String

        public init(connectionID: String, rejoinKey: String) {
            self.connectionID = connectionID
            self.rejoinKey = rejoinKey
        }
    }

    /// Whether a moderator forced out the connection a client wants back
    /// (shown with its key: nobody else learns it).
    func wasForcedOut(sessionID: String, _ rejoin: Rejoin) -> Bool {
        state.withLock { state in state.sessions[sessionID].map { Self.wasForcedOut($0, rejoin) } ?? false }
    }

    private static func wasForcedOut(_ session: SessionState, _ rejoin: Rejoin) -> Bool {
        session.forcedOut.contains { $0.connectionID == rejoin.connectionID && $0.rejoinKey == rejoin.rejoinKey }
    }

    /// A client may take back only a signalling connection it made: its
    /// rejoin key and the same token.
    private static func checkCanResume(_ connection: ConnectionState, _ rejoin: Rejoin, tokenID: String?) throws(RegistryError) {
        guard let key = connection.rejoinKey, key == rejoin.rejoinKey, let tokenID, connection.tokenID == tokenID else {
            throw .notAllowed("connection \(connection.info.connectionId) is not this client's to take back "
                              + "(its rejoin key and the token it joined with are needed)")
        }
    }

    private func checkConnectionRoom(_ session: SessionState) throws(RegistryError) {
        guard session.connections.count < limits.maxConnectionsPerSession else {
            throw .limitReached("session \(session.info.sessionID) has its maximum of \(limits.maxConnectionsPerSession) connections")
        }
    }

    /// A signalling connection as `connect` made or resumed it: its outbox
    /// to send from, and `first`, a message to send ahead of what is queued
    /// there (a resumed connection's `connected`, ahead of its backlog).
    struct Joined {
        var info: ConnectionInfo
        var outbox: Outbox?
        var first: String?
        /// The client came back to a connection it had (`resuming`).
        var resumed: Bool
    }

    /// Adds a connection. With an outbox (a signalling connection) it first
    /// gets `connected`; every other connection gets `connectionCreated`.
    func connect(sessionID: String, role: Role, data: String, outbox: Outbox?, tokenID: String? = nil) throws(RegistryError) -> ConnectionInfo {
        try join(sessionID: sessionID, role: role, data: data, outbox: outbox, tokenID: tokenID).info
    }

    /// `connect` for a signalling client, which may come back to a connection it had.
    ///
    /// `resuming` names a connection the client had, with its rejoin key: if
    /// it is still here (and the client uses the token it joined with; the
    /// router has a rejoin grace), the client takes it back, with its
    /// streams and subscribers and without an event to the others. Its
    /// `connected` lists what it had been told when its socket broke, and
    /// what happened since follows (the backlog). A socket of it still
    /// open (the client saw the path die first) is closed, and its client
    /// gets `connected` as things are now, as it does when more happened
    /// while it was away than its backlog holds. A connection
    /// gone by now (its grace ran out) gives a new one, as without `resuming`;
    /// one a moderator forced out is refused (`wasForcedOut` tells it first).
    func join(sessionID: String, role: Role, data: String, outbox: Outbox?, tokenID: String? = nil,
              resuming: Rejoin? = nil) throws(RegistryError) -> Joined {
        let created = now()
        return try state.withLock { (state) throws(RegistryError) -> Joined in
            guard var session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            if let resuming, Self.wasForcedOut(session, resuming) {
                throw .notAllowed("connection \(resuming.connectionID) was disconnected by a moderator (forceDisconnected)")
            }
            // Without a grace nothing is taken back: a new connection, as the router always did.
            if let resuming, limits.rejoinGrace != nil, let outbox, let index = session.connectionIndex(resuming.connectionID) {
                let connection = session.connections[index]
                try Self.checkCanResume(connection, resuming, tokenID: tokenID)
                let info = connection.info
                session.connections[index].away = nil
                if let away = connection.away, let backlog = connection.outbox, !backlog.overflowed {
                    state.sessions[sessionID] = session
                    let connected = Self.connected(connection, session: session.info,
                                                   connections: away.connections, streams: away.streams)
                    return Joined(info: info, outbox: backlog, first: connected, resumed: true)
                }
                // Still open here (the old socket goes), or away for more than its backlog
                // holds: the new socket starts from now, and the client finds out what changed.
                connection.outbox?.close(reason: "resumed")
                outbox.send(Self.connected(connection, session: session.info,
                                           connections: session.connectionInfos(besides: info.connectionId),
                                           streams: session.streams.map(\.info)))
                session.connections[index].outbox = outbox
                state.sessions[sessionID] = session
                return Joined(info: info, outbox: outbox, first: nil, resumed: true)
            }
            try checkConnectionRoom(session)
            let info = ConnectionInfo(connectionId: RandomID.make(), data: data, createdAt: created.unixMilliseconds)
            var connection = ConnectionState(info: info, role: role, outbox: outbox, tokenID: tokenID)
            if outbox != nil { connection.rejoinKey = RandomID.make() }
            outbox?.send(Self.connected(connection, session: session.info, connections: session.connections.map(\.info),
                                        streams: session.streams.map(\.info)))
            session.broadcast(jsonText(ServerMessage.ConnectionCreated(connection: info)))
            session.connections.append(connection)
            state.sessions[sessionID] = session
            return Joined(info: info, outbox: outbox, first: nil, resumed: false)
        }
    }

    private static func connected(_ connection: ConnectionState, session: SessionInfo, connections: [ConnectionInfo],
                                  streams: [StreamInfo]) -> String {
        jsonText(ServerMessage.Connected(connectionId: connection.info.connectionId, capabilities: connection.role.capabilities,
                                         mediaMode: session.mediaMode, connections: connections, streams: streams,
                                         connection: connection.info, rejoinKey: connection.rejoinKey))
    }

    /// What became of a signalling connection whose socket ended.
    enum SocketEnd: Equatable {
        /// Kept for its client; `expireAway` with this id ends it if the client has not come back.
        case kept(awayID: Int)
        /// Disconnected (nil: it was gone already).
        case ended(MediaRelease?)
        /// Its client is back on another socket: this one ended nothing.
        case replaced
    }

    /// A signalling connection's socket ended. A broken one
    /// (networkDisconnected, not a client cut off for not reading) is kept
    /// for `rejoinGrace`, its events queued in a backlog for the client's
    /// return; any other is disconnected. Nothing happens when `outbox` is
    /// no longer the connection's (its client came back on another socket).
    func socketEnded(sessionID: String, connectionID: String, outbox: Outbox, reason: ConnectionEndReason) -> SocketEnd {
        enum Decision { case keep(Int), end, replaced }
        let decision = state.withLock { state -> Decision in
            guard var session = state.sessions[sessionID], let index = session.connectionIndex(connectionID) else { return .end }
            guard session.connections[index].outbox === outbox else { return .replaced }
            guard reason == .networkDisconnected, limits.rejoinGrace != nil, !outbox.overflowed else { return .end }
            state.lastAwayID += 1
            session.connections[index].away = Away(
                id: state.lastAwayID, connections: session.connectionInfos(besides: connectionID),
                streams: session.streams.map(\.info))
            session.connections[index].outbox = Outbox()
            state.sessions[sessionID] = session
            return .keep(state.lastAwayID)
        }
        switch decision {
        case .keep(let awayID): return .kept(awayID: awayID)
        case .replaced: return .replaced
        case .end:
            // A client that came back in between keeps its connection.
            return .ended(disconnect(sessionID: sessionID, connectionID: connectionID, reason: reason) { $0.outbox === outbox })
        }
    }

    /// Ends a connection still away (`awayID`: its grace ran out) as a
    /// network disconnect. Nil when its client came back (or it went otherwise).
    func expireAway(sessionID: String, connectionID: String, awayID: Int) -> MediaRelease? {
        disconnect(sessionID: sessionID, connectionID: connectionID, reason: .networkDisconnected) { $0.away?.id == awayID }
    }

    /// The key a connection's client shows to take it back (its `connected` says it).
    func rejoinKey(sessionID: String, connectionID: String) -> String? {
        state.withLock { state in
            state.sessions[sessionID].flatMap { session in session.connectionIndex(connectionID).flatMap { session.connections[$0].rejoinKey } }
        }
    }

    /// Whether the connection's socket broke and its client has not come back yet.
    func isAway(sessionID: String, connectionID: String) -> Bool {
        state.withLock { state in
            state.sessions[sessionID].flatMap { session in
                session.connectionIndex(connectionID).map { session.connections[$0].away != nil }
            } ?? false
        }
    }

    /// Whether a request made with the token `tokenID` may act for the
    /// connection: it joined with that same token. Throws 404 for a
    /// connection not in the session, 403 for another client's.
    func checkOwnership(sessionID: String, connectionID: String, tokenID: String?) throws(RegistryError) {
        try state.withLock { (state) throws(RegistryError) in
            guard let session = state.sessions[sessionID], let index = session.connectionIndex(connectionID) else {
                throw .noSuchConnection(connectionID)
            }
            // A bare WHIP client's or a local stream's connection has no socket: nothing to tie to.
            let connection = session.connections[index]
            guard connection.outbox != nil, connection.tokenID == tokenID else {
                throw .notAllowed("connection \(connectionID) is not a signalling connection made with this token; "
                                  + "tie a stream only to your own connection")
            }
        }
    }

    /// What the media engine must let go of after a change: the streams to
    /// unpublish and the subscribers to unsubscribe.
    public struct MediaRelease: Sendable, Equatable {
        public var streamIDs: [String] = []
        public var subscriberIDs: [String] = []
    }

    /// Removes a connection: its streams end first (`streamDestroyed`, with
    /// the reason that follows from `reason`), then `connectionDestroyed` goes
    /// to the others. A forced disconnect closes the connection's socket.
    /// Returns nil when the connection is already gone (so a socket closing
    /// after a forced disconnect changes nothing).
    @discardableResult
    func disconnect(sessionID: String, connectionID: String, reason: ConnectionEndReason) -> MediaRelease? {
        disconnect(sessionID: sessionID, connectionID: connectionID, reason: reason) { _ in true }
    }

    /// `disconnect`, when the connection is as `condition` wants it, checked
    /// under the same lock (a client that came back meanwhile keeps it).
    private func disconnect(sessionID: String, connectionID: String, reason: ConnectionEndReason,
                            if condition: (ConnectionState) -> Bool) -> MediaRelease? {
        state.withLock { state -> MediaRelease? in
            guard var session = state.sessions[sessionID], let index = session.connectionIndex(connectionID),
                  condition(session.connections[index]) else { return nil }
            let connection = session.connections.remove(at: index)
            var release = MediaRelease()
            for stream in session.streams where stream.info.connectionId == connectionID {
                release.streamIDs.append(stream.info.streamId)
                release.subscriberIDs += stream.subscribers
                for id in stream.subscribers { state.subscribers[id] = nil }
                session.forgetSettings(ofSubscribers: stream.subscribers)
                session.broadcast(jsonText(ServerMessage.StreamDestroyed(streamId: stream.info.streamId, reason: reason.streamReason)))
            }
            session.streams.removeAll { $0.info.connectionId == connectionID }
            session.broadcast(jsonText(ServerMessage.ConnectionDestroyed(connectionId: connectionID, reason: reason)))
            if reason == .forceDisconnected {
                connection.outbox?.close(reason: reason.rawValue)
                if let key = connection.rejoinKey { session.forcedOut.append((connectionID, key)) }
                if session.forcedOut.count > SessionState.forcedOutRemembered { session.forcedOut.removeFirst() }
            } else {
                connection.outbox?.finish()
            }
            state.sessions[sessionID] = session
            // A relayed session's media never passed through the engine.
            return session.info.mediaMode == .routed ? release : MediaRelease()
        }
    }

    /// `signal`: to every other connection, or only to `to`.
    func signal(sessionID: String, from: String, to: String?, signalType: String?, data: JSONValue) throws(RegistryError) {
        try state.withLock { (state) throws(RegistryError) in
            guard let session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            let text = jsonText(ServerMessage.Signal(signalType: signalType, data: data, from: from))
            if let to {
                guard let index = session.connectionIndex(to) else { throw .noSuchConnection(to) }
                session.connections[index].outbox?.send(text)
            } else {
                session.broadcast(text, except: from)
            }
        }
    }

    /// Audio fallback for a subscriber: `videoDisableWarning`,
    /// `videoDisableWarningLifted`, `videoDisabled` or `videoEnabled` with
    /// reason quality, to every connection of its session (the message names
    /// the subscriber; its client knows its own). The other reasons:
    /// publishVideo in `setStreamProperties`, subscribeToVideo in
    /// `storeSubscriberSettings`.
    func subscriberVideoQuality(subscriberID: String, messageType: String) {
        state.withLock { state in
            guard let place = state.subscribers[subscriberID], let session = state.sessions[place.sessionID] else { return }
            session.broadcast(jsonText(ServerMessage.SubscriberVideo(type: messageType, subscriberId: subscriberID, reason: "quality")))
        }
    }

    /// Queues a message for one connection alone (a reply: `pong`, `error`),
    /// behind the events already queued for it.
    func reply(sessionID: String, connectionID: String, _ text: String) {
        state.withLock { state in
            guard let session = state.sessions[sessionID], let index = session.connectionIndex(connectionID) else { return }
            session.connections[index].outbox?.send(text)
        }
    }

    // MARK: Streams

    /// Who publishes a stream: a signalling connection, or a bare WHIP
    /// client (OBS, GStreamer) that gets a connection of its own with it.
    enum Publisher: Sendable {
        case connection(String)
        case bareWHIPClient(role: Role, data: String)
    }

    /// Reserves a place for a stream the media engine is about to answer
    /// (the stream limit counts it) and returns its new id. Without a
    /// connection, the bare WHIP client's connection to come must fit too.
    /// `mediaMode` is how the stream comes: a WHIP offer (routed) or an
    /// announcement by a signalling connection (relayed, with the size the
    /// publisher says); it must be the session's.
    func reserveStream(sessionID: String, connectionID: String?, mediaMode: MediaMode = .routed,
                       dimensions: (width: Int, height: Int)? = nil) throws(RegistryError) -> String {
        try state.withLock { (state) throws(RegistryError) -> String in
            guard var session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            if let connectionID {
                guard session.connectionIndex(connectionID) != nil else { throw .noSuchConnection(connectionID) }
            }
            guard session.info.mediaMode == mediaMode else {
                throw .conflict(mediaMode == .routed ? Self.relayedMediaMessage : Self.routedAnnouncementMessage)
            }
            if mediaMode == .relayed && connectionID == nil { throw .conflict(Self.relayedNeedsConnectionMessage) }
            if connectionID == nil { try checkConnectionRoom(session) }
            guard session.streams.count + session.pendingStreams.count < limits.maxStreamsPerSession else {
                throw .limitReached("session \(sessionID) has its maximum of \(limits.maxStreamsPerSession) streams")
            }
            let id = RandomID.make()
            session.pendingStreams[id] = PendingStream(dimensions: dimensions)
            state.sessions[sessionID] = session
            return id
        }
    }

    /// Gives the place back: the engine refused the stream.
    func cancelStream(sessionID: String, streamID: String) {
        state.withLock { state in
            state.sessions[sessionID]?.pendingStreams[streamID] = nil
        }
    }

    public static let relayedMediaMessage = "relayed sessions carry media between clients, so the router takes no WHIP offer: "
        + "a publisher announces its stream with a JSON body (application/json) and the connectionId of its signalling "
        + "connection, which then answers each subscriber's offer (subscribeOffer)"
    static let captionsNeedRoutedMessage = "captions need a routed session: in a relayed one the router never sees the audio"
    static let routedAnnouncementMessage = "this session is routed: publish with a WHIP offer (application/sdp), not an announcement"
    static let relayedNeedsConnectionMessage = "a relayed stream needs ?connectionId= of its publisher's signalling "
        + "connection: that connection answers the subscribers' offers"

    /// Announces a reserved stream: for a bare WHIP client first its
    /// connection (`connectionCreated` to the others), then `streamCreated`
    /// to everyone. If the engine reported the stream's end before this,
    /// `streamDestroyed` follows at once and the returned release says what
    /// to let go of. Throws when the publisher's connection is gone or there
    /// is no room for a bare client's connection any more.
    func announceStream(sessionID: String, streamID: String, publisher: Publisher, name: String,
                        hasAudio: Bool, hasVideo: Bool, videoType: VideoType,
                        tokenID: String? = nil, publishCaptions: Bool = false,
                        hasAudioTrack: Bool? = nil, hasVideoTrack: Bool? = nil) throws(RegistryError) -> (StreamInfo, MediaRelease?) {
        let created = now()
        let (info, endedEarly) = try state.withLock { (state) throws(RegistryError) -> (StreamInfo, StreamEndReason?) in
            guard var session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            guard let pending = session.pendingStreams.removeValue(forKey: streamID) else { throw .noSuchStream(streamID) }
            state.sessions[sessionID] = session
            let connectionID: String
            switch publisher {
            case .connection(let id):
                guard session.connectionIndex(id) != nil else { throw .noSuchConnection(id) }
                connectionID = id
            case .bareWHIPClient(let role, let data):
                try checkConnectionRoom(session)
                let connection = ConnectionInfo(connectionId: RandomID.make(), data: data, createdAt: created.unixMilliseconds)
                session.broadcast(jsonText(ServerMessage.ConnectionCreated(connection: connection)))
                session.connections.append(ConnectionState(info: connection, role: role, outbox: nil, tokenID: tokenID))
                connectionID = connection.connectionId
            }
            let info = StreamInfo(
                streamId: streamID, connectionId: connectionID, name: name, hasAudio: hasAudio, hasVideo: hasVideo,
                hasCaptions: session.captions != nil && publishCaptions && hasAudio, videoType: videoType,
                width: pending.dimensions?.width ?? 0,
                height: pending.dimensions?.height ?? 0, createdAt: created.unixMilliseconds)
            let ownsConnection = if case .bareWHIPClient = publisher { true } else { false }
            session.streams.append(StreamState(info: info, ownsConnection: ownsConnection, publisherTokenID: tokenID,
                                               publishCaptions: publishCaptions, hasAudioTrack: hasAudioTrack ?? hasAudio,
                                               hasVideoTrack: hasVideoTrack ?? hasVideo))
            session.broadcast(jsonText(ServerMessage.StreamCreated(stream: info)))
            state.sessions[sessionID] = session
            return (info, pending.endedReason)
        }
        if let endedEarly {
            return (info, removeStream(sessionID: sessionID, streamID: streamID, reason: endedEarly))
        }
        return (info, nil)
    }

    /// Ends a stream: `streamDestroyed` to everyone; a bare WHIP client's own
    /// connection goes with it (`connectionDestroyed`). nil when it is
    /// already gone.
    func removeStream(sessionID: String, streamID: String, reason: StreamEndReason) -> MediaRelease? {
        state.withLock { state -> MediaRelease? in
            guard var session = state.sessions[sessionID] else { return nil }
            guard let index = session.streamIndex(streamID) else {
                // Not announced yet: remember the end for `announceStream`.
                if session.pendingStreams[streamID] != nil {
                    session.pendingStreams[streamID]?.endedReason = reason
                    state.sessions[sessionID] = session
                }
                return nil
            }
            let stream = session.streams.remove(at: index)
            for id in stream.subscribers { state.subscribers[id] = nil }
            session.forgetSettings(ofSubscribers: stream.subscribers)
            session.broadcast(jsonText(ServerMessage.StreamDestroyed(streamId: streamID, reason: reason)))
            if stream.ownsConnection, let owner = session.connectionIndex(stream.info.connectionId) {
                let connection = session.connections.remove(at: owner)
                let connectionReason: ConnectionEndReason = reason == .networkDisconnected ? .networkDisconnected
                    : reason == .forceDisconnected || reason == .forceUnpublished ? .forceDisconnected : .clientDisconnected
                session.broadcast(jsonText(ServerMessage.ConnectionDestroyed(
                    connectionId: connection.info.connectionId, reason: connectionReason)))
            }
            state.sessions[sessionID] = session
            guard session.info.mediaMode == .routed else { return MediaRelease() }
            return MediaRelease(streamIDs: [streamID], subscriberIDs: stream.subscribers)
        }
    }

    /// The `jti` of the token that published a stream over WHIP: the one
    /// (besides a moderator) that may end it. The outer nil: no such stream.
    func streamPublisherTokenID(sessionID: String, streamID: String) -> String?? {
        state.withLock { state in
            state.sessions[sessionID].flatMap { s in s.streamIndex(streamID).map { s.streams[$0].publisherTokenID } }
        }
    }

    public func streams(sessionID: String) throws(RegistryError) -> [StreamInfo] {
        try state.withLock { (state) throws(RegistryError) -> [StreamInfo] in
            guard let session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            return session.streams.map(\.info)
        }
    }

    /// `publisherProperty`: only the stream's own connection may change
    /// hasAudio, hasVideo or publishCaptions; each change of a stream
    /// property (hasCaptions follows the other two) is a
    /// `streamPropertyChanged` to everyone. Captions on a stream without an
    /// audio track are refused (MissingAudioTrack; audio that is only turned
    /// off is captioned once it is back on), and so are captions in a
    /// relayed session.
    func setStreamProperties(sessionID: String, streamID: String, requester: String?,
                             hasAudio: Bool?, hasVideo: Bool?, publishCaptions: Bool? = nil) throws(RegistryError) {
        try state.withLock { (state) throws(RegistryError) in
            guard var session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            guard let index = session.streamIndex(streamID) else { throw .noSuchStream(streamID) }
            if let requester, session.streams[index].info.connectionId != requester {
                throw .notAllowed("stream \(streamID) is published by another connection")
            }
            var info = session.streams[index].info
            if publishCaptions == true && session.info.mediaMode == .relayed {
                throw .conflict(Self.captionsNeedRoutedMessage)
            }
            if publishCaptions == true && !session.streams[index].hasAudioTrack {
                throw .conflict(Self.missingAudioTrack(streamID))
            }
            var changes: [ServerMessage.StreamPropertyChanged] = []
            if let hasAudio, hasAudio != info.hasAudio {
                changes.append(.init(streamId: streamID, property: "hasAudio", oldValue: .bool(info.hasAudio), newValue: .bool(hasAudio)))
                info.hasAudio = hasAudio
            }
            if let hasVideo, hasVideo != info.hasVideo {
                changes.append(.init(streamId: streamID, property: "hasVideo", oldValue: .bool(info.hasVideo), newValue: .bool(hasVideo)))
                info.hasVideo = hasVideo
            }
            if let publishCaptions { session.streams[index].publishCaptions = publishCaptions }
            session.streams[index].info = info
            for change in changes { session.broadcast(jsonText(change)) }
            // Each subscriber of the stream hears why its video stopped or came back.
            if changes.contains(where: { $0.property == "hasVideo" }) {
                for subscriber in session.streams[index].subscribers
                where state.subscribers[subscriber]?.videoCodecNotSupported != true {
                    session.broadcast(jsonText(ServerMessage.SubscriberVideo(enabled: info.hasVideo, subscriberId: subscriber,
                                                                             reason: "publishVideo")))
                }
            }
            Self.updateHasCaptions(&session, index: index)
            state.sessions[sessionID] = session
        }
    }

    static func missingAudioTrack(_ streamID: String) -> String {
        "MissingAudioTrack: stream \(streamID) has no audio to caption"
    }

    /// The engine's report of the video size: `streamPropertyChanged`
    /// (videoDimensions) when it changed.
    func setVideoDimensions(sessionID: String, streamID: String, width: Int, height: Int) {
        state.withLock { state in
            guard var session = state.sessions[sessionID] else { return }
            guard let index = session.streamIndex(streamID) else {
                if session.pendingStreams[streamID] != nil {
                    session.pendingStreams[streamID]?.dimensions = (width, height)
                    state.sessions[sessionID] = session
                }
                return
            }
            let info = session.streams[index].info
            guard info.width != width || info.height != height else { return }
            let old = JSONValue.object(["width": .number(Double(info.width)), "height": .number(Double(info.height))])
            let new = JSONValue.object(["width": .number(Double(width)), "height": .number(Double(height))])
            session.streams[index].info.width = width
            session.streams[index].info.height = height
            session.broadcast(jsonText(ServerMessage.StreamPropertyChanged(
                streamId: streamID, property: "videoDimensions", oldValue: old, newValue: new)))
            state.sessions[sessionID] = session
        }
    }

    // MARK: Subscribers

    /// Reserves a place for a subscriber the engine is about to answer.
    func reserveSubscriber(sessionID: String, streamID: String) throws(RegistryError) -> String {
        try state.withLock { (state) throws(RegistryError) -> String in
            guard var session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            guard let index = session.streamIndex(streamID) else { throw .noSuchStream(streamID) }
            let stream = session.streams[index]
            guard stream.subscribers.count + stream.pendingSubscribers.count < limits.maxSubscribersPerStream else {
                throw .limitReached("stream \(streamID) has its maximum of \(limits.maxSubscribersPerStream) subscribers")
            }
            var id = RandomID.make()
            while state.subscribers[id] != nil { id = RandomID.make() }
            session.streams[index].pendingSubscribers.insert(id)
            state.sessions[sessionID] = session
            return id
        }
    }

    /// The engine answered: the subscriber counts from now on. False when
    /// the stream ended meanwhile (the caller lets the engine go of it).
    /// `offeredVideoGotNone`: the subscriber's offer asked for video and the
    /// answer gives it none. Of a stream that has video, that means no codec
    /// in common, which everyone hears as `videoDisabled` with reason
    /// codecNotSupported (OpenTok's): the subscriber gets the audio only.
    /// Said now, as its 201 goes: it may reach a socket before the answer.
    func confirmSubscriber(sessionID: String, streamID: String, subscriberID: String, tokenID: String? = nil,
                           offeredVideoGotNone: Bool = false) -> Bool {
        state.withLock { state -> Bool in
            guard var session = state.sessions[sessionID], let index = session.streamIndex(streamID),
                  session.streams[index].pendingSubscribers.remove(subscriberID) != nil else { return false }
            session.streams[index].subscribers.append(subscriberID)
            let codecNotSupported = offeredVideoGotNone && session.streams[index].hasVideoTrack
            state.subscribers[subscriberID] = (sessionID, streamID, tokenID, false, codecNotSupported)
            if codecNotSupported {
                session.broadcast(jsonText(ServerMessage.SubscriberVideo(enabled: false, subscriberId: subscriberID,
                                                                         reason: "codecNotSupported")))
            }
            state.sessions[sessionID] = session
            return true
        }
    }

    func cancelSubscriber(sessionID: String, streamID: String, subscriberID: String) {
        state.withLock { state in
            guard var session = state.sessions[sessionID], let index = session.streamIndex(streamID) else { return }
            session.streams[index].pendingSubscribers.remove(subscriberID)
            // A relayed publisher may have answered late: it lets go of the peer.
            Self.tellRelayedPublisher(session, stream: index, unsubscribed: subscriberID)
            state.sessions[sessionID] = session
        }
    }

    /// The `jti` of the token that subscribed. The outer nil: no such subscriber of that stream.
    func subscriberTokenID(sessionID: String, streamID: String, subscriberID: String) -> String?? {
        state.withLock { state in
            guard let place = state.subscribers[subscriberID], place.sessionID == sessionID, place.streamID == streamID else { return nil }
            return .some(place.tokenID)
        }
    }

    /// Removes a subscriber; false when there is no such subscriber of that stream.
    func removeSubscriber(sessionID: String, streamID: String, subscriberID: String) -> Bool {
        state.withLock { state -> Bool in
            guard let place = state.subscribers[subscriberID], place.sessionID == sessionID, place.streamID == streamID,
                  var session = state.sessions[sessionID], let index = session.streamIndex(streamID) else { return false }
            session.streams[index].subscribers.removeAll { $0 == subscriberID }
            state.subscribers[subscriberID] = nil
            session.forgetSettings(ofSubscribers: [subscriberID])
            Self.tellRelayedPublisher(session, stream: index, unsubscribed: subscriberID)
            state.sessions[sessionID] = session
            return true
        }
    }

    // MARK: Relayed media

    /// Sends a subscriber's offer to the connection that publishes the
    /// stream (`subscribeOffer`), if the subscriber still waits and the
    /// publisher's socket is there.
    /// `sendingTo` hears the publisher's connection before the offer is queued to it.
    func sendRelayedOffer(sessionID: String, streamID: String, subscriberID: String, sdp: String,
                          sendingTo: (String) -> Void = { _ in }) -> RelayedOffers.Delivery {
        state.withLock { state -> RelayedOffers.Delivery in
            guard let session = state.sessions[sessionID], session.info.mediaMode == .relayed,
                  let index = session.streamIndex(streamID),
                  session.streams[index].pendingSubscribers.contains(subscriberID) else { return .publisherGone }
            let publisher = session.streams[index].info.connectionId
            guard let connection = session.connectionIndex(publisher),
                  let outbox = session.connections[connection].outbox else { return .publisherGone }
            // Its socket broke: the offer would wait in its backlog past the subscriber's patience.
            guard session.connections[connection].away == nil else { return .publisherAway }
            sendingTo(publisher)
            outbox.send(jsonText(ServerMessage.SubscribeOffer(subscriberId: subscriberID, streamId: streamID, sdp: sdp)))
            return .sent(to: publisher)
        }
    }

    /// Whether `connectionID` publishes the stream that `subscriberID` waits
    /// for: only that connection may answer the subscriber's offer.
    func isAwaitingRelayedAnswer(sessionID: String, subscriberID: String, from connectionID: String) -> Bool {
        state.withLock { state in
            guard let session = state.sessions[sessionID], session.info.mediaMode == .relayed else { return false }
            return session.streams.contains {
                $0.info.connectionId == connectionID && $0.pendingSubscribers.contains(subscriberID)
            }
        }
    }

    /// `subscriberLeft`: a relayed stream's publisher says its connection to a
    /// subscriber ended. Only that publisher may say it; nothing is sent back.
    func removeRelayedSubscriber(sessionID: String, subscriberID: String, by connectionID: String) throws(RegistryError) {
        try state.withLock { (state) throws(RegistryError) in
            guard let place = state.subscribers[subscriberID], place.sessionID == sessionID,
                  var session = state.sessions[sessionID], let index = session.streamIndex(place.streamID) else {
                throw .noSuchSubscriber(subscriberID)
            }
            guard session.info.mediaMode == .relayed else {
                throw .conflict("subscriberLeft is for relayed sessions: in a routed one the router sees its subscribers go")
            }
            guard session.streams[index].info.connectionId == connectionID else {
                throw .notAllowed("subscriber \(subscriberID) is another connection's stream's")
            }
            session.streams[index].subscribers.removeAll { $0 == subscriberID }
            state.subscribers[subscriberID] = nil
            session.forgetSettings(ofSubscribers: [subscriberID])
            state.sessions[sessionID] = session
        }
    }

    /// `unsubscribe` to a relayed stream's publisher (nothing in a routed
    /// session, where the media engine lets go of the subscriber).
    private static func tellRelayedPublisher(_ session: SessionState, stream index: Int, unsubscribed subscriberID: String) {
        guard session.info.mediaMode == .relayed else { return }
        let info = session.streams[index].info
        guard let connection = session.connectionIndex(info.connectionId) else { return }
        session.connections[connection].outbox?.send(
            jsonText(ServerMessage.Unsubscribe(subscriberId: subscriberID, streamId: info.streamId)))
    }

    /// `subscriberSettings`: kept per connection, for a subscriber of this session.
    func storeSubscriberSettings(sessionID: String, connectionID: String, subscriberID: String,
                                 settings: SubscriberSettings) throws(RegistryError) {
        try state.withLock { (state) throws(RegistryError) in
            guard let place = state.subscribers[subscriberID], place.sessionID == sessionID else {
                throw .noSuchSubscriber(subscriberID)
            }
            guard var session = state.sessions[sessionID], let index = session.connectionIndex(connectionID) else {
                throw .noSuchConnection(connectionID)
            }
            // Only the client that subscribed (the same token) says what its subscriber wants.
            guard place.tokenID == session.connections[index].tokenID else {
                throw .notAllowed("subscriber \(subscriberID) was made with another token")
            }
            var merged = session.connections[index].subscriberSettings[subscriberID] ?? SubscriberSettings()
            if let v = settings.subscribeToAudio { merged.subscribeToAudio = v }
            if let v = settings.subscribeToVideo { merged.subscribeToVideo = v }
            if let v = settings.subscribeToCaptions { merged.subscribeToCaptions = v }
            if let v = settings.preferredResolution { merged.preferredResolution = v }
            if let v = settings.preferredFrameRate { merged.preferredFrameRate = v }
            session.connections[index].subscriberSettings[subscriberID] = merged
            // Said like the router's other reasons, to every connection (the message names the
            // subscriber), once per real change: a client that joins again says its settings again.
            // A subscriber that decodes none of the stream's codecs has no video to turn on.
            if let video = settings.subscribeToVideo, video == place.videoOff, !place.videoCodecNotSupported {
                state.subscribers[subscriberID]?.videoOff = !video
                session.broadcast(jsonText(ServerMessage.SubscriberVideo(enabled: video, subscriberId: subscriberID,
                                                                         reason: "subscribeToVideo")))
            }
            state.sessions[sessionID] = session
        }
    }

    func subscriberSettings(sessionID: String, connectionID: String, subscriberID: String) -> SubscriberSettings? {
        state.withLock { state in
            state.sessions[sessionID].flatMap { s in
                s.connectionIndex(connectionID).flatMap { s.connections[$0].subscriberSettings[subscriberID] }
            }
        }
    }

    // MARK: Captions

    /// Starts live captions in a routed session. Streams whose publisher
    /// asks for captions and that have audio get hasCaptions (a
    /// `streamPropertyChanged` each). Returns the captions' id.
    func startCaptions(sessionID: String, settings: CaptionsSettings) throws(RegistryError) -> String {
        let started = now()
        return try state.withLock { (state) throws(RegistryError) -> String in
            guard var session = state.sessions[sessionID] else { throw .noSuchSession(sessionID) }
            guard session.info.mediaMode == .routed else {
                throw .conflict(Self.captionsNeedRoutedMessage)
            }
            if let running = session.captions {
                throw .conflict("captions are already started in session \(sessionID) (captionsId \(running.captionsID))")
            }
            var id = RandomID.make()
            while state.captions[id] != nil { id = RandomID.make() }
            session.captions = CaptionsInfo(captionsID: id, settings: settings, startedAt: started)
            for index in session.streams.indices { Self.updateHasCaptions(&session, index: index) }
            state.captions[id] = sessionID
            state.sessions[sessionID] = session
            return id
        }
    }

    /// The session of a running captions id.
    func captionsSession(_ captionsID: String) -> String? {
        state.withLock { $0.captions[captionsID] }
    }

    /// Stops live captions: every captioned stream's hasCaptions goes false.
    /// Returns the session, or nil when no such captions run.
    @discardableResult
    func stopCaptions(captionsID: String) -> String? {
        state.withLock { state -> String? in
            guard let sessionID = state.captions.removeValue(forKey: captionsID),
                  var session = state.sessions[sessionID] else { return nil }
            session.captions = nil
            for index in session.streams.indices { Self.updateHasCaptions(&session, index: index) }
            state.sessions[sessionID] = session
            return sessionID
        }
    }

    /// The session's captions, while started.
    public func captions(sessionID: String) -> CaptionsInfo? {
        state.withLock { $0.sessions[sessionID]?.captions }
    }

    /// Which of a session's streams are captioned now, and whether their
    /// captions send partials: what the media engine should be doing.
    func captionedStreams(sessionID: String) -> (streamIDs: Set<String>, partials: Bool) {
        state.withLock { state in
            guard let session = state.sessions[sessionID], let captions = session.captions else { return ([], true) }
            return (Set(session.streams.filter(\.info.hasCaptions).map(\.info.streamId)), captions.settings.partialCaptions)
        }
    }

    /// A caption of a stream, to every connection with a subscriber of that
    /// stream that asked for captions (subscribeToCaptions). Returns how many got it.
    @discardableResult
    func deliverCaption(sessionID: String, streamID: String, text: String, isFinal: Bool) -> Int {
        state.withLock { state -> Int in
            guard let session = state.sessions[sessionID],
                  session.streams.contains(where: { $0.info.streamId == streamID && $0.info.hasCaptions }) else { return 0 }
            let message = jsonText(ServerMessage.Caption(streamId: streamID, text: text, isFinal: isFinal))
            var sent = 0
            for connection in session.connections {
                guard let outbox = connection.outbox else { continue }
                let wants = connection.subscriberSettings.contains { id, settings in
                    settings.subscribeToCaptions == true && state.subscribers[id]?.streamID == streamID
                }
                if wants {
                    outbox.send(message)
                    sent += 1
                }
            }
            return sent
        }
    }

    /// hasCaptions is: captions started, the publisher asks, the stream has
    /// audio. A change is a `streamPropertyChanged` to everyone.
    private static func updateHasCaptions(_ session: inout SessionState, index: Int) {
        let stream = session.streams[index]
        let captioned = session.captions != nil && stream.publishCaptions && stream.info.hasAudio
        guard captioned != stream.info.hasCaptions else { return }
        session.streams[index].info.hasCaptions = captioned
        session.broadcast(jsonText(ServerMessage.StreamPropertyChanged(
            streamId: stream.info.streamId, property: "hasCaptions", oldValue: .bool(!captioned), newValue: .bool(captioned))))
    }
}
