// H.264 (RFC 6184): the depacketizer on a run of payloads (single NAL unit,
// STAP-A, FU-A, anything else), the keyframe and SPS inspection on each; and the
// payloader → depacketizer round trip on the input read as an Annex B frame.
import FuzzSupport
import RTP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    guard let first = input.first else { return 0 }

    // Payloads: each a 1-byte length, then that many bytes.
    let depacketizer = H264Depacketizer()
    var out: [UInt8] = []
    var i = 1
    while i < input.count {
        let n = Int(input[i])
        let payload = input[min(i + 1, input.count)..<min(i + 1 + n, input.count)]
        _ = KeyframeInspection.h264StartsKeyframe(payload)
        _ = KeyframeInspection.h264SequenceParameterSet(payload)
        let before = out.count
        do { try depacketizer.append(payload, to: &out) } catch {
            check(out.count == before, "a refused payload still wrote \(out.count - before) bytes")
        }
        i += 1 + n
    }

    // The same bytes as an Annex B frame: what the payloader makes of it, the
    // depacketizer turns back into its NAL units, each after a 4-byte start code.
    let frame = Array(input.dropFirst())
    let maxPayloadSize = 4 + Int(first)
    var expected: [UInt8] = []
    var usable = true
    frame.withUnsafeBytes { raw in
        for unit in AnnexBUnits(raw) {
            // Types 0 and 24...31 are not single NAL units a depacketizer takes as such.
            if !(1...23).contains(raw[unit.lowerBound] & 0x1f) { usable = false }
            expected += [0, 0, 0, 1] + Array(raw[unit])
        }
    }
    guard usable else { return 0 }
    var rebuilt: [UInt8] = []
    var sawLast = false
    frame.withUnsafeBytes { raw in
        var payloader = H264Payloader()
        payloader.packetize(raw, maxPayloadSize: maxPayloadSize) { isLast, append in
            check(!sawLast, "a packet after the last one")
            sawLast = isLast
            var payload: [UInt8] = []
            append(&payload)
            check(payload.count <= maxPayloadSize, "payload of \(payload.count) over \(maxPayloadSize)")
            do { try depacketizer.append(payload[...], to: &rebuilt) } catch {
                fatalError("our H.264 payload does not depacketize: \(error) \(payload)")
            }
        }
    }
    check(sawLast || expected.isEmpty, "no packet was marked last")
    check(rebuilt == expected, "the frame did not survive payloading")
    return 0
}

runFuzzer()
