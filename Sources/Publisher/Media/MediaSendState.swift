import MediaTypes
import RTP

/// What the encoder threads and one connection's transport thread share,
/// behind one lock in `MediaSenders`: the RTP streams with their histories,
/// the pacer, and what the receiver's RTCP asked for. Critical sections are
/// a frame's headers or a handful of pops: short.
struct MediaSendState {
    var streams: [RTPStreamSender]
    var pacer: Pacer
    var feedback: [FeedbackCounters]
    var reception: [RemoteReception]
    var bitrate: BitrateController
    /// Whether this connection sends each kind now (neither while not
    /// connected): two flags, read once a packet without hashing.
    private(set) var sendsAudio = false
    private(set) var sendsVideo = false
    /// The same as a set.
    var sending: Set<MediaKind> {
        get {
            var kinds: Set<MediaKind> = []
            if sendsAudio { kinds.insert(.audio) }
            if sendsVideo { kinds.insert(.video) }
            return kinds
        }
        set {
            sendsAudio = newValue.contains(.audio)
            sendsVideo = newValue.contains(.video)
        }
    }
    /// The first stream of each kind (the streams are fixed at the start).
    private let firstAudioStream: Int?
    private let firstVideoStream: Int?
    /// Which simulcast layer the receiver gets on its one video stream (its
    /// preferredResolution); also holds video back until a keyframe after
    /// (re)connecting. Not used where each layer has a stream of its own.
    var layers = SpatialLayerChoice()
    /// Where each layer has a stream of its own (a simulcasting publisher's
    /// WHIP connection): the layers still waiting for a keyframe after
    /// (re)connecting, one bit each.
    var layersAwaitingKeyframe: UInt8 = .max
    /// Each simulcast layer on a stream of its own (more than one video stream).
    let carriesLayers: Bool
    /// The layers a keyframe is wanted of, one bit each (`KeyframeSchedule`),
    /// set by PLI/FIR or a new connection; `MediaHub` takes them for the
    /// encoder. A receiver of one layer on its one video stream also asks
    /// for its layer's keyframe while it waits for one (`contribute`).
    var keyframeLayers: UInt8 = 0
    /// Packets a NACK asked for that were no longer in the history.
    var nackMisses: UInt64 = 0
    /// The a=extmap id of urn:3gpp:video-orientation when the peer took it
    /// (nil: it did not, so it must be sent pixels the right way up).
    var videoOrientationExtensionID: UInt8?
    /// The receiver's preferredFrameRate against the rate frames come at.
    var frameRate = FrameRateChoice()

    init(streams: [RTPStreamSender], videoBitrate: Int) {
        self.streams = streams
        carriesLayers = streams.filter { $0.kind == .video }.count > 1
        pacer = Pacer(bitsPerSecond: videoBitrate + 64_000)
        feedback = Array(repeating: FeedbackCounters(), count: streams.count)
        reception = Array(repeating: RemoteReception(), count: streams.count)
        bitrate = BitrateController(maximum: videoBitrate)
        firstAudioStream = streams.firstIndex { $0.kind == .audio }
        firstVideoStream = streams.firstIndex { $0.kind == .video }
    }

    func sends(_ kind: MediaKind) -> Bool { kind == .audio ? sendsAudio : sendsVideo }

    // Index loops, not `firstIndex(where:)`: that copies each stream it
    // looks at (retaining its history), once a packet.
    func streamIndex(ssrc: UInt32) -> Int? {
        for index in streams.indices where streams[index].ssrc == ssrc { return index }
        return nil
    }
    /// The first stream of `kind`: for video, the largest layer.
    func streamIndex(kind: MediaKind) -> Int? { kind == .audio ? firstAudioStream : firstVideoStream }
    func streamIndex(videoLayer layer: UInt8) -> Int? {
        for index in streams.indices where streams[index].kind == .video && streams[index].spatialLayer == layer { return index }
        return nil
    }

    /// The layer a keyframe request on stream `index` is about: that
    /// stream's own layer where each layer has a stream, else the layer this
    /// receiver gets (or waits for).
    func keyframeLayer(of index: Int) -> UInt8 {
        KeyframeSchedule.bit(carriesLayers ? streams[index].spatialLayer : layers.received)
    }

    /// Acts on one RTCP packet from the receiver. Returns true when the peer
    /// said goodbye (BYE for the whole session).
    mutating func handle(_ packet: RTCPPacket, arrivedAtCompactNTP now: UInt32) -> Bool {
        switch packet {
        case .senderReport(let sr):
            for block in sr.reports { handle(block, now: now) }
        case .receiverReport(_, let reports):
            for block in reports { handle(block, now: now) }
        case .nack(_, let media, let lost):
            guard let s = streamIndex(ssrc: media) else { return false }
            feedback[s].nackReceived += 1
            for sequence in lost {
                feedback[s].nackedPackets += 1
                if let size = streams[s].history.withPacket(sequence, { $0.count }) {
                    pacer.enqueue(Pacer.Item(stream: s, sequence: sequence, size: size, isRetransmission: true), urgent: true)
                } else {
                    nackMisses += 1
                }
            }
        case .pictureLossIndication(_, let media):
            guard let s = streamIndex(ssrc: media) else { return false }
            feedback[s].pliReceived += 1
            keyframeLayers |= keyframeLayer(of: s)
        case .fullIntraRequest(_, let media, _):
            // FIR's own media SSRC field is zero; the target is in the FCI.
            let s = streamIndex(ssrc: media) ?? streamIndex(kind: .video)
            guard let s else { return false }
            feedback[s].firReceived += 1
            keyframeLayers |= keyframeLayer(of: s)
        case .estimatedMaximumBitrate(_, let bps, let ssrcs):
            if ssrcs.isEmpty || ssrcs.contains(where: { streamIndex(ssrc: $0) != nil }) {
                bitrate.estimatedMaximum(Int(min(bps, UInt64(Int.max))))
            }
        case .bye(let ssrcs):
            return !ssrcs.isEmpty && ssrcs.allSatisfy { streamIndex(ssrc: $0) == nil }
        case .sourceDescription, .other:
            break
        }
        return false
    }

    private mutating func handle(_ block: ReceptionReport, now: UInt32) {
        guard let s = streamIndex(ssrc: block.ssrc) else { return }
        var r = reception[s]
        r.reportsReceived += 1
        r.packetsLost = Int64(block.cumulativeLost)
        r.fractionLost = Double(block.fractionLost) / 256
        r.jitter = Double(block.jitter) / Double(streams[s].clockRate)
        if let rtt = block.roundTripSeconds(arrivedAtCompactNTP: now) { r.roundTripTime = rtt }
        reception[s] = r
        // One video stream steers the bitrate: with simulcast layers, the largest (the first).
        if streams[s].kind == .video, s == streamIndex(kind: .video) { bitrate.reportedLoss(r.fractionLost) }
    }
}
