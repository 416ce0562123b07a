import MediaTypes
import RTP

public enum MediaKind: String, Sendable, Codable { case audio, video }

/// One outgoing RTP stream (one SSRC): numbers the packets a payloader cuts,
/// keeps them in a history for NACKs, and counts what was sent for the
/// sender reports and the stats.
struct RTPStreamSender {
    let kind: MediaKind
    let ssrc: UInt32
    /// The simulcast layer it carries (0 the smallest; 0 without simulcast).
    let spatialLayer: UInt8
    var payloadType: UInt8
    let clockRate: Int
    /// Random start, as RFC 3550 asks, so restarts are not mistaken for replays.
    private(set) var sequence: UInt16
    private let timestampBase: UInt32
    private(set) var history: PacketHistory

    // Counters (RFC 3550 sender info, W3C outbound-rtp stats).
    private(set) var packetsSent: UInt64 = 0
    private(set) var payloadBytesSent: UInt64 = 0
    private(set) var bytesSent: UInt64 = 0
    private(set) var framesSent: UInt64 = 0
    private(set) var keyframesSent: UInt64 = 0
    private(set) var packetsRetransmitted: UInt64 = 0
    private(set) var bytesRetransmitted: UInt64 = 0
    private(set) var lastRTPTimestamp: UInt32 = 0
    private(set) var hasSent = false

    init(kind: MediaKind, ssrc: UInt32, payloadType: UInt8, clockRate: Int, historySize: Int,
         firstSequence: UInt16 = .random(in: 0...0x7fff), timestampBase: UInt32 = .random(in: 0...UInt32.max),
         spatialLayer: UInt8 = 0) {
        self.kind = kind
        self.ssrc = ssrc
        self.spatialLayer = spatialLayer
        self.payloadType = payloadType
        self.clockRate = clockRate
        sequence = firstSequence
        self.timestampBase = timestampBase
        history = PacketHistory(capacity: historySize)
    }

    /// RTP time of a moment on the monotonic clock, counted from `origin`.
    func rtpTimestamp(at time: MonotonicTimestamp, origin: MonotonicTimestamp) -> UInt32 {
        RTPClock.timestamp(at: time, origin: origin, base: timestampBase, clockRate: clockRate)
    }

    /// Numbers one frame's payloads (cut once for every connection) into
    /// packets stored in the history; `enqueue` gets each packet's sequence
    /// number and size, in order. `headerExtension` (video orientation) goes
    /// on every packet of the frame, so a receiver that lost some still has it.
    mutating func append(_ batch: PayloadBatch, timestamp: UInt32, isKeyframe: Bool,
                         headerExtension: OneByteExtension? = nil,
                         enqueue: (_ sequence: UInt16, _ size: Int) -> Void) {
        let markLast = kind == .video   // video: marker on a frame's last packet
        let pt = payloadType, ts = timestamp, ssrc = ssrc
        for index in 0..<batch.count {
            let seq = sequence
            sequence &+= 1
            var size = 0
            history.store(sequence: seq) { out in
                var header = RTPHeader(payloadType: pt, sequenceNumber: seq, timestamp: ts, ssrc: ssrc,
                                       marker: markLast && index == batch.count - 1)
                header.oneByteExtension = headerExtension
                header.write(to: &out)
                batch.withPayload(index) { out.append(contentsOf: $0) }
                size = out.count
            }
            enqueue(seq, size)
        }
        framesSent += 1
        if isKeyframe { keyframesSent += 1 }
        lastRTPTimestamp = timestamp
        hasSent = true
    }

    /// Counts a packet that really left (first send or retransmission).
    mutating func countSent(size: Int, retransmission: Bool) {
        packetsSent += 1
        bytesSent += UInt64(size)
        payloadBytesSent += UInt64(max(0, size - RTPHeader.fixedSize))
        if retransmission {
            packetsRetransmitted += 1
            bytesRetransmitted += UInt64(size)
        }
    }
}
