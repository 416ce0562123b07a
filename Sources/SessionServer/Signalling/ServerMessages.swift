/// The messages the router sends on the signalling WebSocket, with the
/// contract's names and fields (DESIGN.md "Sessions"). Each is JSON with a
/// `type`; the registry encodes an event once and queues the same text for
/// every connection it concerns.
enum ServerMessage {
    struct Connected: Encodable {
        var type = "connected"
        var connectionId: String
        var capabilities: Capabilities
        var mediaMode: MediaMode
        /// The session's other connections at the moment of joining.
        var connections: [ConnectionInfo]
        var streams: [StreamInfo]
        /// This connection as the others see it (`data`, `createdAt`): beyond
        /// the contract's fields, so a client knows its own.
        var connection: ConnectionInfo
        /// The secret a client shows, with `?connectionId=`, to come back to
        /// this connection after its socket broke (beyond the contract; only
        /// this client is told it: connection ids are everyone's to see).
        var rejoinKey: String?
    }

    struct ConnectionCreated: Encodable {
        var type = "connectionCreated"
        var connection: ConnectionInfo
    }

    struct ConnectionDestroyed: Encodable {
        var type = "connectionDestroyed"
        var connectionId: String
        var reason: ConnectionEndReason
    }

    struct StreamCreated: Encodable {
        var type = "streamCreated"
        var stream: StreamInfo
    }

    struct StreamDestroyed: Encodable {
        var type = "streamDestroyed"
        var streamId: String
        var reason: StreamEndReason
    }

    struct StreamPropertyChanged: Encodable {
        var type = "streamPropertyChanged"
        var streamId: String
        /// hasAudio, hasVideo, hasCaptions or videoDimensions.
        var property: String
        var oldValue: JSONValue
        var newValue: JSONValue
    }

    struct Signal: Encodable {
        var type = "signal"
        /// The sender's own label for the signal (`signalType` in the client's message), when it gave one.
        var signalType: String?
        var data: JSONValue
        /// The sending connection.
        var from: String
    }

    struct Error: Encodable {
        var type = "error"
        /// An HTTP status code saying what kind of failure: 400 bad message, 403, 404, 413 too large, 503.
        var code: Int
        var message: String
    }

    /// `videoDisabled`/`videoEnabled` (and audio fallback's warnings) for one subscriber.
    struct SubscriberVideo: Encodable {
        var type: String
        var subscriberId: String
        var reason: String
    }

    /// Live caption text of a stream, to the connections subscribed to its captions.
    struct Caption: Encodable {
        var type = "caption"
        var streamId: String
        var text: String
        var isFinal: Bool
    }

    /// Relayed sessions: a subscriber's WHEP offer, to the connection that
    /// publishes the stream, which answers with `subscribeAnswer` (or refuses
    /// with `subscribeError`) and then carries the media itself.
    struct SubscribeOffer: Encodable {
        var type = "subscribeOffer"
        var subscriberId: String
        var streamId: String
        var sdp: String
    }

    /// Relayed sessions: a subscriber left (WHEP DELETE, or its offer was
    /// given up): its publisher lets go of that peer.
    struct Unsubscribe: Encodable {
        var type = "unsubscribe"
        var subscriberId: String
        var streamId: String
    }

    struct Pong: Encodable {
        var type = "pong"
    }
}

extension ServerMessage.SubscriberVideo {
    /// `videoEnabled` or `videoDisabled` for one subscriber, with its reason.
    init(enabled: Bool, subscriberId: String, reason: String) {
        self.init(type: enabled ? "videoEnabled" : "videoDisabled", subscriberId: subscriberId, reason: reason)
    }
}
