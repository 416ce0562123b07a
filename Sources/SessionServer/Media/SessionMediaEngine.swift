/// What the router asks of the media layer for routed sessions. The router
/// only signals: it hands WHIP and WHEP offers to the engine and announces
/// what the engine reports. The command line passes the engine in; the
/// router never reaches for a concrete one.

/// A publisher's stream as the engine accepted it: the SDP answer and what it carries.
public struct PublishedMedia: Sendable {
    public var answer: String
    public var hasAudio: Bool
    public var hasVideo: Bool

    public init(answer: String, hasAudio: Bool, hasVideo: Bool) {
        self.answer = answer
        self.hasAudio = hasAudio
        self.hasVideo = hasVideo
    }
}

/// What happens to a published stream after it was answered.
public enum MediaEvent: Sendable {
    /// The stream is over; `reason` is "mediaStopped" or "networkDisconnected".
    case ended(reason: String)
    /// The publisher's video size is known or changed.
    case videoDimensions(width: Int, height: Int)
}

/// Why the engine refused an offer.
public enum MediaEngineError: Error, Sendable {
    /// The offer cannot be used (not SDP, no media section, no ICE or DTLS details).
    case badOffer(String)
    /// The offer has no codec the engine can forward.
    case noCommonCodec(String)
    /// The engine cannot take the stream now (not running, out of ports, not wired yet).
    case unavailable(String)
}

/// Totals since the engine started, for /metrics.
public struct ForwardingCounters: Sendable {
    public var packetsForwarded: UInt64
    public var bytesForwarded: UInt64
    public var packetsDropped: UInt64
    /// Publisher packets the engine found missing and asked for again (NACK), and those that came.
    public var packetsNacked: UInt64
    public var packetsRecovered: UInt64

    public init(packetsForwarded: UInt64 = 0, bytesForwarded: UInt64 = 0, packetsDropped: UInt64 = 0,
                packetsNacked: UInt64 = 0, packetsRecovered: UInt64 = 0) {
        self.packetsForwarded = packetsForwarded
        self.bytesForwarded = bytesForwarded
        self.packetsDropped = packetsDropped
        self.packetsNacked = packetsNacked
        self.packetsRecovered = packetsRecovered
    }
}

/// The routed media of every session: publishers in over WHIP, subscribers
/// out over WHEP, RTP forwarded without decoding.
public protocol SessionMediaEngine: Sendable {
    /// Answers a WHIP offer: a new routed stream; events arrive on any thread.
    func publish(streamID: String, offer: String, events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia
    func unpublish(streamID: String)
    /// Answers a WHEP offer for one subscriber of a routed stream.
    func subscribe(streamID: String, subscriberID: String, offer: String, ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String
    func unsubscribe(subscriberID: String)
    /// What one subscriber is sent from now on (its subscribeToAudio/Video).
    func setSubscriberMedia(subscriberID: String, audio: Bool, video: Bool)
    /// One subscriber's preferredFrameRate (nil: every frame).
    func setSubscriberFrameRate(subscriberID: String, _ rate: Double?)
    /// One subscriber's preferredResolution (nil: the largest simulcast layer).
    func setSubscriberResolution(subscriberID: String, _ size: (width: Int, height: Int)?)
    /// Audio fallback for a stream's subscribers (on unless its publisher says no).
    func setAudioFallback(streamID: String, enabled: Bool)
    /// Where audio fallback's steps go: subscriber id and the message type
    /// (videoDisableWarning, videoDisableWarningLifted, videoDisabled, videoEnabled).
    func onSubscriberVideoQuality(_ handler: @escaping @Sendable (_ subscriberID: String, _ messageType: String) -> Void)
    var counters: ForwardingCounters { get }

    /// Why captions cannot run here (no speech engine installed), or nil when they can.
    var captionsUnavailable: String? { get }
    /// Makes `streamIDs` exactly the captioned streams of this session's
    /// set `candidates` (start the new ones, stop the rest); captions arrive
    /// on any thread, in order per stream. Returns the streams that could
    /// not start, with why.
    func setCaptionedStreams(_ streamIDs: Set<String>, among candidates: Set<String>, partials: Bool,
                             onCaption: @escaping @Sendable (_ streamID: String, _ text: String, _ isFinal: Bool) -> Void) -> [String: String]
    var captionCounters: CaptionTotals { get }
}

/// Live captions' totals since the engine started, for /metrics.
public struct CaptionTotals: Sendable, Equatable {
    /// Streams captioned now.
    public var captionedStreams: Int
    public var partials: UInt64
    public var finals: UInt64
    public var audioSeconds: Double
    public var engineSeconds: Double
    /// Audio packets a captioner had no room for (it fell that far behind).
    public var packetsDropped: UInt64
    /// Finals recognised early, at a pause's start, that speech coming back voided:
    /// recognition spent for nothing.
    public var earlyFinalsDiscarded: UInt64

    public init(captionedStreams: Int = 0, partials: UInt64 = 0, finals: UInt64 = 0, audioSeconds: Double = 0,
                engineSeconds: Double = 0, packetsDropped: UInt64 = 0, earlyFinalsDiscarded: UInt64 = 0) {
        self.captionedStreams = captionedStreams
        self.partials = partials
        self.finals = finals
        self.audioSeconds = audioSeconds
        self.engineSeconds = engineSeconds
        self.packetsDropped = packetsDropped
        self.earlyFinalsDiscarded = earlyFinalsDiscarded
    }
}

extension SessionMediaEngine {
    /// Engines that cannot choose per subscriber send everything.
    public func setSubscriberMedia(subscriberID: String, audio: Bool, video: Bool) {}
    public func setSubscriberFrameRate(subscriberID: String, _ rate: Double?) {}
    public func setSubscriberResolution(subscriberID: String, _ size: (width: Int, height: Int)?) {}
    public func setAudioFallback(streamID: String, enabled: Bool) {}
    public func onSubscriberVideoQuality(_ handler: @escaping @Sendable (_ subscriberID: String, _ messageType: String) -> Void) {}
    /// Engines without a speech engine.
    public var captionsUnavailable: String? { "this media engine does not caption" }
    public func setCaptionedStreams(_ streamIDs: Set<String>, among candidates: Set<String>, partials: Bool,
                                    onCaption: @escaping @Sendable (String, String, Bool) -> Void) -> [String: String] {
        Dictionary(uniqueKeysWithValues: streamIDs.map { ($0, "this media engine does not caption") })
    }
    public var captionCounters: CaptionTotals { CaptionTotals() }
}
