import Encoders
import MediaTypes
import PixelConversion
import RTP
import Testing

/// One encoded access unit as the tests keep it.
struct H264AccessUnit {
    var bytes: [UInt8]
    var isKeyframe: Bool
    var timestamp90kHz: Int64
    /// The index of the input frame, from the timestamp (frames are 1/30 s apart).
    var index: Int { Int((timestamp90kHz + 1_500) / 3_000) }

    /// The NAL units without their start codes.
    var units: [[UInt8]] {
        bytes.withUnsafeBytes { raw in AnnexBUnits(raw).map { Array(raw[$0]) } }
    }

    var unitTypes: [UInt8] { units.map { $0[0] & 0x1f } }
}

@Suite("H.264 encoder (OpenH264)")
struct H264EncoderTests {
    let size = FrameSize(width: 320, height: 240)

    /// Encodes test-pattern frames `range` 1/30 s apart. With `noise`, the
    /// picture below the barcode band gets fresh grain every frame: moving
    /// flat bars cost OpenH264 next to nothing, noise costs whatever it is allowed.
    func encodePattern(_ encoder: H264Encoder, _ range: Range<Int>, keyframeAt: Set<Int> = [],
                       size: FrameSize? = nil, noise: Bool = false) throws -> [H264AccessUnit] {
        let size = size ?? self.size
        let renderer = TestPatternRenderer(width: size.width, height: size.height)
        let frame = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        var out: [H264AccessUnit] = []
        for n in range {
            renderer.render(counter: UInt32(n), into: frame, framesPerSecond: 30)
            if noise { addGrain(to: frame, seed: UInt32(n), below: 2 * renderer.bandHeight) }
            frame.timestamp = MonotonicTimestamp(nanoseconds: 1_000_000_000 + Int64(n) * 33_333_333)
            try encoder.encode(frame, forceKeyframe: keyframeAt.contains(n)) { encoded in
                out.append(H264AccessUnit(bytes: Array(encoded.bytes), isKeyframe: encoded.isKeyframe,
                                          timestamp90kHz: encoded.timestamp90kHz))
            }
        }
        return out
    }

    func addGrain(to frame: VideoFrame, seed: UInt32, below firstRow: Int) {
        var state = seed &* 2_654_435_761 | 1
        let y = frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self)
        for row in firstRow..<frame.height {
            for x in 0..<frame.width {
                state = state &* 1_664_525 &+ 1_013_904_223
                let p = y + row * frame.yStride + x
                p.pointee = UInt8(clamping: Int(p.pointee) + Int(state >> 27) - 16)
            }
        }
    }

    @Test func decodedFramesCarryTheirCounters() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600)
        let units = try encodePattern(encoder, 0..<30)
        #expect(units.count == 30, "at this rate the rate control skips nothing")
        #expect(units.map(\.index) == Array(0..<30))
        let decoder = try H264Decoder()
        let picture = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        for unit in units {
            try unit.bytes.withUnsafeBytes { try decoder.decode($0, into: picture) }
            #expect(picture.width == size.width && picture.height == size.height)
            #expect(TestPatternCounter.decode(picture) == UInt32(unit.index), "frame \(unit.index)")
        }
    }

    @Test func theFirstAccessUnitIsSPSThenPPSThenIDR() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600)
        let units = try encodePattern(encoder, 0..<10)
        let first = try #require(units.first)
        #expect(first.isKeyframe)
        #expect(first.bytes.starts(with: [0, 0, 0, 1]), "Annex B with 4-byte start codes")
        #expect(first.unitTypes == [7, 8, 5])
        for unit in units.dropFirst() {
            #expect(!unit.isKeyframe)
            #expect(unit.unitTypes == [1], "frame \(unit.index): one slice, nothing else")
        }
    }

    @Test func theSPSSaysConstrainedBaselineAtTheChosenLevel() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600)
        #expect(encoder.levelIDC == 31 && encoder.profileLevelID == "42e01f")
        let sps = try #require(try encodePattern(encoder, 0..<1).first?.units.first)
        #expect(sps[0] & 0x1f == 7)
        #expect(sps[1] == 66, "profile_idc: baseline")
        // OpenH264 sets constraint_set0 and constraint_set1 but not set2: the SPS
        // says 42c01f where the SDP says 42e01f; both are constrained baseline.
        #expect(sps[2] == 0xc0, "constraint flags \(String(sps[2], radix: 16))")
        #expect(sps[3] == 31, "level_idc")
    }

    @Test("the SPS's picture size, cropping included, as a forwarder reads it (alone and in a STAP-A)",
          arguments: [FrameSize(width: 320, height: 240), FrameSize(width: 640, height: 360),
                      FrameSize(width: 320, height: 180), FrameSize(width: 1280, height: 720)])
    func theSPSGivesThePictureSize(_ size: FrameSize) throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600)
        let units = try #require(try encodePattern(encoder, 0..<1, size: size).first?.units)
        let sps = try #require(units.first)
        let parsed = try #require(KeyframeInspection.h264SequenceParameterSet(sps[...]))
        #expect(parsed.width == size.width && parsed.height == size.height)
        #expect(parsed.profileIDC == 66)
        // The same SPS and PPS aggregated in a STAP-A (RFC 6184 §5.7.1), as some senders packetize them.
        var stap: [UInt8] = [0x78]
        for unit in units.prefix(2) { stap += [UInt8(unit.count >> 8), UInt8(unit.count & 0xff)] + unit }
        #expect(KeyframeInspection.h264SequenceParameterSet(stap[...]) == parsed)
        // The IDR slice carries no SPS.
        #expect(KeyframeInspection.h264SequenceParameterSet(units[2][...]) == nil)
        // Cut anywhere before its end, it says nothing rather than something wrong.
        for length in 1..<max(2, sps.count - 1) {
            if let short = KeyframeInspection.h264SequenceParameterSet(sps.prefix(length)) {
                #expect(short == parsed, "a \(length)-byte prefix read as \(short)")
            }
        }
    }

    @Test func theLevelFollowsSizeAndRate() throws {
        let cases: [(FrameSize, Double, String)] = [
            (FrameSize(width: 640, height: 480), 30, "42e01f"),
            (FrameSize(width: 1280, height: 720), 30, "42e01f"),
            (FrameSize(width: 1280, height: 720), 60, "42e020"),
            (FrameSize(width: 1920, height: 1080), 30, "42e028"),
        ]
        for (size, rate, id) in cases {
            let encoder = try H264Encoder(size: size, framesPerSecond: rate, bitrateKbps: 1_000)
            #expect(encoder.profileLevelID == id, "\(size) at \(rate)")
        }
    }

    @Test func at1080pTheSPSSaysLevel4() throws {
        let size = FrameSize(width: 1920, height: 1080)
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 2_500)
        let first = try #require(try encodePattern(encoder, 0..<1, size: size).first)
        let sps = try #require(first.units.first)
        #expect(sps[0] & 0x1f == 7 && sps[1] == 66 && sps[3] == 40, "SPS \(sps.prefix(4))")
        let decoder = try H264Decoder()
        let picture = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        try first.bytes.withUnsafeBytes { try decoder.decode($0, into: picture) }
        #expect(picture.width == 1920 && picture.height == 1080, "cropped back from 1088 rows")
        #expect(TestPatternCounter.decode(picture) == 0)
    }

    @Test func keyframeOnRequestIsAnIDRWithItsParameterSets() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 1_000)
        let units = try encodePattern(encoder, 0..<20, keyframeAt: [10])
        let keyframes = units.filter(\.isKeyframe).map(\.index)
        #expect(keyframes == [0, 10])
        let requested = try #require(units.first { $0.index == 10 })
        #expect(requested.unitTypes == [7, 8, 5])
    }

    @Test func anIDRComesEveryKeyframeInterval() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600,
                                      keyframeInterval: .seconds(1))
        let units = try encodePattern(encoder, 0..<75)
        #expect(units.filter(\.isKeyframe).map(\.index) == [0, 30, 60])
        #expect(units.filter(\.isKeyframe).allSatisfy { $0.unitTypes == [7, 8, 5] })
    }

    @Test func theBitrateChangeShowsInTheOutput() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 2_000)
        let high = try encodePattern(encoder, 0..<60, noise: true)
        try encoder.setBitrate(kbps: 200)
        #expect(encoder.bitrateKbps == 200)
        let low = try encodePattern(encoder, 60..<120, noise: true)
        // The second second of each run, past the IDR and the rate control's settling.
        let highBytes = high.filter { $0.index >= 30 }.map(\.bytes.count).reduce(0, +)
        let lowBytes = low.filter { $0.index >= 90 }.map(\.bytes.count).reduce(0, +)
        #expect(lowBytes * 2 < highBytes, "\(lowBytes) bytes in 1 s at 200 kbps vs \(highBytes) at 2000")
        // And the low rate is about kept: 200 kbit/s is 25 000 bytes a second.
        #expect(lowBytes < 25_000 * 2, "\(lowBytes) bytes in 1 s at 200 kbps")
        // What was not skipped still decodes, counters and all.
        let decoder = try H264Decoder()
        let picture = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        for unit in high + low {
            try unit.bytes.withUnsafeBytes { try decoder.decode($0, into: picture) }
            #expect(TestPatternCounter.decode(picture) == UInt32(unit.index), "frame \(unit.index)")
        }
    }

    @Test func aRateAboveTheLevelIsCapped() throws {
        // Level 3.1's MaxBR is 14 000 x 1200 bit/s: OpenH264 refuses more.
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 20_000)
        #expect(encoder.maxBitrateKbps == 16_800 && encoder.bitrateKbps == 16_800)
        #expect(try encodePattern(encoder, 0..<2).count == 2)
        try encoder.setBitrate(kbps: 50_000)
        #expect(encoder.bitrateKbps == 16_800)
    }

    @Test func aFailedStartThrowsAndCleansUp() {
        #expect(throws: CodecError.self) {
            _ = try H264Encoder(size: FrameSize(width: 0, height: 0), framesPerSecond: 30, bitrateKbps: 300)
        }
    }

    @Test func aFrameOfAnotherSizeIsRefused() throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 300)
        let frame = VideoFrame(maxWidth: 640, maxHeight: 480)
        frame.setFormat(.nv12(width: 640, height: 480, framesPerSecond: 30))
        #expect(throws: CodecError.sizeMismatch(expected: size, got: FrameSize(width: 640, height: 480))) {
            try encoder.encode(frame) { _ in }
        }
    }

    /// Real access units through the H.264 payloader (RFC 6184, packetization
    /// mode 1) and back: the same NAL units come out, and they decode.
    @Test(arguments: [1_200, 300])
    func rtpRoundTrip(maxPayloadSize: Int) throws {
        let encoder = try H264Encoder(size: size, framesPerSecond: 30, bitrateKbps: 1_000)
        let units = try encodePattern(encoder, 0..<15, keyframeAt: [8], noise: true)
        var payloader = H264Payloader()
        let depacketizer = H264Depacketizer()
        let decoder = try H264Decoder()
        let picture = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        var sawFragments = false, sawAggregates = false
        for unit in units {
            var payloads: [[UInt8]] = []
            var marks: [Bool] = []
            unit.bytes.withUnsafeBytes { raw in
                payloader.packetize(raw, maxPayloadSize: maxPayloadSize) { isLast, append in
                    var payload: [UInt8] = []
                    append(&payload)
                    payloads.append(payload)
                    marks.append(isLast)
                }
            }
            #expect(payloads.allSatisfy { $0.count <= maxPayloadSize })
            #expect(marks == Array(repeating: false, count: marks.count - 1) + [true], "marker on the last packet only")
            sawFragments = sawFragments || payloads.contains { $0[0] & 0x1f == 28 }
            sawAggregates = sawAggregates || payloads.contains { $0[0] & 0x1f == 24 }
            var rebuilt: [UInt8] = []
            for payload in payloads { try depacketizer.append(payload[...], to: &rebuilt) }
            let again = H264AccessUnit(bytes: rebuilt, isKeyframe: unit.isKeyframe, timestamp90kHz: unit.timestamp90kHz)
            #expect(again.units == unit.units, "frame \(unit.index)")
            try rebuilt.withUnsafeBytes { try decoder.decode($0, into: picture) }
            #expect(TestPatternCounter.decode(picture) == UInt32(unit.index), "frame \(unit.index)")
        }
        #expect(sawAggregates, "SPS and PPS travel together in a STAP-A")
        #expect(sawFragments, "IDR pictures are larger than one packet")
    }
}
