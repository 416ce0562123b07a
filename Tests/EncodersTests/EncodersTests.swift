import Encoders
import Foundation
import MediaTypes
import PixelConversion
import Testing

@Suite("VP8 encoder (libvpx)")
struct VP8EncoderTests {
    let size = FrameSize(width: 320, height: 240)

    /// Encodes `count` test-pattern frames 1/30 s apart; returns (bytes, keyframe) per frame.
    func encodePattern(_ encoder: VP8Encoder, count: Int, keyframeAt: Set<Int> = []) throws -> [([UInt8], Bool)] {
        let renderer = TestPatternRenderer(width: size.width, height: size.height)
        let frame = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        var out: [([UInt8], Bool)] = []
        for n in 0..<count {
            renderer.render(counter: UInt32(n), into: frame, framesPerSecond: 30)
            frame.timestamp = MonotonicTimestamp(nanoseconds: 1_000_000_000 + Int64(n) * 33_333_333)
            try encoder.encode(frame, forceKeyframe: keyframeAt.contains(n)) { encoded in
                out.append((Array(encoded.bytes), encoded.isKeyframe))
            }
        }
        return out
    }

    @Test func decodedFramesCarryTheirCounters() throws {
        let encoder = try VP8Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600)
        let frames = try encodePattern(encoder, count: 30)
        #expect(frames.count == 30, "real-time VP8 at this rate drops nothing")
        #expect(frames[0].1, "the first frame is a keyframe")
        #expect(frames.dropFirst().filter(\.1).isEmpty, "no keyframe unless asked or due")
        let decoder = try VP8Decoder()
        let picture = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        for (n, (bytes, _)) in frames.enumerated() {
            try bytes.withUnsafeBytes { try decoder.decode($0, into: picture) }
            #expect(picture.width == size.width && picture.height == size.height)
            #expect(TestPatternCounter.decode(picture) == UInt32(n), "frame \(n)")
        }
    }

    /// Two temporal layers: every other frame is layer 1 and nothing refers
    /// to it, so the base frames decode the same with or without them (what
    /// a router relies on when it sends a subscriber half the frames).
    @Test func upperLayerFramesCanBeLeftOut() throws {
        let encoder = try VP8Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600, temporalLayers: 2)
        let renderer = TestPatternRenderer(width: size.width, height: size.height)
        let input = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        var frames: [(bytes: [UInt8], keyframe: Bool, layer: UInt8)] = []
        for n in 0..<40 {
            renderer.render(counter: UInt32(n), into: input, framesPerSecond: 30)
            input.timestamp = MonotonicTimestamp(nanoseconds: 1_000_000_000 + Int64(n) * 33_333_333)
            try encoder.encode(input, forceKeyframe: n == 21) { encoded in
                frames.append((Array(encoded.bytes), encoded.isKeyframe, encoded.temporalLayer))
            }
        }
        #expect(frames.count == 40)
        // Base, upper, base, …; a keyframe (asked for on an upper slot) is a base frame and starts again.
        #expect(frames[0..<21].map(\.layer) == (0..<21).map { UInt8($0 % 2) })
        #expect(frames[21].keyframe && frames[21].layer == 0 && frames[22].layer == 1 && frames[23].layer == 0)

        let all = try VP8Decoder(), baseOnly = try VP8Decoder()
        let fromAll = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        let fromBase = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        var compared = 0
        for (n, frame) in frames.enumerated() {
            try frame.bytes.withUnsafeBytes { try all.decode($0, into: fromAll) }
            guard frame.layer == 0 else { continue }
            try frame.bytes.withUnsafeBytes { try baseOnly.decode($0, into: fromBase) }
            #expect(TestPatternCounter.decode(fromBase) == UInt32(n), "frame \(n)")
            let same = fromAll.yPlane.prefix(size.width * size.height).elementsEqual(fromBase.yPlane.prefix(size.width * size.height))
            #expect(same, "base frame \(n) decodes the same without the upper layer")
            compared += 1
        }
        #expect(compared == 21)
    }

    @Test func keyframeOnRequestAndBitrateChanges() throws {
        let encoder = try VP8Encoder(size: size, framesPerSecond: 30, bitrateKbps: 1500)
        let before = try encodePattern(encoder, count: 20, keyframeAt: [10])
        #expect(before[10].1 && !before[9].1 && !before[11].1)
        try encoder.setBitrate(kbps: 100)
        #expect(encoder.bitrateKbps == 100)
        let after = try encodePattern(encoder, count: 60)
        // The rate control follows: the second half of the low-rate run is much smaller.
        let highBytes = before[12..<20].map(\.0.count).reduce(0, +)
        let lowBytes = after[52..<60].map(\.0.count).reduce(0, +)
        #expect(lowBytes * 2 < highBytes, "\(lowBytes) bytes at 100 kbps vs \(highBytes) at 1500")
    }

    @Test func threadsFollowSizeAndCores() {
        let vga = FrameSize(width: 640, height: 480), hd = FrameSize(width: 1280, height: 720)
        let fullHD = FrameSize(width: 1920, height: 1080)
        // Fewer than 3 cores: one thread at any size (a second one spins while its neighbour is preempted).
        #expect(VP8Encoder.threadCount(for: fullHD, processors: 2) == 1)
        #expect(VP8Encoder.threadCount(for: hd, processors: 1) == 1)
        // VGA and below: one thread however many cores.
        #expect(VP8Encoder.threadCount(for: vga, processors: 16) == 1)
        #expect(VP8Encoder.threadCount(for: hd, processors: 3) == 2)
        #expect(VP8Encoder.threadCount(for: fullHD, processors: 6) == 3)
        #expect(VP8Encoder.threadCount(for: fullHD, processors: 8) == 4)
    }

    @Test(arguments: [1, 2])
    func encodesWithTheThreadsItWasGiven(threads: Int) throws {
        let encoder = try VP8Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600, threads: threads)
        #expect(encoder.threads == threads)
        let frames = try encodePattern(encoder, count: 5)
        let decoder = try VP8Decoder()
        let picture = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        for (n, (bytes, _)) in frames.enumerated() {
            try bytes.withUnsafeBytes { try decoder.decode($0, into: picture) }
            #expect(TestPatternCounter.decode(picture) == UInt32(n), "frame \(n) with \(threads) threads")
        }
    }

    @Test func aFrameOfAnotherSizeIsRefused() throws {
        let encoder = try VP8Encoder(size: size, framesPerSecond: 30, bitrateKbps: 300)
        let frame = VideoFrame(maxWidth: 640, maxHeight: 480)
        frame.setFormat(.nv12(width: 640, height: 480, framesPerSecond: 30))
        #expect(throws: CodecError.sizeMismatch(expected: size, got: FrameSize(width: 640, height: 480))) {
            try encoder.encode(frame) { _ in }
        }
    }
}

@Suite("Opus encoder (libopus)")
struct OpusEncoderTests {
    @Test func aToneSurvivesTheRoundTrip() throws {
        let encoder = try OpusEncoder(channels: 1, bitrate: 32_000)
        let decoder = try OpusDecoder(channels: 1)
        let rate = Double(OpusEncoder.sampleRate)
        var decoded: [Int16] = []
        var packetSizes: [Int] = []
        var pcm = [Int16](repeating: 0, count: encoder.frameSamples)
        var out = [Int16](repeating: 0, count: 5760)
        for frame in 0..<50 {   // 1 s of 1 kHz at half scale
            for i in 0..<pcm.count {
                let t = Double(frame * pcm.count + i) / rate
                pcm[i] = Int16(16_384 * sin(2 * Double.pi * 1000 * t))
            }
            try pcm.withUnsafeBufferPointer { samples in
                try encoder.encode(samples) { packet in
                    packetSizes.append(packet.count)
                    let n = try! out.withUnsafeMutableBufferPointer { try decoder.decode(packet, into: $0) }
                    decoded += out[0..<n]
                }
            }
        }
        #expect(packetSizes.count == 50 && decoded.count == 48_000)
        // 32 kbit/s is 80 bytes per 20 ms on average.
        let average = packetSizes.reduce(0, +) / packetSizes.count
        #expect(average > 40 && average < 160, "average packet \(average) bytes")
        // The second half (past the codec's start-up): 1 kHz, about the same level.
        let tail = decoded[24_000...].map(Double.init)
        var crossings = 0
        for i in tail.indices.dropFirst() where (tail[i - 1] < 0) != (tail[i] < 0) { crossings += 1 }
        #expect(abs(crossings - 1000) <= 10, "\(crossings) zero crossings in 0.5 s")
        let rms = (tail.map { $0 * $0 }.reduce(0, +) / Double(tail.count)).squareRoot()
        #expect(abs(rms - 16_384 / 2.0.squareRoot()) < 16_384 * 0.15, "rms \(rms)")
    }

    /// Found by FuzzOpus (the empty input): an empty RTP payload made libopus
    /// conceal a whole buffer, 11520 samples (240 ms) from a mono decoder whose
    /// buffer is sized for stereo, and the subscriber then concealed that much per loss.
    @Test func anEmptyPacketIsRefusedNotConcealed() throws {
        let decoder = try OpusDecoder(channels: 1)
        var out = [Int16](repeating: 0, count: 5760 * 2)
        #expect(throws: CodecError.decodeFailed(codec: "Opus", reason: "empty packet")) {
            try out.withUnsafeMutableBufferPointer { pcm in
                try [UInt8]().withUnsafeBytes { try decoder.decode($0, into: pcm) }
            }
        }
        // Concealment stays the caller's choice of length.
        let n = try out.withUnsafeMutableBufferPointer { try decoder.conceal(samplesPerChannel: 960, into: $0) }
        #expect(n == 960)
    }
}
