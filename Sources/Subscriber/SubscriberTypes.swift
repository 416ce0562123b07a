import MediaTypes
import Networking
import Publisher
import WHIP

/// How a subscriber connects and how long it keeps trying.
public struct SubscriberSettings: Sendable {
    /// Receive the stream's audio / video at all (offered in the WHEP exchange).
    public var receiveAudio = true
    public var receiveVideo = true
    /// Loopback host candidates too (tests on one machine, peers on 127.0.0.1).
    public var includeLoopbackCandidates = false
    public var stunServer: TransportAddress?
    /// Seconds for ICE and DTLS to come up on each attempt.
    public var connectTimeout = 20.0
    /// After the media stops, how long new WHEP exchanges are tried before
    /// the stream is given up (streamDestroyed).
    public var reconnectWindow = 30.0
    /// Seconds for each HTTP exchange.
    public var httpTimeout = 10.0
    public var allowInsecureTLS = false
    public var trustedCertificatesFile: String?
    /// What the subscriber tells the sender it can take (REMB), bits per second.
    public var maxBitrate = 4_000_000

    public init() {}
}

/// What a subscriber wants the router to send it (its subscriberSettings).
public struct SubscriberWishes: Sendable, Equatable {
    public var audio: Bool
    public var video: Bool
    public var captions: Bool
    /// preferredFrameRate (nil: not asked; the router sends every frame).
    public var frameRate: Double?
    /// preferredResolution (nil: not asked; the router sends the largest simulcast layer).
    public var resolution: FrameSize?

    public init(audio: Bool, video: Bool, captions: Bool, frameRate: Double? = nil, resolution: FrameSize? = nil) {
        self.audio = audio
        self.video = video
        self.captions = captions
        self.frameRate = frameRate
        self.resolution = resolution
    }
}

public enum SubscriberState: String, Sendable {
    case connecting, connected, reconnecting, ended, failed, stopped
}

/// Why video stopped or resumed for this subscriber (OpenTok's reasons).
public enum VideoChangeReason: String, Sendable {
    case publishVideo, subscribeToVideo, quality, codecNotSupported
}

/// What happens to a subscriber, in order, on the subscriber's threads.
public enum SubscriberEvent: Sendable {
    /// Media flows: the codecs settled and the ICE pair chosen.
    case connected(codecs: String, selectedPair: String?)
    /// The media stopped (consent lost, or nothing arrived): reconnecting.
    case disconnected(reason: String)
    /// Media flows again after `disconnected`.
    case reconnected(selectedPair: String?)
    case videoDimensions(width: Int, height: Int)
    case videoDisabled(VideoChangeReason)
    case videoEnabled(VideoChangeReason)
    /// Audio fallback: the router warns that heavy loss may stop video (and lifts the warning).
    case videoDisableWarning
    case videoDisableWarningLifted
    /// Live caption text of the stream (subscribeToCaptions): partials while
    /// an utterance goes on, then one final.
    case captionReceived(text: String, isFinal: Bool)
    /// The sender ended the stream; the subscriber stops.
    case streamEnded(reason: String)
    /// Reconnecting did not succeed within the window: the subscriber stops.
    case streamDestroyed(reason: String)
}

/// Why a subscriber stopped against its will.
public enum SubscriberError: Error, Sendable, CustomStringConvertible {
    /// The WHEP exchange failed: unreachable, refused, unauthorized, not found.
    case signalling(WHIPError)
    /// The answer cannot be used.
    case badAnswer(String)
    /// ICE, DTLS or SRTP did not come up, or the connection was lost for good.
    case connection(ConnectionError)
    /// The stream ended (the sender closed it).
    case streamEnded(String)
    /// Reconnecting failed for `seconds`.
    case gaveUp(seconds: Double, lastError: String)
    /// A renderer could not take the media (disk full, device gone).
    case output(RenderError)

    public var description: String {
        switch self {
        case .signalling(let e): e.description.replacingWHIP
        case .badAnswer(let why): "the WHEP answer cannot be used: \(why)"
        case .connection(let e): e.description
        case .streamEnded(let reason): "the stream ended: \(reason)"
        case .gaveUp(let seconds, let last): "the stream could not be reached again within \(Int(seconds)) s (last: \(last))"
        case .output(let e): e.description
        }
    }
}

extension String {
    /// The WHIP client's messages, for the same HTTP exchange made for WHEP.
    fileprivate var replacingWHIP: String { hasPrefix("WHIP: ") ? "WHEP: " + dropFirst(6) : self }
}

/// A renderer's failure, with what it was writing to. A device renderer
/// (a v4l2loopback node) carries the device's own error: missing, busy, not
/// an output, a format it does not take.
public struct RenderError: Error, Sendable, CustomStringConvertible {
    public var target: String
    public var reason: String
    public var deviceError: CaptureError?
    /// The same for a sound card (ALSA playback).
    public var audioError: AudioError?
    public init(target: String, reason: String, deviceError: CaptureError? = nil, audioError: AudioError? = nil) {
        self.target = target
        self.reason = reason
        self.deviceError = deviceError
        self.audioError = audioError
    }
    public init(_ error: CaptureError, target: String) {
        self.init(target: target, reason: error.description, deviceError: error)
    }
    public init(_ error: AudioError, target: String) {
        self.init(target: target, reason: error.description, audioError: error)
    }
    public var description: String {
        // A file writer's own errors already start with the path.
        deviceError?.description ?? audioError?.description ?? (reason.hasPrefix(target + ":") ? reason : "\(target): \(reason)")
    }
}

/// What one received video stream did, since the connection began.
public struct VideoReceiveStats: Sendable, Equatable, Codable {
    public var codec = ""
    public var ssrc: UInt32 = 0
    /// The sender's own counts and clock, from its last sender report (nil before one).
    public var sender: SenderReportSummary?
    public var packetsReceived: UInt64 = 0
    public var packetsLost: Int64 = 0
    public var bytesReceived: UInt64 = 0
    public var framesDecoded: UInt64 = 0
    public var keyframesDecoded: UInt64 = 0
    /// Frames given up (a packet never came) or that waited for a keyframe.
    public var framesDropped: UInt64 = 0
    public var decodeErrors: UInt64 = 0
    public var nacksSent: UInt64 = 0
    public var retransmissionsReceived: UInt64 = 0
    public var keyframeRequestsSent: UInt64 = 0
    public var width = 0
    public var height = 0
    public var jitterSeconds = 0.0
    /// Seconds from the sender's capture stamp to the frame's render, by the
    /// sender's reports (moving average; meaningful when the clocks agree).
    public var senderToRenderDelay: Double?
    /// Seconds each frame waited to play with its audio (lip sync; moving
    /// average, at most 0.3 s; nil when no audio is played).
    public var lipSyncHold: Double?
}

/// What one received audio stream did, since the connection began.
public struct AudioReceiveStats: Sendable, Equatable, Codable {
    public var codec = ""
    public var ssrc: UInt32 = 0
    public var sender: SenderReportSummary?
    public var packetsReceived: UInt64 = 0
    public var packetsLost: Int64 = 0
    public var bytesReceived: UInt64 = 0
    public var samplesDecoded: UInt64 = 0
    /// Samples made up by loss concealment.
    public var samplesConcealed: UInt64 = 0
    public var latePackets: UInt64 = 0
    public var jitterSeconds = 0.0
    /// The same for audio, the renderer's own latency included.
    public var senderToRenderDelay: Double?
}

public struct SubscriberStats: Sendable {
    public var state: SubscriberState
    public var video: VideoReceiveStats?
    public var audio: AudioReceiveStats?
    public var selectedPair: String?
    /// Connections made (1, plus one per reconnection).
    public var connections: Int

    /// A/V sync: how much later video is rendered than the audio captured
    /// with it, seconds (negative: video early), from both streams' sender reports.
    public var avSyncOffset: Double? {
        guard let v = video?.senderToRenderDelay, let a = audio?.senderToRenderDelay else { return nil }
        return v - a
    }
}

/// What a sender's last RTCP sender report said.
public struct SenderReportSummary: Sendable, Equatable, Codable {
    public var packetsSent: UInt32
    public var bytesSent: UInt32
    /// The sender's wall clock when it sent the report, ms since the Unix epoch.
    public var remoteTimestamp: Double
}

extension SubscriberStats {
    /// The stats as a W3C webrtc-stats report: inbound-rtp and
    /// remote-outbound-rtp for each received stream, and the candidate pair.
    /// `timestamp` is in ms since the Unix epoch.
    public func rtcStatsReport(timestamp: Double) -> [RTCStatsEntry] {
        var entries: [RTCStatsEntry] = []
        func inbound(kind: String, codec: String, ssrc: UInt32, packets: UInt64, bytes: UInt64, lost: Int64,
                     jitter: Double, sender: SenderReportSummary?, fill: (inout RTCStatsEntry) -> Void) {
            let id = "inbound-rtp-\(ssrc)", remoteID = "remote-outbound-rtp-\(ssrc)"
            var entry = RTCStatsEntry(id: id, type: "inbound-rtp", timestamp: timestamp)
            entry.ssrc = ssrc
            entry.kind = kind
            entry.mimeType = "\(kind)/\(codec)"
            entry.packetsReceived = packets
            entry.bytesReceived = bytes
            entry.packetsLost = lost
            entry.jitter = jitter
            fill(&entry)
            if let sender {
                entry.remoteId = remoteID
                var remote = RTCStatsEntry(id: remoteID, type: "remote-outbound-rtp", timestamp: timestamp)
                remote.ssrc = ssrc
                remote.kind = kind
                remote.localId = id
                remote.packetsSent = UInt64(sender.packetsSent)
                remote.bytesSent = UInt64(sender.bytesSent)
                remote.remoteTimestamp = sender.remoteTimestamp
                entries.append(entry)
                entries.append(remote)
            } else {
                entries.append(entry)
            }
        }
        if let v = video {
            inbound(kind: "video", codec: v.codec, ssrc: v.ssrc, packets: v.packetsReceived, bytes: v.bytesReceived,
                    lost: v.packetsLost, jitter: v.jitterSeconds, sender: v.sender) { e in
                e.framesDecoded = v.framesDecoded
                e.keyFramesDecoded = v.keyframesDecoded
                e.framesDropped = v.framesDropped
                e.frameWidth = v.width
                e.frameHeight = v.height
                e.nackCount = v.nacksSent
                e.pliCount = v.keyframeRequestsSent
            }
        }
        if let a = audio {
            inbound(kind: "audio", codec: a.codec, ssrc: a.ssrc, packets: a.packetsReceived, bytes: a.bytesReceived,
                    lost: a.packetsLost, jitter: a.jitterSeconds, sender: a.sender) { e in
                e.totalSamplesReceived = a.samplesDecoded + a.samplesConcealed
                e.concealedSamples = a.samplesConcealed
            }
        }
        if let pair = selectedPair {
            var entry = RTCStatsEntry(id: "candidate-pair", type: "candidate-pair", timestamp: timestamp)
            entry.state = "succeeded"
            entry.nominated = true
            entry.addresses = pair
            entries.append(entry)
        }
        return entries
    }
}
