// Opus (RFC 7587): an Opus RTP payload is the Opus packet itself, so what a
// subscriber "depacketizes" is the payload handed to OpusDecoder.decode, mono
// and stereo, into a buffer for Opus's longest packet (120 ms at 48 kHz); then
// loss concealment. The payloader must hand a frame through unchanged.
import Encoders
import FuzzSupport
import RTP

nonisolated(unsafe) private let mono = try! OpusDecoder(channels: 1)
nonisolated(unsafe) private let stereo = try! OpusDecoder(channels: 2)
nonisolated(unsafe) private var pcm = [Int16](repeating: 0, count: 5760 * 2)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    for decoder in [mono, stereo] {
        let samples = input.withUnsafeBytes { packet in
            pcm.withUnsafeMutableBufferPointer { try? decoder.decode(packet, into: $0) }
        }
        if let samples { check(samples <= 5760, "\(samples) samples from one packet") }
        _ = pcm.withUnsafeMutableBufferPointer { try? decoder.conceal(samplesPerChannel: 960, into: $0) }
    }
    guard !input.isEmpty else { return 0 }
    var payloader = OpusPayloader()
    var payloads: [[UInt8]] = []
    input.withUnsafeBytes { frame in
        payloader.packetize(frame, maxPayloadSize: max(1200, input.count)) { _, append in
            var payload: [UInt8] = []
            append(&payload)
            payloads.append(payload)
        }
    }
    check(payloads == [input], "the Opus payloader changed the frame")
    return 0
}

runFuzzer()
