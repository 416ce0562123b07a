import FoundationEssentials

/// How a session's media travels (DESIGN.md "Sessions").
public enum MediaMode: String, Sendable, Codable, CaseIterable {
    /// Through the router, which forwards RTP without decoding.
    case routed
    /// Between the clients; the router only signals.
    case relayed
}

public struct SessionInfo: Sendable, Equatable {
    public var sessionID: String
    public var mediaMode: MediaMode
    public var createdAt: Date
}

/// A connection object as the contract shows it to clients.
public struct ConnectionInfo: Sendable, Equatable, Codable {
    public var connectionId: String
    /// The token's `connection_data`.
    public var data: String
    /// Milliseconds since the Unix epoch.
    public var createdAt: Int64
}

/// A stream's kind of picture.
public enum VideoType: String, Sendable, Codable, CaseIterable {
    case camera, screen, custom
}

/// A stream object as the contract shows it to clients.
public struct StreamInfo: Sendable, Equatable, Codable {
    public var streamId: String
    /// The connection that publishes it.
    public var connectionId: String
    public var name: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    public var hasCaptions: Bool
    public var videoType: VideoType
    /// The video size; 0 until the media engine reports it.
    public var width: Int
    public var height: Int
    /// Milliseconds since the Unix epoch.
    public var createdAt: Int64
}

/// Why a connection left, as `connectionDestroyed` says it.
public enum ConnectionEndReason: String, Sendable, Codable {
    case clientDisconnected, forceDisconnected, networkDisconnected

    /// What its streams' `streamDestroyed` says when the connection takes them along.
    var streamReason: StreamEndReason {
        switch self {
        case .clientDisconnected: .clientDisconnected
        case .forceDisconnected: .forceDisconnected
        case .networkDisconnected: .networkDisconnected
        }
    }
}

/// Why a stream ended, as `streamDestroyed` says it.
public enum StreamEndReason: String, Sendable, Codable {
    case clientDisconnected, forceDisconnected, forceUnpublished, mediaStopped, networkDisconnected
}

/// A subscriber's wishes (`subscriberSettings`): stored and checked;
/// subscribeToAudio/Video decide what the media engine sends it.
public struct SubscriberSettings: Sendable, Equatable {
    public var subscribeToAudio: Bool?
    public var subscribeToVideo: Bool?
    public var subscribeToCaptions: Bool?
    public var preferredResolution: (width: Int, height: Int)?
    public var preferredFrameRate: Double?

    public init(subscribeToAudio: Bool? = nil, subscribeToVideo: Bool? = nil, subscribeToCaptions: Bool? = nil,
                preferredResolution: (width: Int, height: Int)? = nil, preferredFrameRate: Double? = nil) {
        self.subscribeToAudio = subscribeToAudio
        self.subscribeToVideo = subscribeToVideo
        self.subscribeToCaptions = subscribeToCaptions
        self.preferredResolution = preferredResolution
        self.preferredFrameRate = preferredFrameRate
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.subscribeToAudio == b.subscribeToAudio && a.subscribeToVideo == b.subscribeToVideo
            && a.subscribeToCaptions == b.subscribeToCaptions && a.preferredFrameRate == b.preferredFrameRate
            && a.preferredResolution?.width == b.preferredResolution?.width
            && a.preferredResolution?.height == b.preferredResolution?.height
    }
}

/// How much the router holds at most; past a limit a request gets 503.
public struct RegistryLimits: Sendable, Equatable {
    public var maxSessions: Int
    public var maxConnectionsPerSession: Int
    public var maxStreamsPerSession: Int
    public var maxSubscribersPerStream: Int
    /// A session with no connection (and so no stream) for this long is removed,
    /// so sessions made and left do not fill `maxSessions` for good; nil keeps them.
    public var sessionIdleTimeout: Duration?
    /// How long a signalling connection whose socket broke (no close frame)
    /// is kept, with its streams, for its client to come back to it
    /// (`?connectionId=` on the connect URL, OpenTok's session reconnection);
    /// nil ends it at once.
    public var rejoinGrace: Duration?

    public init(maxSessions: Int = 100, maxConnectionsPerSession: Int = 100,
                maxStreamsPerSession: Int = 20, maxSubscribersPerStream: Int = 100,
                sessionIdleTimeout: Duration? = .seconds(24 * 3600), rejoinGrace: Duration? = .seconds(10)) {
        self.maxSessions = maxSessions
        self.maxConnectionsPerSession = maxConnectionsPerSession
        self.maxStreamsPerSession = maxStreamsPerSession
        self.maxSubscribersPerStream = maxSubscribersPerStream
        self.sessionIdleTimeout = sessionIdleTimeout
        self.rejoinGrace = rejoinGrace
    }
}

/// How many of each the router holds now (for /metrics).
public struct RegistryCounts: Sendable, Equatable {
    public var sessions: Int
    public var connections: Int
    public var streams: Int
    public var subscribers: Int
}

/// Why the registry refused; each case maps to one HTTP status (and to the
/// `code` of a signalling `error` message).
public enum RegistryError: Error, Equatable, Sendable, CustomStringConvertible {
    case noSuchSession(String)
    case noSuchConnection(String)
    case noSuchStream(String)
    case noSuchSubscriber(String)
    /// A limit is reached: 503.
    case limitReached(String)
    /// The caller may not do this to that object (another connection's stream): 403.
    case notAllowed(String)
    /// The request contradicts the object's state (relayed media): 409.
    case conflict(String)

    public var status: Int {
        switch self {
        case .noSuchSession, .noSuchConnection, .noSuchStream, .noSuchSubscriber: 404
        case .limitReached: 503
        case .notAllowed: 403
        case .conflict: 409
        }
    }

    public var description: String {
        switch self {
        case .noSuchSession(let id): "no session \(id.prefix(128))"
        case .noSuchConnection(let id): "no connection \(id.prefix(128)) in this session"
        case .noSuchStream(let id): "no stream \(id.prefix(128)) in this session"
        case .noSuchSubscriber(let id): "no subscriber \(id.prefix(128)) in this session"
        case .limitReached(let what): what
        case .notAllowed(let why): why
        case .conflict(let why): why
        }
    }
}

extension Date {
    /// Milliseconds since the Unix epoch, as the contract's `createdAt` fields carry them.
    var unixMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// How a session's live captions run (the REST start's body).
public struct CaptionsSettings: Sendable, Equatable {
    /// Only "en-US": the engine is Whisper's English model.
    public var languageCode: String
    /// Partials (isFinal false) as well as finals.
    public var partialCaptions: Bool
    /// Seconds after which captions stop by themselves.
    public var maxDuration: Int

    public static let languageCodes: Set<String> = ["en-US"]
    public static let durations = 300...14_400

    public init(languageCode: String = "en-US", partialCaptions: Bool = true, maxDuration: Int = 14_400) {
        self.languageCode = languageCode
        self.partialCaptions = partialCaptions
        self.maxDuration = maxDuration
    }
}

/// A session's running captions.
public struct CaptionsInfo: Sendable, Equatable {
    public var captionsID: String
    public var settings: CaptionsSettings
    public var startedAt: Date
}
