// RTCP: RTCPPacket.parseCompound on any bytes (what the publisher and the
// router read from receivers); what it parses and this side can write must
// reach a fixed point after one write → parse round (writing normalises NACK
// lists, REMB mantissas and long CNAMEs).
import FuzzSupport
import RTP

private func writable(_ packet: RTCPPacket) -> Bool {
    if case .other = packet { return false }
    return true
}

private func written(_ packets: [RTCPPacket]) -> [UInt8] {
    var out: [UInt8] = []
    for packet in packets { packet.write(to: &out) }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    guard let packets = try? RTCPPacket.parseCompound(input[...]) else { return 0 }
    for case .receiverReport(_, let reports) in packets {
        for report in reports { _ = report.roundTripSeconds(arrivedAtCompactNTP: 0x1234_5678) }
    }
    let ours = packets.filter(writable)
    let once: [RTCPPacket]
    do { once = try RTCPPacket.parseCompound(written(ours)[...]) } catch {
        fatalError("our RTCP does not parse: \(error)\n\(ours)")
    }
    check(once.count == ours.count, "\(ours.count) packets written, \(once.count) read back")
    let twice: [RTCPPacket]
    do { twice = try RTCPPacket.parseCompound(written(once)[...]) } catch {
        fatalError("our RTCP does not parse: \(error)\n\(once)")
    }
    check(twice == once, "no fixed point after a round:\n\(once)\n---\n\(twice)")
    return 0
}

runFuzzer()
