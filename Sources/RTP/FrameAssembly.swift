/// Where `VideoJitterBuffer` hands a whole frame, payload by payload, in
/// order: the subscriber wants the codec's bitstream to decode, the router
/// the payloads as they came, to forward. Storage is the caller's and kept
/// from frame to frame.
package protocol FrameAssembly {
    /// Empties it for the next frame, keeping its storage.
    mutating func beginFrame()
    /// Adds the frame's next packet payload; false when the payload cannot
    /// be used (the frame is then given up).
    mutating func add(_ payload: ArraySlice<UInt8>) -> Bool
}

/// A frame as its codec's bitstream: VP8 data without the payload
/// descriptors, or H.264 in Annex B.
struct Bitstream: FrameAssembly {
    let codec: VideoJitterBuffer.Codec
    let depacketizer: H264Depacketizer
    var bytes: [UInt8] = []

    mutating func beginFrame() { bytes.removeAll(keepingCapacity: true) }

    mutating func add(_ payload: ArraySlice<UInt8>) -> Bool {
        switch codec {
        case .vp8:
            guard let descriptor = try? VP8PayloadDescriptor(parsing: payload) else { return false }
            bytes.append(contentsOf: payload.dropFirst(descriptor.headerSize))
            return true
        case .h264:
            do { try depacketizer.append(payload, to: &bytes) } catch { return false }
            return true
        }
    }
}
