import MediaTypes
import RTP
import Synchronization

/// The shared send side: encoder threads packetize into it, the transport
/// thread drains it. It outlives a connection, so a reconnect continues the
/// same streams (sequence numbers and timestamps carry on).
final class MediaSenders: Sendable {
    let state: Mutex<MediaSendState>
    /// Time zero of every stream's RTP clock: audio and video stay aligned.
    let origin: MonotonicTimestamp
    /// RTP payload size: 1200-byte datagrams leave room for SRTP's tag.
    static let maxPayloadSize = 1100
    /// Wakes the transport thread when packets are queued.
    private let notify: Mutex<(@Sendable () -> Void)?> = Mutex(nil)

    init(state: MediaSendState, origin: MonotonicTimestamp) {
        self.state = Mutex(state)
        self.origin = origin
    }

    /// The RTP time of stream `index` at a moment on the monotonic clock.
    func rtpTimestamp(stream index: Int, at time: MonotonicTimestamp) -> UInt32 {
        state.withLock { $0.streams[index].rtpTimestamp(at: time, origin: origin) }
    }

    func setNotify(_ body: (@Sendable () -> Void)?) { notify.withLock { $0 = body } }

    /// Packetizes one encoded frame of stream `index` and queues it for the pacer.
    func send<P: RTPPayloader>(_ frame: UnsafeRawBufferPointer, stream index: Int, rtpTimestamp timestamp: UInt32,
                               isKeyframe: Bool, payloader: inout P) {
        state.withLock { s in
            let urgent = s.streams[index].kind == .audio
            s.streams[index].packetize(frame, timestamp: timestamp, isKeyframe: isKeyframe, payloader: &payloader,
                                       maxPayloadSize: Self.maxPayloadSize) { seq, size in
                s.pacer.enqueue(Pacer.Item(stream: index, sequence: seq, size: size, isRetransmission: false), urgent: urgent)
            }
        }
        notify.withLock { $0 }?()
    }
}
