import RTP

/// One encoded frame cut into RTP payloads, once: every connection then
/// writes its own header (SSRC, payload type, sequence) before each payload.
/// The buffers are kept and reused from frame to frame. The router fills it
/// with a forwarded frame's payloads as they arrived (`removeAll`, `append`).
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
    /// The payloads' bytes together.
    var byteCount: Int { bytes.count }
    var isEmpty: Bool { ends.isEmpty }

    /// Replaces the batch with `frame`'s payloads.
    mutating func fill<P: RTPPayloader>(_ frame: UnsafeRawBufferPointer, payloader: inout P, maxPayloadSize: Int,
                                        temporalLayer: UInt8? = nil) {
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
        payloader.packetize(frame, temporalLayer: temporalLayer, maxPayloadSize: maxPayloadSize) { _, appendPayload in
            appendPayload(&bytes)
            ends.append(bytes.count)
        }
    }

    /// Empties the batch, keeping its buffers.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
    }

    /// Adds one payload as it is (a forwarded packet's).
    mutating func append(payload: ArraySlice<UInt8>) {
        bytes.append(contentsOf: payload)
        ends.append(bytes.count)
    }

    /// Payload `index` (the last one ends the frame).
    func withPayload<R>(_ index: Int, _ body: (ArraySlice<UInt8>) -> R) -> R {
        let start = index == 0 ? 0 : ends[index - 1]
        return body(bytes[start..<ends[index]])
    }
}

/// The router gathers a publisher's frames into a batch, payloads as they came.
extension PayloadBatch: FrameAssembly {
    mutating func beginFrame() { removeAll() }

    mutating func add(_ payload: ArraySlice<UInt8>) -> Bool {
        append(payload: payload)
        return true
    }
}
