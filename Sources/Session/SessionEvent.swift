import Publisher
import WHIP

/// What a session's role lets this connection do (the `connected` message's `capabilities`).
public struct SessionCapabilities: Sendable, Codable, Equatable {
    public var publish: Bool
    public var subscribe: Bool
    public var forceDisconnect: Bool
    public var captions: Bool
}

/// What the router says on a session's signalling WebSocket, in order
/// (DESIGN.md "Sessions": the message names are the contract's).
public enum SessionEvent: Sendable, Equatable {
    case connected(connectionId: String, capabilities: SessionCapabilities, streams: [SessionStream])
    case connectionCreated(SessionConnection)
    case connectionDestroyed(connectionId: String, reason: String)
    case streamCreated(SessionStream)
    case streamDestroyed(streamId: String, reason: String)
    /// `property`: hasAudio, hasVideo, hasCaptions or videoDimensions; values as JSON text.
    case streamPropertyChanged(streamId: String, property: String, oldValue: String, newValue: String)
    case signal(type: String?, data: String, from: String)
    case caption(streamId: String, text: String, isFinal: Bool)
    case videoDisabled(subscriberId: String, reason: String)
    case videoEnabled(subscriberId: String, reason: String)
    /// Audio fallback's warning, before video is stopped for heavy loss (and its lifting).
    case videoDisableWarning(subscriberId: String)
    case videoDisableWarningLifted(subscriberId: String)
    case error(code: Int?, message: String)
    /// Relayed sessions, to the connection that publishes `streamId`: a
    /// subscriber's offer, to answer with `answerOffer` (or `refuseOffer`).
    case subscribeOffer(subscriberId: String, streamId: String, sdp: String)
    /// Relayed sessions: that subscriber left; its publisher lets go of it.
    case unsubscribe(subscriberId: String, streamId: String)
    /// The WebSocket was lost (not a forced disconnect) and the session, given a
    /// rejoin window, is joining again (OpenTok's sessionDidBeginReconnecting).
    /// Meanwhile nothing can be sent.
    case reconnecting(reason: String)
    /// Joined again (OpenTok's sessionDidReconnect). `sameConnection`: the
    /// router had kept this client's connection (its rejoin grace), so its
    /// streams went on under their ids; `streams` are the ones this client
    /// knew, and what changed meanwhile follows as the usual events.
    /// Otherwise, with the session's streams now, a new connection:
    /// this client's streams are published again under new ids (the router
    /// ended the old ones with the old connection).
    case reconnected(connectionId: String, streams: [SessionStream], sameConnection: Bool)
    /// The WebSocket ended (the router closed it, the network went and no
    /// rejoin came in time, or `disconnect`: then the reason is
    /// `SessionEvent.ownDisconnectReason`).
    case disconnected(reason: String)

    /// The reason `disconnected` gives when this client called `disconnect`.
    public static let ownDisconnectReason = "disconnected"

    /// The reason of a `streamDestroyed` or `connectionDestroyed` this client
    /// made itself on a rejoin, for one whose own event was lost while the
    /// signalling was down.
    public static let missedReason = "endedWhileReconnecting"
}

/// How a session's media travels: through the router, or between the clients
/// (the router passes subscribers' offers to the publishing client).
public enum SessionMediaMode: String, Sendable, Codable {
    case routed, relayed
}

/// Why a session could not be joined or used.
public enum SessionError: Error, Sendable, CustomStringConvertible {
    /// The WebSocket could not be opened or was refused (401/403: the token; 404: no such session).
    case signalling(WHIPError)
    /// The router said something this client cannot read.
    case protocolError(String)
    /// No `connected` message within the timeout.
    case timedOut(seconds: Double)
    /// The session is not connected (never, or any more).
    case notConnected
    /// A moderator disconnected this client (found on joining again: it was away when it happened).
    case forceDisconnected
    /// The router's REST API said no: its status and message.
    case refused(status: Int, message: String)
    /// The publisher could not start: its devices, or its media to the router.
    case publisher(PublisherError)
    /// `publish` was given a publisher this session cannot publish (routed: one not made by `makePublisher`).
    case unusablePublisher(String)

    public var description: String {
        switch self {
        case .signalling(let e): e.description.hasPrefix("WHIP: ") ? "signalling: " + e.description.dropFirst(6) : e.description
        case .protocolError(let why): "the router's signalling: \(why)"
        case .timedOut(let s): "the router did not confirm the session within \(Int(s)) s"
        case .notConnected: "the session is not connected"
        case .forceDisconnected: "a moderator disconnected this client (forceDisconnected)"
        case .refused(let status, let message): "the router refused (\(status)): \(message)"
        case .publisher(let e): e.description
        case .unusablePublisher(let why): why
        }
    }
}
