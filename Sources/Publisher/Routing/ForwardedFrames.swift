import Logging
import MediaTypes
import RTP
import Synchronization

/// The receiving half of a routed stream: the publisher's packets, decrypted
/// by its connection, are gathered frame by frame (the payloads as they came,
/// nothing decoded) and handed to the stream's hub, which gives each
/// subscriber its own SSRC, sequence numbers, NACK history, pacing and SRTP.
///
/// A video frame is handed on only when it is whole, and in order: the
/// publisher's packets go through a jitter buffer that asks the publisher
/// again for a missing one (NACK) and holds the frames after it for a short
/// bound (`videoReception`). A packet lost for good holds frames back until
/// the next keyframe, which is asked for with a PLI. Keyframe requests of
/// the subscribers, merged by the hub, become PLIs too, each to the
/// simulcast layer it is about, and the room of the subscriber with the
/// least becomes a REMB. Runs on the connection's
/// thread only; the counters are atomics, read from anywhere.
///
/// A simulcasting publisher sends each layer on its own SSRC, named in its
/// offer (an `a=ssrc-group:SIM`, as camagent's publisher does) or learnt
/// from the RID its packets carry (`a=simulcast` with `a=rid`, as browsers
/// do); each layer has its own jitter buffer and reception
/// counter, and its frames reach the hub with their layer number, where
/// each subscriber takes one layer (`SpatialLayerChoice`), of those that
/// are sending: a layer the publisher announced but stopped sending, or
/// never sent, is left for another after a short silence.
final class ForwardedFrames: ReceivedRTPSink, @unchecked Sendable {   // state below: transport thread only
    struct Codecs: Sendable {
        var audioPayloadType: UInt8?
        var videoPayloadType: UInt8?
        var videoCodec: VideoCodec?
        /// The publisher's simulcast SSRCs, smallest layer first (empty: one layer).
        var simulcastSSRCs: [UInt32] = []
        /// Or its simulcast RIDs, smallest layer first, and the header
        /// extension id its packets name them under: each layer's SSRC is
        /// learnt from its first packet that does.
        var simulcastRIDs: [String] = []
        var streamIDExtensionID: UInt8?
    }

    /// One layer of the publisher's video (or its only one), on its own SSRC.
    private struct LayerInput {
        let ssrc: UInt32
        let layer: UInt8
        /// Its packets, put back in order.
        var jitter: VideoJitterBuffer
        /// The jitter buffer's counters already added to the atomics.
        var countedSoFar = VideoJitterBuffer.Counters()
        var reception: ReceptionCounter
        /// When this layer was last asked for a keyframe (PLI).
        var lastPLI = -Double.infinity
        /// Its RTP clock to the hub's (set at its first frame).
        var offset: UInt32?
    }

    /// Packets forwarded: received from the publisher and queued to a subscriber (once per subscriber).
    let packetsForwarded = Atomic<UInt64>(0)
    let bytesForwarded = Atomic<UInt64>(0)
    /// Packets of the publisher's that no subscriber got: lost frames' rest, frames before a keyframe, unreadable.
    let packetsDropped = Atomic<UInt64>(0)
    let packetsReceived = Atomic<UInt64>(0)
    /// Publisher packets asked for again, and those that then came.
    let packetsNacked = Atomic<UInt64>(0)
    let packetsRecovered = Atomic<UInt64>(0)

    /// Who else gets the publisher's audio as it arrives (captions), if anyone.
    let audioTap = PThreadLocked<(any EncodedAudioTap)?>(nil)

    private let hub: MediaHub
    private let codecs: Codecs
    private let onDimensions: @Sendable (Int, Int) -> Void
    private let logger: Logger
    /// Our SSRC in the feedback we send (RTCP needs a sender).
    private let feedbackSSRC = UInt32.random(in: 1...UInt32.max)

    /// How long the router waits for a resent packet before it gives the
    /// frame up (and asks for a keyframe). Short: every frame after the gap
    /// waits too, and each subscriber's own buffer waits again. 512 packets
    /// hold about half a second of 720p at 2 Mbit/s, 0.75 MB per stream.
    static let videoReception: VideoJitterBuffer.Settings = {
        var settings = VideoJitterBuffer.Settings()
        settings.capacity = 512
        settings.maxWait = 0.2
        settings.nackInterval = 0.04
        settings.maxNackTries = 4
        settings.pliInterval = 0.5
        return settings
    }()

    // Transport-thread state.
    /// The publisher's video layers as their packets come. Without
    /// simulcast, one, made anew for each SSRC (a publisher that restarts
    /// its encoder starts a new one).
    private var videoLayers: [LayerInput] = []
    private var videoFrame = PayloadBatch()
    /// The offset that carries the publisher's video RTP clock over to the
    /// hub's, fixed at the first frame so that intervals stay exact. Each
    /// layer (and each new SSRC) takes it when its first frame's time is
    /// near the last frame's, as when a publisher stamps a frame's layers
    /// with one RTP time (camagent's does); a layer on an RTP clock of its
    /// own (each of Chromium's is) gets an offset of its own, from its first
    /// frame's arrival, as audio does (the sender reports could make both exact).
    private var videoOffset: UInt32?
    /// The publisher's RTP time of the last frame forwarded, any layer, and
    /// the hub's time it went at.
    private var lastVideoTimestamp: UInt32?
    private var lastForwardedTimestamp: UInt32?
    /// Half a second of the 90 kHz clock: "near" for a new layer's first frame.
    private static let sameClockSpan: Int32 = 45_000
    private var requests = FeedbackRequests()
    private var audioBatch = PayloadBatch()
    private var audioOffset: UInt32?
    private var dimensions: (Int, Int)?
    private var lastREMB = -Double.infinity
    private var lastREMBBitrate = 0
    private var audioReception: ReceptionCounter?
    /// Seconds between two PLIs: the hub's spacing of keyframes.
    private static let pliSpacing = 0.5

    init(hub: MediaHub, codecs: Codecs, logger: Logger = Logger(label: "camagent.router"),
         onDimensions: @escaping @Sendable (Int, Int) -> Void) {
        self.hub = hub
        self.codecs = codecs
        self.logger = logger
        self.onDimensions = onDimensions
    }

    func receive(rtp packet: ArraySlice<UInt8>, now: Double, feedback: inout [RTCPPacket]) {
        packetsReceived.add(1, ordering: .relaxed)
        guard let view = try? RTPPacketView(parsing: packet) else {
            packetsDropped.add(1, ordering: .relaxed)
            return
        }
        let payload = packet[view.payload]
        if view.payloadType == codecs.videoPayloadType {
            receiveVideo(view, packet: packet, now: now, feedback: &feedback)
        } else if view.payloadType == codecs.audioPayloadType {
            Self.count(view, in: &audioReception)
            receiveAudio(view, payload: payload, now: now)
        } else {
            packetsDropped.add(1, ordering: .relaxed)   // a payload type that was not negotiated
        }
    }

    func receiverReports() -> [RTCPPacket] {
        let now = MonotonicTimestamp.now().seconds
        var blocks: [ReceptionReport] = []
        if let block = audioReception?.report(now: now) { blocks.append(block) }
        for index in videoLayers.indices { blocks.append(videoLayers[index].reception.report(now: now)) }
        return blocks.isEmpty ? [] : [.receiverReport(ssrc: feedbackSSRC, reports: blocks)]
    }

    /// The publisher's sender reports, echoed in the receiver reports (LSR, DLSR):
    /// the publisher's round-trip time comes from them.
    func receive(rtcp packets: [RTCPPacket], now: Double) {
        for case .senderReport(let report) in packets {
            if let index = videoLayers.firstIndex(where: { $0.ssrc == report.ssrc }) {
                videoLayers[index].reception.noteSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: now)
            } else if report.ssrc == audioReception?.ssrc {
                audioReception?.noteSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: now)
            }
        }
    }

    private static func count(_ view: RTPPacketView, in counter: inout ReceptionCounter?) {
        if counter?.ssrc != view.ssrc { counter = ReceptionCounter(ssrc: view.ssrc, firstSequence: view.sequenceNumber) }
        counter?.count(sequence: view.sequenceNumber)
    }

    private func receiveAudio(_ view: RTPPacketView, payload: ArraySlice<UInt8>, now: Double) {
        if let tap = audioTap.withLock({ $0 }) { payload.withUnsafeBytes { tap.received(opusPayload: $0) } }
        // The publisher's RTP clock is carried over to the hub's by one
        // offset, fixed at the first packet, so intervals stay exact.
        let offset = audioOffset ?? (hub.rtpTimestamp(.audio, at: .now()) &- view.timestamp)
        audioOffset = offset
        audioBatch.removeAll()
        audioBatch.append(payload: payload)
        count(queuedTo: hub.send(audioBatch, kind: .audio, rtpTimestamp: view.timestamp &+ offset, isKeyframe: true),
              bytes: payload.count)
    }

    private func receiveVideo(_ view: RTPPacketView, packet: ArraySlice<UInt8>, now: Double,
                              feedback: inout [RTCPPacket]) {
        guard let index = layerInput(for: view, packet: packet) else {
            packetsDropped.add(1, ordering: .relaxed)
            return
        }
        videoLayers[index].reception.count(sequence: view.sequenceNumber)
        let layer = videoLayers[index].layer
        requests.clear()
        videoLayers[index].jitter.insert(view, bytes: packet, now: now, feedback: &requests)
        while let frame = videoLayers[index].jitter.nextFrame(into: &videoFrame, now: now, feedback: &requests) {
            forward(frame, input: index, layer: layer, ssrc: view.ssrc, now: now, feedback: &feedback)
        }
        if !requests.nacks.isEmpty {
            feedback.append(.nack(sender: feedbackSSRC, media: view.ssrc, lost: requests.nacks))
        }
        // A gap this layer's jitter buffer gave up on: a keyframe of this layer.
        if requests.keyframe { askForKeyframe(layers: KeyframeSchedule.bit(layer), now: now, into: &feedback) }
        countVideoReception(index)
    }

    /// The layer a video packet belongs to, made on its first packet; nil
    /// for an SSRC outside a simulcast group, a packet of a new SSRC that
    /// names no RID of the offer's, or a codec the router does not know.
    private func layerInput(for view: RTPPacketView, packet: ArraySlice<UInt8>) -> Int? {
        if let index = videoLayers.firstIndex(where: { $0.ssrc == view.ssrc }) { return index }
        guard let codec = jitterCodec else { return nil }
        let layer: UInt8
        if !codecs.simulcastSSRCs.isEmpty {
            guard let position = codecs.simulcastSSRCs.firstIndex(of: view.ssrc) else { return nil }
            layer = UInt8(min(position, Int(UInt8.max)))
        } else if !codecs.simulcastRIDs.isEmpty {
            // A browser names the RID in its first packets (until our receiver reports
            // reach it); a layer that comes back on a new SSRC replaces its old one.
            guard let id = codecs.streamIDExtensionID, let rid = view.headerExtension(id, in: packet),
                  let position = codecs.simulcastRIDs.firstIndex(where: { $0.utf8.elementsEqual(rid) }) else { return nil }
            layer = UInt8(min(position, Int(UInt8.max)))
            videoLayers.removeAll { $0.layer == layer }
        } else {
            layer = 0
            videoLayers.removeAll()
        }
        videoLayers.append(LayerInput(ssrc: view.ssrc, layer: layer,
                                      jitter: VideoJitterBuffer(codec: codec, settings: Self.videoReception),
                                      reception: ReceptionCounter(ssrc: view.ssrc, firstSequence: view.sequenceNumber)))
        return videoLayers.count - 1
    }

    /// The layer whose size is the stream's (`videoDimensions`): the largest.
    private var topLayer: UInt8 {
        UInt8(min(max(0, codecs.simulcastSSRCs.count - 1, codecs.simulcastRIDs.count - 1), Int(UInt8.max)))
    }

    private var jitterCodec: VideoJitterBuffer.Codec? {
        switch codecs.videoCodec {
        case .vp8?: .vp8
        case .h264?: .h264
        case nil: nil
        }
    }

    /// Hands a whole frame (in `videoFrame`) to the hub, and passes on what
    /// the subscribers ask of the publisher.
    private func forward(_ frame: VideoJitterBuffer.Frame, input: Int, layer: UInt8, ssrc: UInt32, now: Double,
                         feedback: inout [RTCPPacket]) {
        let size = frame.isKeyframe ? keyframeSize() : nil
        if let size, layer == topLayer { noteDimensions(size) }
        let offset = videoLayers[input].offset ?? videoOffset(firstFrameAt: frame.timestamp, layer: layer, ssrc: ssrc)
        videoLayers[input].offset = offset
        lastVideoTimestamp = frame.timestamp
        lastForwardedTimestamp = frame.timestamp &+ offset
        let queued = hub.send(videoFrame, kind: .video, rtpTimestamp: frame.timestamp &+ offset,
                              isKeyframe: frame.isKeyframe, temporalLayer: temporalLayer(), spatialLayer: layer,
                              keyframeSize: size.map { FrameSize(width: $0.0, height: $0.1) })
        count(queuedTo: queued, bytes: videoFrame.byteCount, packets: videoFrame.count)
        // What the subscribers ask of the publisher, merged by the hub.
        if let plan = hub.planVideoFrame(now: .now()) {
            if plan.keyframe { askForKeyframe(layers: plan.keyframeLayers, now: now, into: &feedback) }
            if now - lastREMB >= 1 || plan.bitrate < lastREMBBitrate * 9 / 10 {
                lastREMB = now
                lastREMBBitrate = plan.bitrate
                feedback.append(.estimatedMaximumBitrate(sender: feedbackSSRC, bitsPerSecond: UInt64(plan.bitrate),
                                                         ssrcs: videoLayers.count > 1 ? videoLayers.map(\.ssrc) : [ssrc]))
            }
        }
    }

    /// The offset for a layer (or SSRC) whose first frame has RTP time
    /// `timestamp`: the stream's own when that time is near the last frame's
    /// (the same clock), else one from now.
    private func videoOffset(firstFrameAt timestamp: UInt32, layer: UInt8, ssrc: UInt32) -> UInt32 {
        let said = "video layer \(layer) on SSRC \(ssrc), first frame at RTP time \(timestamp)"
        if let videoOffset, let last = lastVideoTimestamp,
           abs(Int64(Int32(bitPattern: timestamp &- last))) <= Int64(Self.sameClockSpan) {
            logger.info("\(said): on the stream's RTP clock (the last frame's was \(last))")
            return videoOffset
        }
        var offset = hub.rtpTimestamp(.video, at: .now()) &- timestamp
        // A frame may come out of the jitter buffer up to its wait after it arrived: on a
        // stream without layers to switch between (a publisher that restarted its encoder),
        // nothing else would keep time from going back.
        if let lastForwarded = lastForwardedTimestamp, Int32(bitPattern: (timestamp &+ offset) &- lastForwarded) <= 0 {
            offset = lastForwarded &+ 1 &- timestamp
        }
        logger.info("\(said): \(videoOffset == nil ? "the stream's first" : "on an RTP clock of its own (the last frame's was \(lastVideoTimestamp.map(String.init) ?? "none"))")")
        if videoOffset == nil { videoOffset = offset }
        return offset
    }

    /// The frame's temporal layer as its VP8 descriptor says (TID); 0 when it
    /// says none (a publisher without layers, or H.264): such frames all go.
    private func temporalLayer() -> UInt8 {
        guard codecs.videoCodec == .vp8, !videoFrame.isEmpty else { return 0 }
        return videoFrame.withPayload(0) { payload in (try? VP8PayloadDescriptor(parsing: payload))?.temporalLayer ?? 0 }
    }

    /// Adds what a layer's jitter buffer counted since its last packet to the atomics.
    private func countVideoReception(_ index: Int) {
        let counters = videoLayers[index].jitter.counters
        let countedSoFar = videoLayers[index].countedSoFar
        let dropped = (counters.late + counters.duplicates + counters.discarded)
            - (countedSoFar.late + countedSoFar.duplicates + countedSoFar.discarded)
        if dropped > 0 { packetsDropped.add(dropped, ordering: .relaxed) }
        if counters.nacked > countedSoFar.nacked { packetsNacked.add(counters.nacked - countedSoFar.nacked, ordering: .relaxed) }
        if counters.recovered > countedSoFar.recovered {
            packetsRecovered.add(counters.recovered - countedSoFar.recovered, ordering: .relaxed)
        }
        videoLayers[index].countedSoFar = counters
    }

    /// The stream's picture size, reported when it changes.
    private func noteDimensions(_ size: (Int, Int)) {
        if dimensions.map({ $0 != size }) ?? true {
            dimensions = size
            onDimensions(size.0, size.1)
        }
    }

    /// A keyframe's picture size: VP8 says it in the frame's first payload,
    /// H.264 in its SPS (a payload of its own, or in a STAP-A).
    private func keyframeSize() -> (Int, Int)? {
        guard !videoFrame.isEmpty else { return nil }
        switch codecs.videoCodec {
        case .vp8?:
            return videoFrame.withPayload(0) { payload in
                KeyframeInspection.vp8(payload).flatMap { found in found.width.flatMap { w in found.height.map { (w, $0) } } }
            }
        case .h264?:
            for index in 0..<videoFrame.count {
                if let sps = videoFrame.withPayload(index, { KeyframeInspection.h264SequenceParameterSet($0) }) {
                    return (sps.width, sps.height)
                }
            }
            return nil
        case nil:
            return nil
        }
    }

    /// A PLI to the publisher for each of `layers` (one bit each) it sends,
    /// at most one per keyframe spacing and layer.
    private func askForKeyframe(layers: UInt8, now: Double, into feedback: inout [RTCPPacket]) {
        for index in videoLayers.indices where layers & KeyframeSchedule.bit(videoLayers[index].layer) != 0 {
            guard now - videoLayers[index].lastPLI >= Self.pliSpacing else { continue }
            videoLayers[index].lastPLI = now
            feedback.append(.pictureLossIndication(sender: feedbackSSRC, media: videoLayers[index].ssrc))
        }
    }

    private func count(queuedTo subscribers: Int, bytes: Int, packets: Int = 1) {
        guard subscribers > 0 else { return }
        packetsForwarded.add(UInt64(packets * subscribers), ordering: .relaxed)
        bytesForwarded.add(UInt64(bytes * subscribers), ordering: .relaxed)
    }
}
