/// The picture size an H.264 sequence parameter set announces (ITU-T H.264
/// §7.3.2.1.1, with the frame cropping of §7.4.2.1.1), read without decoding
/// anything else: what a forwarder reports as a stream's videoDimensions.
public struct H264SequenceParameterSet: Sendable, Equatable {
    public let profileIDC: UInt8
    public let levelIDC: UInt8
    public let width: Int
    public let height: Int

    /// Parses one SPS NAL unit (its header byte first, no start code); nil when
    /// it is not an SPS or ends (or overflows) before the size is known.
    public init?(nalUnit: ArraySlice<UInt8>) {
        guard let header = nalUnit.first, header & 0x1f == 7 else { return nil }
        var bits = RBSPBitReader(nalUnit.dropFirst())
        guard let profile = bits.bits(8), bits.bits(8) != nil, let level = bits.bits(8), bits.ue() != nil else { return nil }
        var chromaFormat = 1
        let highProfiles: Set<UInt32> = [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]
        if highProfiles.contains(profile) {
            guard let format = bits.ue(), format <= 3 else { return nil }
            chromaFormat = Int(format)
            if chromaFormat == 3 { guard bits.bits(1) != nil else { return nil } }   // separate_colour_plane_flag
            guard bits.ue() != nil, bits.ue() != nil, bits.bits(1) != nil,         // bit depths, qpprime bypass
                  let scalingMatrix = bits.bits(1) else { return nil }
            if scalingMatrix == 1 {
                for list in 0..<(chromaFormat != 3 ? 8 : 12) {
                    guard let present = bits.bits(1) else { return nil }
                    if present == 1 { guard bits.skipScalingList(size: list < 6 ? 16 : 64) else { return nil } }
                }
            }
        }
        guard bits.ue() != nil, let pocType = bits.ue() else { return nil }   // log2_max_frame_num_minus4
        switch pocType {
        case 0:
            guard bits.ue() != nil else { return nil }
        case 1:
            guard bits.bits(1) != nil, bits.se() != nil, bits.se() != nil, let cycle = bits.ue(), cycle <= 255 else { return nil }
            for _ in 0..<cycle { guard bits.se() != nil else { return nil } }
        case 2:
            break
        default:
            return nil
        }
        guard bits.ue() != nil, bits.bits(1) != nil,                          // max_num_ref_frames, gaps allowed
              let widthInMBs = bits.ue(), let heightInMapUnits = bits.ue(),
              let frameMBsOnly = bits.bits(1) else { return nil }
        if frameMBsOnly == 0 { guard bits.bits(1) != nil else { return nil } }  // mb_adaptive_frame_field_flag
        guard bits.bits(1) != nil, let cropping = bits.bits(1) else { return nil }   // direct_8x8_inference_flag
        var crop = (left: 0, right: 0, top: 0, bottom: 0)
        if cropping == 1 {
            guard let l = bits.ue(), let r = bits.ue(), let t = bits.ue(), let b = bits.ue() else { return nil }
            crop = (Int(l), Int(r), Int(t), Int(b))
        }
        // Sizes beyond what any level allows are a broken SPS, not a picture.
        guard widthInMBs < 1024, heightInMapUnits < 1024 else { return nil }
        let fieldFactor = 2 - Int(frameMBsOnly)
        let (subWidth, subHeight) = chromaFormat == 1 ? (2, 2) : chromaFormat == 2 ? (2, 1) : (1, 1)
        let cropUnitX = chromaFormat == 0 ? 1 : subWidth
        let cropUnitY = (chromaFormat == 0 ? 1 : subHeight) * fieldFactor
        let width = (Int(widthInMBs) + 1) * 16 - (crop.left + crop.right) * cropUnitX
        let height = fieldFactor * (Int(heightInMapUnits) + 1) * 16 - (crop.top + crop.bottom) * cropUnitY
        guard width > 0, height > 0 else { return nil }
        profileIDC = UInt8(profile)
        levelIDC = UInt8(level)
        self.width = width
        self.height = height
    }
}

/// Bits of a NAL unit's payload, most significant first, with the emulation
/// prevention bytes (00 00 03) taken out as they are read. Every read is
/// bounded: nil once the bytes run out.
struct RBSPBitReader {
    private let bytes: ArraySlice<UInt8>
    private var index: Int
    private var zeros = 0          // zero bytes just before `index`, for emulation prevention
    private var current: UInt8 = 0
    private var bitsLeft = 0

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    private mutating func nextByte() -> UInt8? {
        guard index < bytes.endIndex else { return nil }
        var byte = bytes[index]
        index += 1
        if zeros >= 2 && byte == 3 {   // an emulation prevention byte: skip it
            zeros = 0
            guard index < bytes.endIndex else { return nil }
            byte = bytes[index]
            index += 1
        }
        zeros = byte == 0 ? zeros + 1 : 0
        return byte
    }

    mutating func bits(_ count: Int) -> UInt32? {
        var value: UInt32 = 0
        for _ in 0..<count {
            if bitsLeft == 0 {
                guard let byte = nextByte() else { return nil }
                current = byte
                bitsLeft = 8
            }
            bitsLeft -= 1
            value = value << 1 | UInt32((current >> UInt8(bitsLeft)) & 1)
        }
        return value
    }

    /// Exp-Golomb, unsigned (ue(v)); nil past 31 leading zeros.
    mutating func ue() -> UInt32? {
        var zeros = 0
        while true {
            guard let bit = bits(1) else { return nil }
            if bit == 1 { break }
            zeros += 1
            if zeros > 31 { return nil }
        }
        guard zeros > 0 else { return 0 }
        guard let rest = bits(zeros) else { return nil }
        return UInt32((UInt64(1) << UInt64(zeros)) - 1 + UInt64(rest))
    }

    /// Exp-Golomb, signed (se(v)).
    mutating func se() -> Int32? {
        guard let code = ue() else { return nil }
        let magnitude = Int32((code + 1) / 2)
        return code % 2 == 1 ? magnitude : -magnitude
    }

    /// A scaling list's delta_scale values (§7.3.2.1.1.1), read and dropped.
    mutating func skipScalingList(size: Int) -> Bool {
        var last: Int32 = 8, next: Int32 = 8
        for _ in 0..<size where next != 0 {
            // delta_scale is -128...127 (§7.4.2.1.1.1); a larger one is a broken SPS and would overflow the sum.
            guard let delta = se(), (-128...127).contains(delta) else { return false }
            next = (last + delta + 256) % 256
            if next != 0 { last = next }
        }
        return true
    }
}
