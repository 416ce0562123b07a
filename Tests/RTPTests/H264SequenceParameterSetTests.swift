import RTP
import Testing

/// Writes an SPS bit by bit (ITU-T H.264 §7.3.2.1.1), with emulation prevention,
/// for the cases an encoder here never makes: High profile with a scaling list.
private struct SPSWriter {
    private var bits: [Bool] = []

    mutating func u(_ value: UInt64, _ count: Int) {
        for shift in stride(from: count - 1, through: 0, by: -1) { bits.append(value >> UInt64(shift) & 1 == 1) }
    }

    mutating func ue(_ value: UInt64) {
        let x = value + 1
        let length = 64 - x.leadingZeroBitCount
        u(0, length - 1)
        u(x, length)
    }

    mutating func se(_ value: Int64) { ue(value > 0 ? UInt64(2 * value - 1) : UInt64(-2 * value)) }

    /// The NAL unit: header 0x67, the bits, the stop bit, with 00 00 0x escaped as 00 00 03 0x.
    func nalUnit() -> [UInt8] {
        var all = bits + [true]
        while all.count % 8 != 0 { all.append(false) }
        var out: [UInt8] = [0x67]
        var zeros = 0
        for index in stride(from: 0, to: all.count, by: 8) {
            let byte = all[index..<index + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) }
            if zeros >= 2 && byte <= 3 {
                out.append(3)
                zeros = 0
            }
            out.append(byte)
            zeros = byte == 0 ? zeros + 1 : 0
        }
        return out
    }
}

/// A High-profile 640x480 SPS whose first scaling list has one delta_scale.
private func highProfileSPS(deltaScale: Int64) -> [UInt8] {
    var w = SPSWriter()
    w.u(100, 8); w.u(0, 8); w.u(31, 8)   // profile_idc High, constraints, level 3.1
    w.ue(0)                              // seq_parameter_set_id
    w.ue(1)                              // chroma_format_idc 4:2:0
    w.ue(0); w.ue(0); w.u(0, 1)          // bit depths, qpprime_y_zero_transform_bypass
    w.u(1, 1)                            // seq_scaling_matrix_present_flag
    w.u(1, 1); w.se(deltaScale)          // list 0 present: 8 + delta is 0, so the list ends here
    for _ in 1..<8 { w.u(0, 1) }         // lists 1-7 absent
    w.ue(0)                              // log2_max_frame_num_minus4
    w.ue(2)                              // pic_order_cnt_type 2
    w.ue(1); w.u(0, 1)                   // max_num_ref_frames, gaps allowed
    w.ue(39); w.ue(29)                   // 40 x 30 macroblocks
    w.u(1, 1); w.u(1, 1); w.u(0, 1)      // frame_mbs_only, direct_8x8_inference, no cropping
    w.u(0, 1)                            // vui_parameters_present_flag
    return w.nalUnit()
}

@Suite("H.264 SPS")
struct H264SequenceParameterSetTests {
    @Test("a High-profile SPS with a scaling list gives its picture size")
    func scalingList() throws {
        let sps = try #require(H264SequenceParameterSet(nalUnit: highProfileSPS(deltaScale: -8)[...]))
        #expect(sps.width == 640 && sps.height == 480 && sps.profileIDC == 100)
    }

    @Test("a delta_scale outside -128...127 is a broken SPS, not an overflow", arguments: [128, 2_147_483_647, -2_147_483_647] as [Int64])
    func deltaScaleOutOfRange(delta: Int64) {
        #expect(H264SequenceParameterSet(nalUnit: highProfileSPS(deltaScale: delta)[...]) == nil)
    }
}
