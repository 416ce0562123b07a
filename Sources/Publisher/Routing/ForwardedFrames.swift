import MediaTypes
import RTP
import Synchronization

/// The receiving half of a routed stream: the publisher's packets, decrypted
/// by its connection, are gathered frame by frame (the payloads as they came,
/// nothing decoded) and handed to the stream's hub, which gives each
/// subscriber its own SSRC, sequence numbers, NACK history, pacing and SRTP.
///
/// A video frame is handed on only when it arrived whole (no sequence gap,
/// its marker seen); after a loss, frames are held back until the next
/// keyframe, which is asked for with a PLI. Keyframe requests of the
/// subscribers, merged by the hub, become PLIs too, and the room of the
/// subscriber with the least becomes a REMB. Runs on the connection's
/// thread only; the counters are atomics, read from anywhere.
final class ForwardedFrames: ReceivedRTPSink, @unchecked Sendable {   // state below: transport thread only
    struct Codecs: Sendable {
        var audioPayloadType: UInt8?
        var videoPayloadType: UInt8?
        var videoCodec: VideoCodec?
    }

    /// Packets forwarded: received from the publisher and queued to a subscriber (once per subscriber).
    let packetsForwarded = Atomic<UInt64>(0)
    let bytesForwarded = Atomic<UInt64>(0)
    /// Packets of the publisher's that no subscriber got: lost frames' rest, frames before a keyframe, unreadable.
    let packetsDropped = Atomic<UInt64>(0)
    let packetsReceived = Atomic<UInt64>(0)

    /// Who else gets the publisher's audio as it arrives (captions), if anyone.
    let audioTap = Mutex<(any RoutedAudioTap)?>(nil)

    private let hub: MediaHub
    private let codecs: Codecs
    private let onDimensions: @Sendable (Int, Int) -> Void
    /// Our SSRC in the feedback we send (RTCP needs a sender).
    private let feedbackSSRC = UInt32.random(in: 1...UInt32.max)

    // Transport-thread state.
    private var video = Gatherer()
    private var audioBatch = PayloadBatch()
    private var audioOffset: UInt32?
    private var dimensions: (Int, Int)?
    private var lastPLI = -Double.infinity
    private var lastREMB = -Double.infinity
    private var lastREMBBitrate = 0
    private var audioReception: ReceptionCounter?
    private var videoReception: ReceptionCounter?
    /// Seconds between two PLIs: the hub's spacing of keyframes.
    private static let pliSpacing = 0.5

    /// One video frame being gathered.
    private struct Gatherer {
        var batch = PayloadBatch()
        var ssrc: UInt32?
        var timestamp: UInt32?
        var nextSequence: UInt16?
        /// A packet of this frame is missing: it cannot be handed on.
        var broken = false
        var isKeyframe = false
        /// Held back until a keyframe: after a loss, and at the start.
        var waitingForKeyframe = true
        var offset: UInt32?
    }

    init(hub: MediaHub, codecs: Codecs, onDimensions: @escaping @Sendable (Int, Int) -> Void) {
        self.hub = hub
        self.codecs = codecs
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
            Self.count(view, in: &videoReception)
            receiveVideo(view, payload: payload, now: now, feedback: &feedback)
        } else if view.payloadType == codecs.audioPayloadType {
            Self.count(view, in: &audioReception)
            receiveAudio(view, payload: payload, now: now)
        } else {
            packetsDropped.add(1, ordering: .relaxed)   // a payload type that was not negotiated
        }
    }

    func receiverReports() -> [RTCPPacket] {
        var blocks: [ReceptionReport] = []
        if let block = audioReception?.report() { blocks.append(block) }
        if let block = videoReception?.report() { blocks.append(block) }
        return blocks.isEmpty ? [] : [.receiverReport(ssrc: feedbackSSRC, reports: blocks)]
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

    private func receiveVideo(_ view: RTPPacketView, payload: ArraySlice<UInt8>, now: Double,
                              feedback: inout [RTCPPacket]) {
        if view.ssrc != video.ssrc {
            // A new source (the publisher restarted its encoder): start over.
            video = Gatherer(batch: video.batch, ssrc: view.ssrc)
            video.batch.removeAll()
        }
        if let expected = video.nextSequence, view.sequenceNumber != expected {
            if isNewer(expected, than: view.sequenceNumber) || expected == view.sequenceNumber {
                packetsDropped.add(1, ordering: .relaxed)   // late or repeated: the frame has moved on
                return
            }
            video.broken = true   // a gap: a packet was lost
        }
        video.nextSequence = view.sequenceNumber &+ 1
        if view.timestamp != video.timestamp {
            // A new frame; the previous one never saw its marker.
            if !video.batch.isEmpty {
                packetsDropped.add(UInt64(video.batch.count), ordering: .relaxed)
                video.waitingForKeyframe = true
            }
            video.batch.removeAll()
            // A gap just before this packet may have taken the frame's head: `broken` stays.
            video.timestamp = view.timestamp
            video.isKeyframe = startsKeyframe(payload)
        }
        video.batch.append(payload: payload)
        guard view.marker else { return }

        // The frame is complete.
        let frame = video.batch.count
        defer { video.batch.removeAll(); video.timestamp = nil }
        if video.broken {
            video.broken = false
            video.waitingForKeyframe = true
        }
        if video.waitingForKeyframe && !video.isKeyframe {
            packetsDropped.add(UInt64(frame), ordering: .relaxed)
            askForKeyframe(now: now, ssrc: view.ssrc, into: &feedback)
            return
        }
        video.waitingForKeyframe = false
        let offset = video.offset ?? (hub.rtpTimestamp(.video, at: .now()) &- view.timestamp)
        video.offset = offset
        let queued = hub.send(video.batch, kind: .video, rtpTimestamp: view.timestamp &+ offset,
                              isKeyframe: video.isKeyframe)
        count(queuedTo: queued, bytes: video.batch.byteCount, packets: frame)
        // What the subscribers ask of the publisher, merged by the hub.
        if let plan = hub.planVideoFrame(now: .now()) {
            if plan.keyframe { askForKeyframe(now: now, ssrc: view.ssrc, into: &feedback) }
            if now - lastREMB >= 1 || plan.bitrate < lastREMBBitrate * 9 / 10 {
                lastREMB = now
                lastREMBBitrate = plan.bitrate
                feedback.append(.estimatedMaximumBitrate(sender: feedbackSSRC, bitsPerSecond: UInt64(plan.bitrate),
                                                         ssrcs: [view.ssrc]))
            }
        }
    }

    private func startsKeyframe(_ payload: ArraySlice<UInt8>) -> Bool {
        switch codecs.videoCodec {
        case .vp8?:
            guard let found = KeyframeInspection.vp8(payload) else { return false }
            if found.isKeyframe, let w = found.width, let h = found.height, dimensions.map({ $0 != (w, h) }) ?? true {
                dimensions = (w, h)
                onDimensions(w, h)
            }
            return found.isKeyframe
        case .h264?:
            if let sps = KeyframeInspection.h264SequenceParameterSet(payload),
               dimensions.map({ $0 != (sps.width, sps.height) }) ?? true {
                dimensions = (sps.width, sps.height)
                onDimensions(sps.width, sps.height)
            }
            return KeyframeInspection.h264StartsKeyframe(payload)
        case nil: return false
        }
    }

    /// A PLI to the publisher, at most one per keyframe spacing.
    private func askForKeyframe(now: Double, ssrc: UInt32, into feedback: inout [RTCPPacket]) {
        guard now - lastPLI >= Self.pliSpacing else { return }
        lastPLI = now
        feedback.append(.pictureLossIndication(sender: feedbackSSRC, media: ssrc))
    }

    private func count(queuedTo subscribers: Int, bytes: Int, packets: Int = 1) {
        guard subscribers > 0 else { return }
        packetsForwarded.add(UInt64(packets * subscribers), ordering: .relaxed)
        bytesForwarded.add(UInt64(bytes * subscribers), ordering: .relaxed)
    }
}
