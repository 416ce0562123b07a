/// How the router's media side runs: its connections to publishers (WHIP in)
/// and to subscribers (WHEP out).
public struct RouterMediaSettings: Sendable {
    /// Offer loopback addresses as ICE candidates (peers on the same machine).
    public var includeLoopbackCandidates = false
    /// A connection that is not up within this many seconds is given up.
    public var connectTimeout = 20.0
    /// A publisher whose consent checks stop for this long is gone (its
    /// stream is destroyed with reason networkDisconnected).
    public var publisherConsentTimeout = 15.0
    /// The same for a subscriber.
    public var subscriberConsentTimeout = 30.0
    /// Subscribers one stream may have; the next gets `tooManySubscribers`.
    public var maxSubscribersPerStream = 100
    /// The most the router asks a publisher for (REMB), bits per second.
    public var videoBitrateCeiling = 2_500_000

    public init() {}
}

/// What happens to a routed stream after it was published.
public enum RoutedStreamEvent: Sendable, Hashable {
    /// The publisher's connection ended: `clientDisconnected` (it closed DTLS
    /// or said BYE) or `networkDisconnected` (ICE failed, consent expired).
    case ended(reason: String)
    /// The size a keyframe announced (VP8), first and whenever it changes.
    case videoDimensions(width: Int, height: Int)
}

/// The router's answer to a publisher, and what it will forward.
public struct RoutedPublication: Sendable {
    public var answer: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    /// "VP8" or "H264"; nil without video.
    public var videoCodec: String?
}

/// Why the router could not take a publisher or a subscriber.
public enum RoutingError: Error, Hashable, Sendable, CustomStringConvertible {
    case badOffer(String)
    case noCommonCodec(String)
    case noSuchStream(String)
    case streamExists(String)
    case tooManySubscribers(Int)
    case connection(ConnectionError)

    public var description: String {
        switch self {
        case .badOffer(let r): "unusable offer: \(r)"
        case .noCommonCodec(let r): "no codec in common: \(r)"
        case .noSuchStream(let id): "no stream \(id)"
        case .streamExists(let id): "stream \(id) exists already"
        case .tooManySubscribers(let n): "the stream already has \(n) subscribers (the limit)"
        case .connection(let e): e.description
        }
    }
}

/// What the router forwarded, over every stream it has had (counters only grow).
public struct RoutingCounters: Sendable, Hashable {
    /// RTP packets received from publishers.
    public var packetsReceived: UInt64 = 0
    /// Packets queued to subscribers (one received packet counts once per subscriber).
    public var packetsForwarded: UInt64 = 0
    public var bytesForwarded: UInt64 = 0
    /// Received packets no subscriber got (incomplete frames, frames before a keyframe, unreadable).
    public var packetsDropped: UInt64 = 0
    /// Publisher packets found missing and asked for again (NACK), and those of them that came.
    public var packetsNacked: UInt64 = 0
    public var packetsRecovered: UInt64 = 0

    public init() {}

    static func + (a: RoutingCounters, b: RoutingCounters) -> RoutingCounters {
        var sum = RoutingCounters()
        sum.packetsReceived = a.packetsReceived + b.packetsReceived
        sum.packetsForwarded = a.packetsForwarded + b.packetsForwarded
        sum.bytesForwarded = a.bytesForwarded + b.bytesForwarded
        sum.packetsDropped = a.packetsDropped + b.packetsDropped
        sum.packetsNacked = a.packetsNacked + b.packetsNacked
        sum.packetsRecovered = a.packetsRecovered + b.packetsRecovered
        return sum
    }
}

/// Something that takes a stream's encoded audio besides its subscribers
/// (captions): each Opus payload, on the router's receive thread for a
/// routed stream, on the audio encoder's thread for a publisher's own
/// (`Publisher.setAudioTap`). It must copy what it keeps and never block.
public protocol EncodedAudioTap: AnyObject, Sendable {
    func received(opusPayload: UnsafeRawBufferPointer)
}
