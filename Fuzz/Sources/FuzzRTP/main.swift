// RTP: RTPPacket(parsing:) and the allocation-free RTPPacketView(parsing:)
// the router forwards with must agree on every input; a parsed packet
// written again (header, payload, padding) parses to the same packet.
import FuzzSupport
import RTP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let packet = try? RTPPacket(parsing: input[...])
    let view = try? RTPPacketView(parsing: input[...])
    check((packet == nil) == (view == nil), "RTPPacket and RTPPacketView disagree on \(input)")
    guard let packet, let view else { return 0 }
    let h = packet.header
    check(view.payloadType == h.payloadType && view.marker == h.marker && view.sequenceNumber == h.sequenceNumber
          && view.timestamp == h.timestamp && view.ssrc == h.ssrc, "header fields differ: \(h) vs \(view)")
    check(view.payload == packet.payload.indices, "payload ranges differ: \(view.payload) vs \(packet.payload.indices)")
    check(h.size + packet.payload.count + h.paddingLength == input.count, "sizes do not add up: \(h)")
    _ = OneByteExtension.find(4, in: h)

    var out: [UInt8] = []
    h.write(to: &out)
    out += packet.payload
    if h.paddingLength > 0 {
        out += [UInt8](repeating: 0, count: h.paddingLength - 1)
        out.append(UInt8(h.paddingLength))
    }
    check(out.count == input.count, "the written packet is \(out.count) bytes, the parsed one \(input.count)")
    guard let again = try? RTPPacket(parsing: out[...]) else { fatalError("the written packet does not parse: \(h)") }
    check(again.header == h && Array(again.payload) == Array(packet.payload), "round trip changed the packet: \(h) → \(again.header)")
    return 0
}

runFuzzer()
