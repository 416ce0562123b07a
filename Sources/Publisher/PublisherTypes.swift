import Encoders
import MediaTypes
import Networking
import SDP

public enum VideoCodec: String, Sendable, Codable, CaseIterable {
    case vp8, h264

    var description: CodecDescription { self == .vp8 ? .vp8 : .h264 }
}

/// What to publish and how, in the shape of OpenTok's publisher settings.
public struct PublisherSettings: Sendable {
    /// The stream's name (the SDP msid stream id).
    public var name = "camagent"
    public var audioTrack = true
    public var videoTrack = true
    /// Video codecs to offer, preferred first; the server's answer chooses.
    public var codecPreference: [VideoCodec] = [.vp8, .h264]
    /// Video bitrate ceiling, bits per second (REMB and loss move below it).
    public var videoBitrate = 1_000_000
    public var audioBitrate = 32_000
    /// Offer loopback addresses as ICE candidates too (tests on one host).
    public var includeLoopbackCandidates = false
    /// "host:port" of a STUN server for a server-reflexive candidate.
    public var stunServer: TransportAddress?
    /// Seconds for ICE and DTLS to come up once the answer is in.
    public var connectTimeout = 20.0
    /// Reconnect (with backoff) when an established session drops.
    public var reconnect = true
    public var maxReconnectDelay = 10.0
    /// Viewers served at once by the embedded WHEP side; more get an error.
    public var maxViewers = 16
    /// Audio fallback: stop sending video to a viewer whose receiver reports
    /// show heavy loss, and send it again when the loss clears (routed subscribers).
    public var audioFallback = false
    /// A viewer whose ICE consent checks stop for this long is dropped (RFC 7675: 30 s).
    public var viewerConsentTimeout = 30.0
    /// Offer the urn:3gpp:video-orientation RTP header extension (CVO) to
    /// the WHIP server and accept it from viewers, so a rotation travels as
    /// metadata; peers without it get pixels turned before encoding.
    public var offerVideoOrientation = true
    /// VP8 in two temporal layers (every other frame may be left out), so a
    /// router or this publisher's session can send a subscriber that asked
    /// for a lower frame rate (preferredFrameRate) half the frames; 1: one layer.
    public var videoTemporalLayers = 2
    /// Simulcast: each frame is also encoded at half its width and height
    /// and sent to the WHIP server on an SSRC of its own (an
    /// `a=ssrc-group:SIM` in the offer), so a router can send a subscriber
    /// that prefers a smaller picture (preferredResolution) the small one.
    /// Costs a second encode: 1.4-1.6 times the CPU of one layer at 720p
    /// (BENCHMARKS.md). Viewers of this publisher itself get the captured size.
    public var simulcast = false
    /// OpenTok's publishCaptions from the start (`Publisher.publishCaptions`;
    /// a publisher without audio refuses it: `missingAudioTrack`).
    public var publishCaptions = false

    /// The small simulcast layer's size for a captured `size`: half each
    /// side, rounded down to even (4:2:0 chroma), at least 2x2.
    public static func simulcastSmallSize(of size: FrameSize) -> FrameSize {
        FrameSize(width: max(2, size.width / 4 * 2), height: max(2, size.height / 4 * 2))
    }

    public init() {}
}

/// Where the publisher is. Without a WHIP server it is `serving` once
/// capture runs: viewers come and go without changing it.
public enum PublisherState: String, Sendable, Codable {
    case idle, serving, connecting, connected, reconnecting, closed, failed
}

public enum PublisherError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The signalling server (WHIP, a session router) failed or refused.
    case signaling(SignalingError)
    /// The server's answer cannot be used.
    case badAnswer(String)
    /// ICE, DTLS or SRTP did not come up, or the peer went away.
    case connection(ConnectionError)
    case video(CaptureError)
    case audio(AudioError)
    case encoder(CodecError)
    case nothingToPublish
    /// OpenTok's MissingAudioTrack: captions are recognised from the stream's
    /// audio, and this publisher has none.
    case missingAudioTrack
    /// `unpublish()` was called while `publish()` was still connecting: nothing failed.
    case unpublished

    public var description: String {
        switch self {
        case .signaling(let e): e.description
        case .badAnswer(let r): "the server's SDP answer is unusable: \(r)"
        case .connection(let e): e.description
        case .video(let e): e.description
        case .audio(let e): e.description
        case .encoder(let e): e.description
        case .nothingToPublish: "neither audio nor video to publish"
        case .missingAudioTrack: "MissingAudioTrack: publishCaptions needs audio to recognise, and this publisher has none"
        case .unpublished: "unpublished before the first connection was made"
        }
    }
}

/// What the publisher tells its owner, on the publisher's own threads.
public enum PublisherEvent: Sendable {
    case stateChanged(PublisherState)
    /// The server took the stream (WHIP resource URL), media is flowing.
    case streamCreated(resource: String, codec: String, selectedPair: String?)
    /// The stream ended (stopped, or dropped: the reason says which).
    case streamDestroyed(reason: String)
    /// A failure: before the first connection it ends `publish()`; later
    /// ones are followed by a reconnect when settings allow.
    case failed(PublisherError)
    /// A viewer's connection came up (ICE and DTLS).
    case viewerJoined(id: String, codec: String, selectedPair: String?)
    /// A viewer left: its DELETE, its BYE, consent expiry or a failed connection.
    case viewerLeft(id: String, reason: String)
    /// A capture device went away; its capturer waits for it, and every
    /// session and viewer stays connected meanwhile.
    case deviceLost(kind: MediaKind, reason: String)
    /// The device is back (or another one took its place); frames resume with a keyframe.
    case deviceRestored(kind: MediaKind, description: String)
    /// Audio fallback for one viewer (routed subscribers): heavy loss warned
    /// of, video stopped for it, video back once the loss cleared.
    case viewerVideoQuality(id: String, change: VideoQualityChange)
    /// The size of the pictures sent, on the encoder thread: first when the
    /// encoder is made, then each time it changes (a camera back in another
    /// mode, another camera). A session reports it as the stream's videoDimensions.
    case videoDimensions(width: Int, height: Int)
    /// `publishAudio` or `publishVideo` changed (said by whichever thread set
    /// it): a session tells the router, whose subscribers hear why video went
    /// (videoDisabled, reason publishVideo).
    case publishing(kind: MediaKind, on: Bool)
    /// `publishCaptions` changed: a session tells the router (the stream's
    /// hasCaptions follows while the session's captions run).
    case publishingCaptions(on: Bool)
}

/// The steps of audio fallback, as OpenTok names its events.
public enum VideoQualityChange: String, Sendable {
    case warning = "videoDisableWarning"
    case warningLifted = "videoDisableWarningLifted"
    case disabled = "videoDisabled"
    case enabled = "videoEnabled"
}

/// Why the embedded server cannot take a viewer.
public enum ViewerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The offer is not SDP, or lacks what an answer needs.
    case badOffer(String)
    /// The viewer cannot receive what is being sent.
    case noCommonCodec(String)
    case tooManyViewers(Int)
    /// No socket or interface for the viewer's connection.
    case connection(ConnectionError)
    /// The publisher is not running.
    case notPublishing

    public var description: String {
        switch self {
        case .badOffer(let r): "unusable WHEP offer: \(r)"
        case .noCommonCodec(let r): "no codec in common: \(r)"
        case .tooManyViewers(let n): "already serving \(n) viewers (the limit)"
        case .connection(let e): e.description
        case .notPublishing: "the publisher is not running"
        }
    }
}

/// Network stats of one stream (OpenTok's audio/video network stats, plus
/// what the receiver reported).
public struct StreamStats: Sendable, Codable, Hashable {
    public var kind: MediaKind
    public var codec: String
    public var ssrc: UInt32
    public var framesEncoded: UInt64
    public var keyframesEncoded: UInt64
    public var packetsSent: UInt64
    public var bytesSent: UInt64
    public var packetsRetransmitted: UInt64
    /// Bits per second over the interval since the previous stats call.
    public var bitrate: Double
    public var frameRate: Double
    public var targetBitrate: Int?
    public var packetsLost: Int64
    public var fractionLost: Double
    public var jitter: Double
    /// Seconds; nil until a receiver report carried one.
    public var rtt: Double?
    public var nackReceived: UInt64
    public var pliReceived: UInt64
    public var firReceived: UInt64
}

/// One viewer of the embedded server.
public struct ViewerStats: Sendable, Codable, Hashable {
    public var id: String
    /// connecting or connected.
    public var state: String
    public var selectedPair: String?
    public var video: StreamStats?
    public var audio: StreamStats?
    /// Seconds since the viewer's offer arrived.
    public var age: Double
}

public struct PublisherStats: Sendable, Codable, Hashable {
    public var state: PublisherState
    /// The WHIP session's streams (nil without a WHIP server).
    public var video: StreamStats?
    public var audio: StreamStats?
    public var selectedPair: String?
    public var packetsDroppedByPacer: UInt64
    /// WHIP sessions established so far.
    public var connections: Int
    /// Video frames encoded (once for every receiver), and frames captured
    /// while nobody received video (not encoded).
    public var framesEncoded: UInt64
    public var framesNotWatched: UInt64
    /// Video frames lost on the way to the encoder: the capture's (driver
    /// drops, corrupt, skipped for newer, pool exhausted) and the encoder's
    /// (replaced by a newer frame before it was encoded).
    public var framesDropped: UInt64
    /// Of those, frames the encoder thread was too busy to take.
    public var framesDroppedEncoderBusy: UInt64
    /// True while the camera is lost and its capturer waits for it.
    public var videoDeviceLost: Bool
    /// Encoded frames per second over the interval since the previous call.
    public var frameRate: Double
    public var viewers: [ViewerStats]
}

/// One entry of a W3C WebRTC statistics report (webrtc-stats): an outgoing
/// RTP stream (`outbound-rtp`), what its receiver reported back about it
/// (`remote-inbound-rtp`), or the transport's selected pair (`candidate-pair`).
/// Members follow the specification's names; those that do not apply to an
/// entry's type are left out of its JSON.
public struct RTCStatsEntry: Sendable, Codable, Hashable {
    public var id: String
    public var type: String
    /// Milliseconds since the Unix epoch, as the specification's DOMHighResTimeStamp.
    public var timestamp: Double
    public var ssrc: UInt32?
    public var kind: String?
    public var mimeType: String?
    // outbound-rtp
    public var packetsSent: UInt64?
    public var bytesSent: UInt64?
    public var framesEncoded: UInt64?
    public var keyFramesEncoded: UInt64?
    public var framesPerSecond: Double?
    public var targetBitrate: Double?
    public var retransmittedPacketsSent: UInt64?
    public var nackCount: UInt64?
    public var pliCount: UInt64?
    public var firCount: UInt64?
    public var remoteId: String?
    // remote-inbound-rtp
    public var localId: String?
    public var packetsLost: Int64?
    public var fractionLost: Double?
    public var jitter: Double?
    public var roundTripTime: Double?
    // inbound-rtp (a subscriber's report)
    public var packetsReceived: UInt64?
    public var bytesReceived: UInt64?
    public var framesDecoded: UInt64?
    public var keyFramesDecoded: UInt64?
    public var framesDropped: UInt64?
    public var frameWidth: Int?
    public var frameHeight: Int?
    public var totalSamplesReceived: UInt64?
    public var concealedSamples: UInt64?
    // remote-outbound-rtp (the sender's reports, as a subscriber heard them)
    public var remoteTimestamp: Double?
    // candidate-pair ("local -> remote" as camagent prints it: not a spec member)
    public var state: String?
    public var nominated: Bool?
    public var addresses: String?

    public init(id: String, type: String, timestamp: Double) {
        self.id = id
        self.type = type
        self.timestamp = timestamp
    }
}

extension PublisherStats {
    /// The stats as a W3C-style report: for the WHIP session and each
    /// viewer, each stream's outbound-rtp and remote-inbound-rtp, and the
    /// selected candidate pair. `timestamp` is in ms since the Unix epoch.
    public func rtcStatsReport(timestamp: Double) -> [RTCStatsEntry] {
        var entries: [RTCStatsEntry] = []
        func add(_ stream: StreamStats?, connection: String) {
            guard let s = stream else { return }
            let outboundID = "outbound-rtp-\(connection)-\(s.ssrc)", remoteID = "remote-inbound-rtp-\(connection)-\(s.ssrc)"
            var out = RTCStatsEntry(id: outboundID, type: "outbound-rtp", timestamp: timestamp)
            out.ssrc = s.ssrc
            out.kind = s.kind.rawValue
            out.mimeType = "\(s.kind.rawValue)/\(s.codec)"
            out.packetsSent = s.packetsSent
            out.bytesSent = s.bytesSent
            out.framesEncoded = s.kind == .video ? s.framesEncoded : nil
            out.keyFramesEncoded = s.kind == .video ? s.keyframesEncoded : nil
            out.framesPerSecond = s.kind == .video ? s.frameRate : nil
            out.targetBitrate = s.targetBitrate.map(Double.init)
            out.retransmittedPacketsSent = s.packetsRetransmitted
            out.nackCount = s.nackReceived
            out.pliCount = s.kind == .video ? s.pliReceived : nil
            out.firCount = s.kind == .video ? s.firReceived : nil
            out.remoteId = remoteID
            entries.append(out)
            var remote = RTCStatsEntry(id: remoteID, type: "remote-inbound-rtp", timestamp: timestamp)
            remote.ssrc = s.ssrc
            remote.kind = s.kind.rawValue
            remote.localId = outboundID
            remote.packetsLost = s.packetsLost
            remote.fractionLost = s.fractionLost
            remote.jitter = s.jitter
            remote.roundTripTime = s.rtt
            entries.append(remote)
        }
        func pair(_ addresses: String?, connection: String, connected: Bool) {
            guard let addresses else { return }
            var p = RTCStatsEntry(id: "candidate-pair-\(connection)", type: "candidate-pair", timestamp: timestamp)
            p.state = connected ? "succeeded" : "in-progress"
            p.nominated = true
            p.addresses = addresses
            entries.append(p)
        }
        add(video, connection: "whip")
        add(audio, connection: "whip")
        pair(selectedPair, connection: "whip", connected: state == .connected)
        for viewer in viewers {
            add(viewer.video, connection: "viewer-\(viewer.id)")
            add(viewer.audio, connection: "viewer-\(viewer.id)")
            pair(viewer.selectedPair, connection: "viewer-\(viewer.id)", connected: viewer.state == "connected")
        }
        return entries
    }
}
