import RTP

/// One encoded frame cut into RTP payloads, once: every connection then
/// writes its own header (SSRC, payload type, sequence) before each payload.
/// The buffers are kept and reused from frame to frame.
struct PayloadBatch {
    /// The payloads back to back.
    private(set) var bytes: [UInt8] = []
    /// Where each payload ends in `bytes`.
    private(set) var ends: [Int] = []

    init() {
        bytes.reserveCapacity(256 * 1024)
        ends.reserveCapacity(256)
    }

    var count: Int { ends.count }
    var isEmpty: Bool { ends.isEmpty }

    /// Replaces the batch with `frame`'s payloads.
    mutating func fill<P: RTPPayloader>(_ frame: UnsafeRawBufferPointer, payloader: inout P, maxPayloadSize: Int) {
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
        payloader.packetize(frame, maxPayloadSize: maxPayloadSize) { _, appendPayload in
            appendPayload(&bytes)
            ends.append(bytes.count)
        }
    }

    /// Payload `index` (the last one ends the frame).
    func withPayload<R>(_ index: Int, _ body: (ArraySlice<UInt8>) -> R) -> R {
        let start = index == 0 ? 0 : ends[index - 1]
        return body(bytes[start..<ends[index]])
    }
}
