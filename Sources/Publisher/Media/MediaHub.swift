import MediaTypes
import RTP

/// Encode once, send to every connection: the encoders cut each frame into
/// RTP payloads once and the hub hands them to every connection that is
/// sending (the WHIP session, each viewer), which adds its own header, keeps
/// its own history for NACKs and paces and encrypts on its own thread (in
/// the router, on the thread that hands the frame over: `sendsOnQueueingThread`).
///
/// The hub also merges what the receivers ask of the one encoder: keyframe
/// requests (PLI, FIR, a new viewer) from any of them become at most one
/// keyframe per `keyframeSpacing` of each simulcast layer asked for, and the
/// video bitrate follows the receiver with the least room.
final class MediaHub: Sendable {
    /// Time zero of the RTP clocks, shared by audio and video and by every connection.
    let origin: MonotonicTimestamp
    /// Random RTP timestamp offsets (RFC 3550), one per kind, used by every
    /// connection so one encoded frame carries one timestamp everywhere.
    let audioTimestampBase = UInt32.random(in: 0...UInt32.max)
    let videoTimestampBase = UInt32.random(in: 0...UInt32.max)
    /// Bitrate ceiling for video, bits per second.
    let videoBitrateCeiling: Int
    /// The shortest time between two requested keyframes.
    static let keyframeSpacing: Duration = .milliseconds(500)
    /// Whether the thread that hands frames to the hub also sends them out
    /// (`PacketOutlet`). The router's: its receiving connection's thread
    /// already decrypts, and waking every subscriber's thread for every frame
    /// cost more than the sending. Not the encoders': the encoder thread
    /// goes back to the next frame, and one wake-up per frame and connection
    /// is cheap next to an encode.
    let sendsOnQueueingThread: Bool

    private let connections = PThreadLocked<[MediaSenders]>([])
    /// The simulcast layers frames come in, with the sizes their keyframes
    /// said and when each last sent a frame.
    private let layers: PThreadLocked<SimulcastLayers>
    /// More than one layer: only then are layers' sizes kept, once a video frame.
    private let simulcasts: Bool
    /// The next keyframe's bookkeeping, and whether video is published at all
    /// (in the same lock: the encoder asks both once a frame).
    private let keyframes = PThreadLocked<(schedule: KeyframeSchedule, videoOn: Bool)>((KeyframeSchedule(), true))
    /// Whether audio is published at all (OpenTok's publishAudio).
    private let audioOn = PThreadLocked(true)

    /// `simulcastLayers`: how many sizes each video frame is sent in (a
    /// simulcasting publisher's frames, or those the router receives from one).
    init(videoBitrateCeiling: Int, origin: MonotonicTimestamp = .now(), sendsOnQueueingThread: Bool = false,
         simulcastLayers: Int = 1) {
        self.videoBitrateCeiling = videoBitrateCeiling
        layers = PThreadLocked(SimulcastLayers(count: simulcastLayers))
        simulcasts = simulcastLayers > 1
        self.origin = origin
        self.sendsOnQueueingThread = sendsOnQueueingThread
    }

    /// A new outgoing stream for a connection, on the hub's RTP clock.
    func makeStream(kind: MediaKind, payloadType: UInt8, spatialLayer: UInt8 = 0) -> RTPStreamSender {
        RTPStreamSender(kind: kind, ssrc: .random(in: 1...UInt32.max), payloadType: payloadType,
                        clockRate: kind == .audio ? 48_000 : 90_000, historySize: kind == .audio ? 256 : 1024,
                        timestampBase: kind == .audio ? audioTimestampBase : videoTimestampBase, spatialLayer: spatialLayer)
    }

    /// A connection's send state with streams for `kinds` (payload types set
    /// later or here). With `simulcastLayers` over 1 (a simulcasting
    /// publisher's WHIP connection) the video stream carries the largest
    /// layer, and a stream for each smaller one follows the others.
    func makeSenders(_ streams: [(kind: MediaKind, payloadType: UInt8)], simulcastLayers: Int = 1) -> MediaSenders {
        let top = UInt8(max(0, simulcastLayers - 1))
        var made = streams.map { makeStream(kind: $0.kind, payloadType: $0.payloadType, spatialLayer: $0.kind == .video ? top : 0) }
        if let video = streams.first(where: { $0.kind == .video }), top > 0 {
            for layer in (0..<top).reversed() { made.append(makeStream(kind: .video, payloadType: video.payloadType, spatialLayer: layer)) }
        }
        var state = MediaSendState(streams: made, videoBitrate: videoBitrateCeiling)
        // A receiver of one layer knows the layers from the start: its first request names its own.
        state.layers = SpatialLayerChoice(layers: layers.withLock { $0 })
        return MediaSenders(state: state, origin: origin, takesOutlet: sendsOnQueueingThread)
    }

    func attach(_ senders: MediaSenders) { connections.withLock { $0.append(senders) } }
    func detach(_ senders: MediaSenders) { connections.withLock { $0.removeAll { $0 === senders } } }
    var attachedCount: Int { connections.withLock { $0.count } }

    /// The RTP time of a moment on the monotonic clock, for `kind`.
    func rtpTimestamp(_ kind: MediaKind, at time: MonotonicTimestamp) -> UInt32 {
        RTPClock.timestamp(at: time, origin: origin, base: kind == .audio ? audioTimestampBase : videoTimestampBase,
                           clockRate: kind == .audio ? 48_000 : 90_000)
    }

    /// Whether any connection sends `kind` now (no one listening: no encoding).
    func wants(_ kind: MediaKind) -> Bool {
        connections.withLock { list in list.contains { $0.isSending(kind) } }
    }

    /// OpenTok's publishAudio/publishVideo: off, nothing of that kind is
    /// encoded or sent (the capture goes on, so it comes back at once). Video
    /// comes back with a keyframe. Returns whether this changed anything.
    @discardableResult
    func setPublishing(_ kind: MediaKind, _ on: Bool) -> Bool {
        switch kind {
        case .audio:
            return audioOn.withLock { current in defer { current = on }; return current != on }
        case .video:
            return keyframes.withLock { k in
                guard k.videoOn != on else { return false }
                k.videoOn = on
                if on { k.schedule.restart() }
                return true
            }
        }
    }

    func isPublishing(_ kind: MediaKind) -> Bool {
        kind == .audio ? audioOn.withLock { $0 } : keyframes.withLock { $0.videoOn }
    }

    /// Asks every connection for a keyframe (the camera came back, another was plugged in).
    func requestKeyframe() {
        connections.withLock { list in for c in list { c.requestKeyframe() } }
    }

    /// The plan for the next video frame, in one pass over the connections,
    /// or nil when none receives video or video is not published (nothing
    /// is encoded). Keyframe requests from any of them (PLI, FIR, a new
    /// connection, a receiver moving to another simulcast layer) become at
    /// most one keyframe per `keyframeSpacing` of each layer asked for; a
    /// request is kept until it can be served. The bitrate is the lowest
    /// room among the receivers.
    func planVideoFrame(now: MonotonicTimestamp) -> VideoFramePlan? {
        var builder = VideoFramePlan.Builder()
        connections.withLock { list in for c in list { c.contribute(to: &builder) } }
        let (keyframeLayers, videoOn) = keyframes.withLock { k -> (UInt8, Bool) in
            k.schedule.ask(builder.keyframeLayers)
            guard k.videoOn, builder.receivers > 0, k.schedule.pending != 0 else { return (0, k.videoOn) }
            return (k.schedule.due(now: now, spacing: Self.keyframeSpacing), true)
        }
        guard videoOn, builder.receivers > 0 else { return nil }
        return VideoFramePlan(keyframeLayers: keyframeLayers,
                              bitrate: builder.lowestBitrate ?? builder.lowestLowerLayerBitrate ?? videoBitrateCeiling,
                              orientationAsMetadata: builder.allTakeOrientation)
    }

    /// Hands one frame's payloads to every connection; returns how many queued
    /// it (a connection not sending this kind, waiting for a keyframe, or
    /// leaving out this temporal layer for a lower frame rate, or this
    /// simulcast layer for another size, does not). `keyframeSize`: a
    /// keyframe's picture size, which is how layers' sizes become known.
    @discardableResult
    func send(_ batch: PayloadBatch, kind: MediaKind, rtpTimestamp: UInt32, isKeyframe: Bool, orientation: UInt8 = 0,
              temporalLayer: UInt8 = 0, spatialLayer: UInt8 = 0, keyframeSize: FrameSize? = nil) -> Int {
        let list = connections.withLock { $0 }
        // One layer: nothing to choose, so no sizes or times to keep (the choice only needs the count).
        var known = SimulcastLayers()
        if kind == .video, simulcasts {
            let now = MonotonicTimestamp.now()
            known = layers.withLock { l in
                if let keyframeSize { l[spatialLayer] = keyframeSize }
                l.heard(spatialLayer, at: now)
                return l
            }
        }
        var queued = 0
        for c in list where c.send(batch, kind: kind, rtpTimestamp: rtpTimestamp, isKeyframe: isKeyframe,
                                   orientation: orientation, temporalLayer: temporalLayer, spatialLayer: spatialLayer,
                                   layers: known) {
            queued += 1
        }
        return queued
    }
}
