import MediaTypes
import RTP
import Synchronization

/// The send side of one connection (the WHIP session, or one viewer): its
/// RTP streams with their histories, its pacer and what its receiver's RTCP
/// asked for. The encoders hand every connection the same payloads through
/// `MediaHub`; the connection's transport thread drains its pacer. For WHIP
/// it outlives a connection, so a reconnect continues the same streams.
final class MediaSenders: Sendable {
    let state: Mutex<MediaSendState>
    /// Time zero of every stream's RTP clock: audio and video stay aligned.
    let origin: MonotonicTimestamp
    /// RTP payload size: 1200-byte datagrams leave room for SRTP's tag.
    static let maxPayloadSize = 1100
    /// Wakes the transport thread when packets are queued. An event, not a
    /// closure: a closure handed out of `withLock` is re-wrapped (allocated)
    /// on every frame.
    private let wake: Mutex<WakeEvent?> = Mutex(nil)

    init(state: MediaSendState, origin: MonotonicTimestamp) {
        self.state = Mutex(state)
        self.origin = origin
    }

    /// The transport thread's wake-up, signalled whenever packets are queued (nil: none).
    func setWake(_ event: WakeEvent?) { wake.withLock { $0 = event } }

    /// Which kinds this connection sends now: set when its transport
    /// connects (asking for a keyframe), emptied when it goes away.
    func setSending(_ kinds: Set<MediaKind>) {
        state.withLock { s in
            s.sending = kinds
            s.waitingForKeyframe = kinds.contains(.video)
            if !kinds.isEmpty { s.keyframeRequested = true }
        }
    }

    var isSending: Bool { state.withLock { !$0.sending.isEmpty } }

    /// Queues one frame's payloads on this connection's stream of `kind`.
    /// Video waits for a keyframe after (re)connecting: frames the receiver
    /// could not decode are not sent at all.
    func send(_ batch: PayloadBatch, kind: MediaKind, rtpTimestamp timestamp: UInt32, isKeyframe: Bool) {
        let queued = state.withLock { s -> Bool in
            guard s.sending.contains(kind), let index = s.streamIndex(kind: kind) else { return false }
            if kind == .video {
                if s.waitingForKeyframe && !isKeyframe { return false }
                s.waitingForKeyframe = false
            }
            let urgent = kind == .audio
            s.streams[index].append(batch, timestamp: timestamp, isKeyframe: isKeyframe) { seq, size in
                s.pacer.enqueue(Pacer.Item(stream: index, sequence: seq, size: size, isRetransmission: false), urgent: urgent)
            }
            return true
        }
        if queued { wake.withLock { $0 }?.signal() }
    }
}
