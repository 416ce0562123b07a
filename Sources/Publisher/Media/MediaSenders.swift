import MediaTypes
import RTP

/// The send side of one connection (the WHIP session, or one viewer): its
/// RTP streams with their histories, its pacer and what its receiver's RTCP
/// asked for. The encoders hand every connection the same payloads through
/// `MediaHub`; the connection's transport thread drains its pacer. For WHIP
/// it outlives a connection, so a reconnect continues the same streams.
///
/// The state sits behind one lock and is reached only through the methods
/// below, each one short critical section: the encoder threads, the
/// transport thread and the stats reader never see it whole.
final class MediaSenders: Sendable {
    private let state: PThreadLocked<MediaSendState>
    /// Time zero of every stream's RTP clock: audio and video stay aligned.
    let origin: MonotonicTimestamp
    /// RTP payload size: 1200-byte datagrams leave room for SRTP's tag and
    /// the orientation header extension.
    static let maxPayloadSize = 1100
    /// Wakes the transport thread when packets are queued. An event, not a
    /// closure: a closure handed out of `withLock` is re-wrapped (allocated)
    /// on every frame.
    private let wake: PThreadLocked<WakeEvent?> = PThreadLocked(nil)
    /// The connected transport's way out: packets queued here are sent from
    /// the queueing thread at once, as far as the pacer lets them (nil: not
    /// connected, or the transport thread sends everything).
    private let outlet: PThreadLocked<(any PacketOutlet)?> = PThreadLocked(nil)
    /// False: the transport thread sends everything (`MediaHub.sendsOnQueueingThread`).
    private let takesOutlet: Bool

    init(state: MediaSendState, origin: MonotonicTimestamp, takesOutlet: Bool = false) {
        self.state = PThreadLocked(state)
        self.origin = origin
        self.takesOutlet = takesOutlet
    }

    /// The transport thread's wake-up, signalled whenever packets are queued (nil: none).
    func setWake(_ event: WakeEvent?) { wake.withLock { $0 = event } }

    /// The connected transport's outlet, kept only where the hub sends on
    /// the queueing thread; `removeOutlet` takes it away only if it is still
    /// the one given (a WHIP reconnect may set the next first).
    func setOutlet(_ new: any PacketOutlet) {
        guard takesOutlet else { return }
        outlet.withLock { $0 = new }
    }
    func removeOutlet(_ old: any PacketOutlet) { outlet.withLock { if $0 === old { $0 = nil } } }

    // MARK: Negotiation and connection state

    /// Which kinds this connection sends now: set when its transport
    /// connects (asking for a keyframe), emptied when it goes away.
    func setSending(_ kinds: Set<MediaKind>) {
        state.withLock { s in
            s.sending = kinds
            s.layers.restart()
            s.layersAwaitingKeyframe = .max
            // Each layer on a stream of its own waits for its keyframe; a receiver of one
            // layer asks for the one it waits for (`contribute`).
            if !kinds.isEmpty && s.carriesLayers { s.keyframeLayers = KeyframeSchedule.allLayers }
        }
    }

    var isSending: Bool { state.withLock { !$0.sending.isEmpty } }

    /// The SSRC of each kind's first stream (video: the largest layer's).
    var ssrcs: [MediaKind: UInt32] {
        state.withLock { s in Dictionary(s.streams.map { ($0.kind, $0.ssrc) }, uniquingKeysWith: { first, _ in first }) }
    }

    /// The video streams' SSRCs from the smallest layer to the largest,
    /// where each simulcast layer has its own (empty otherwise).
    var simulcastSSRCs: [UInt32] {
        state.withLock { s in
            s.carriesLayers ? s.streams.filter { $0.kind == .video }.sorted { $0.spatialLayer < $1.spatialLayer }.map(\.ssrc) : []
        }
    }

    /// What the answer (or the viewer's offer) settled: payload types and
    /// whether the peer takes the orientation extension. (Its first keyframe
    /// is asked for when it starts sending: `setSending`.)
    func negotiated(payloadTypes: [MediaKind: UInt8], videoOrientationExtensionID: UInt8?) {
        state.withLock { s in
            for (kind, type) in payloadTypes {
                for index in s.streams.indices where s.streams[index].kind == kind { s.streams[index].payloadType = type }
            }
            s.videoOrientationExtensionID = videoOrientationExtensionID
        }
    }

    /// A keyframe of every layer (the camera came back, another was plugged in).
    func requestKeyframe() { state.withLock { $0.keyframeLayers = KeyframeSchedule.allLayers } }

    /// The receiver's preferred frame rate (nil: every frame).
    func setPreferredFrameRate(_ rate: Double?) { state.withLock { $0.frameRate.preferred = rate } }

    /// The receiver's preferred picture size (nil: the largest simulcast layer).
    func setPreferredResolution(_ size: FrameSize?) { state.withLock { $0.layers.preferred = size } }

    // MARK: The encoders' side

    /// This connection's part of the next video frame's plan, read and
    /// taken in one critical section: its keyframe requests (cleared), and,
    /// when it receives video, its bitrate room and whether it takes CVO.
    func contribute(to plan: inout VideoFramePlan.Builder) {
        state.withLock { s in
            plan.keyframeLayers |= s.keyframeLayers
            s.keyframeLayers = 0
            guard s.sendsVideo else { return }
            // A receiver that waits for a layer's keyframe (its first, or a move to another
            // layer) asks for that layer's.
            if !s.carriesLayers, let layer = s.layers.awaitedLayer { plan.keyframeLayers |= KeyframeSchedule.bit(layer) }
            plan.receivers += 1
            // The bitrate asked of the encoder (the router's REMB) is the largest layer's: a
            // receiver of a smaller one does not hold it down, unless no one takes the largest.
            if s.carriesLayers || !s.layers.receivesLowerLayer {
                plan.lowestBitrate = min(plan.lowestBitrate ?? .max, s.bitrate.target)
            } else {
                plan.lowestLowerLayerBitrate = min(plan.lowestLowerLayerBitrate ?? .max, s.bitrate.target)
            }
            if s.videoOrientationExtensionID == nil { plan.allTakeOrientation = false }
        }
    }

    func isSending(_ kind: MediaKind) -> Bool { state.withLock { $0.sends(kind) } }

    /// Queues one frame's payloads on this connection's stream of `kind`.
    /// Video waits for a keyframe after (re)connecting: frames the receiver
    /// could not decode are not sent at all; and upper-layer frames are left
    /// out while the receiver prefers a lower frame rate. Of a simulcast
    /// stream it gets one layer (`SpatialLayerChoice`), or, where each
    /// layer has a stream of its own, every layer on its own stream.
    /// `orientation` is the CVO byte, sent to a peer that negotiated the
    /// extension. True when queued.
    @discardableResult
    func send(_ batch: PayloadBatch, kind: MediaKind, rtpTimestamp: UInt32, isKeyframe: Bool,
              orientation: UInt8 = 0, temporalLayer: UInt8 = 0, spatialLayer: UInt8 = 0,
              layers: SimulcastLayers = SimulcastLayers()) -> Bool {
        let queued = state.withLock { s -> Bool in
            guard s.sends(kind), var index = s.streamIndex(kind: kind) else { return false }
            var headerExtension: OneByteExtension?
            var timestamp = rtpTimestamp
            if kind == .video {
                if s.carriesLayers {
                    // Every frame offered is measured (the publisher's own layers share one time: no gap).
                    guard s.frameRate.admits(layer: temporalLayer, rtpTimestamp: rtpTimestamp) else { return false }
                    guard let layerIndex = s.streamIndex(videoLayer: spatialLayer) else { return false }
                    index = layerIndex
                    let bit: UInt8 = 1 << min(spatialLayer, 7)
                    if s.layersAwaitingKeyframe & bit != 0 && !isKeyframe { return false }
                    s.layersAwaitingKeyframe &= ~bit
                } else {
                    guard let sent = s.layers.admit(layer: spatialLayer, isKeyframe: isKeyframe, rtpTimestamp: rtpTimestamp,
                                                    layers: layers) else {
                        return false
                    }
                    // Only the layer this receiver gets is measured: a browser's layers run on RTP
                    // clocks of their own, set on the hub's a few ms apart, and would look twice as fast.
                    guard s.frameRate.admits(layer: temporalLayer, rtpTimestamp: rtpTimestamp) else { return false }
                    timestamp = sent
                }
                headerExtension = s.videoOrientationExtensionID.map { OneByteExtension(id: $0, value: orientation) }
            }
            let urgent = kind == .audio
            s.streams[index].append(batch, timestamp: timestamp, isKeyframe: isKeyframe,
                                    headerExtension: headerExtension) { seq, size in
                s.pacer.enqueue(Pacer.Item(stream: index, sequence: seq, size: size, isRetransmission: false), urgent: urgent)
            }
            return true
        }
        if queued { deliver() }
        return queued
    }

    /// Sends what the pacer lets out now on this thread; the transport thread
    /// is woken only for what it holds back (a keyframe's tail), or when
    /// there is no outlet yet.
    private func deliver() {
        if let outlet = outlet.withLock({ $0 }) {
            outlet.sendDue(from: self, now: MonotonicTimestamp.now().seconds)
            if state.withLock({ $0.pacer.isEmpty }) { return }
        }
        wake.withLock { $0 }?.signal()
    }

    // MARK: The transport thread's side

    /// When the pacer next lets a packet out (nil: nothing queued).
    func pacerDeadline(now: Double) -> Double? { state.withLock { $0.pacer.nextDeadline(now: now) } }

    /// Copies the next packet the pacer lets out now into `buffer` (clear
    /// RTP: the history keeps it for NACKs) and counts it as sent. False
    /// when nothing is due.
    func takeNextPacket(now: Double, into buffer: inout [UInt8]) -> Bool {
        state.withLock { s in
            while let item = s.pacer.next(now: now) {
                let found: Void? = s.streams[item.stream].history.withPacket(item.sequence) { packet in
                    buffer.removeAll(keepingCapacity: true)
                    buffer.append(contentsOf: packet)
                }
                if found != nil {
                    s.streams[item.stream].countSent(size: buffer.count, retransmission: item.isRetransmission)
                    return true
                }
            }
            return false
        }
    }

    /// Acts on the receiver's RTCP; true when it said goodbye (BYE).
    func handle(_ packets: [RTCPPacket], arrivedAtCompactNTP now: UInt32) -> Bool {
        state.withLock { s in
            var bye = false
            for packet in packets where s.handle(packet, arrivedAtCompactNTP: now) { bye = true }
            return bye
        }
    }

    /// A sender report for each stream that has sent something.
    func senderReports(at now: MonotonicTimestamp, ntp: UInt64) -> [RTCPPacket] {
        state.withLock { s in
            s.streams.filter(\.hasSent).map { stream in
                .senderReport(SenderReport(ssrc: stream.ssrc, ntpTimestamp: ntp,
                                           rtpTimestamp: stream.rtpTimestamp(at: now, origin: origin),
                                           packetCount: UInt32(truncatingIfNeeded: stream.packetsSent),
                                           octetCount: UInt32(truncatingIfNeeded: stream.payloadBytesSent)))
            }
        }
    }

    /// What the receiver's reports say of one kind's stream (nil: not
    /// negotiated), with the packets sent and those it NACKed: its loss
    /// before repair, where the reports count retransmissions as received.
    func reception(_ kind: MediaKind) -> (report: RemoteReception, packetsSent: UInt64, nackedPackets: UInt64)? {
        state.withLock { s in
            s.streamIndex(kind: kind).map { (s.reception[$0], s.streams[$0].packetsSent, s.feedback[$0].nackedPackets) }
        }
    }

    /// The kinds being sent now.
    var sendingKinds: Set<MediaKind> { state.withLock { $0.sending } }

    /// Every stream's SSRC, in stream order (for BYE).
    var allSSRCs: [UInt32] { state.withLock { s in s.streams.map(\.ssrc) } }

    // MARK: Stats

    /// One stream's stats, computed under the lock: a copy of the send state
    /// would make the sender copy its histories on its next write.
    func streamStats(_ kind: MediaKind, codec: String, previous: (UInt64, UInt64)?, elapsed: Double) -> StreamStats? {
        state.withLock { s in
            s.streamIndex(kind: kind).map { StreamStats(s, stream: $0, codec: codec, previous: previous, elapsed: elapsed) }
        }
    }

    var packetsDroppedByPacer: UInt64 { state.withLock { $0.pacer.dropped } }

    #if DEBUG
    /// Tests: the state as it is now, to look at or adjust.
    func withStateForTesting<R: Sendable>(_ body: (inout MediaSendState) -> R) -> R {
        state.withLock { body(&$0) }
    }
    #endif
}
