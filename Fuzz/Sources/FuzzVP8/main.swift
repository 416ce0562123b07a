// VP8 (RFC 7741): the payload descriptor parser and the keyframe inspection
// the router and subscribers run on every first packet; and the payloader →
// descriptor round trip: every packet our payloader makes of a frame parses,
// and the frame comes back from the packets' descriptor sizes.
import FuzzSupport
import RTP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    if let descriptor = try? VP8PayloadDescriptor(parsing: input[...]) {
        check(descriptor.headerSize >= 1 && descriptor.headerSize <= input.count, "header size \(descriptor.headerSize) of \(input.count)")
    }
    if let inspection = KeyframeInspection.vp8(input[...]), let width = inspection.width, let height = inspection.height {
        check(inspection.isKeyframe && width < 0x4000 && height < 0x4000, "keyframe size \(width)x\(height)")
    }
    _ = KeyframeInspection.vp8KeyframeSize(input[...])

    // The first byte picks the packet size, the rest is the frame.
    guard let first = input.first else { return 0 }
    let maxPayloadSize = 5 + Int(first)
    let frame = Array(input.dropFirst())
    var payloader = VP8Payloader(firstPictureID: UInt16(first) << 7)
    var rebuilt: [UInt8] = []
    var packets = 0
    frame.withUnsafeBytes { raw in
        payloader.packetize(raw, maxPayloadSize: maxPayloadSize) { _, append in
            var payload: [UInt8] = []
            append(&payload)
            check(payload.count <= maxPayloadSize, "payload of \(payload.count) over \(maxPayloadSize)")
            guard let descriptor = try? VP8PayloadDescriptor(parsing: payload[...]) else {
                fatalError("our VP8 payload does not parse: \(payload)")
            }
            check(descriptor.startOfPartition == (packets == 0), "S bit on packet \(packets)")
            check(descriptor.pictureID == UInt16(first) << 7 & 0x7fff, "picture ID \(String(describing: descriptor.pictureID))")
            rebuilt += payload.dropFirst(descriptor.headerSize)
            packets += 1
        }
    }
    check(rebuilt == frame, "the frame did not survive payloading")
    return 0
}

runFuzzer()
