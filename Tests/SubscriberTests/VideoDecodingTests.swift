import Encoders
import Foundation
import Logging
import MediaTypes
import PixelConversion
import RTP
import Testing
@testable import Subscriber

/// Holds the first frame until let go (at most 10 s), then takes the rest;
/// reads the test pattern's counter from each frame it is given.
private final class HeldRenderer: VideoRenderer, @unchecked Sendable {
    let counters = PThreadLocked<[UInt32]>([])
    let gate = DispatchSemaphore(value: 0)
    let letGo = PThreadLocked(false)
    /// Nobody let go within 10 s: whoever handed the frame over waited for it.
    let timedOut = PThreadLocked(false)

    func render(_ frame: VideoFrame) throws(RenderError) {
        let first = counters.withLock { $0.isEmpty }
        if first, gate.wait(timeout: .now() + 10) == .timedOut { timedOut.withLock { $0 = true } }
        counters.withLock { $0.append(TestPatternCounter.decode(frame) ?? .max) }
    }

    func finish() throws(RenderError) {}

    func release() {
        letGo.withLock { $0 = true }
        gate.signal()
    }
}

@Suite("Subscriber video decoding, off the connection's thread")
struct VideoDecodingTests {
    let size = FrameSize(width: 320, height: 240)

    /// `count` test-pattern frames as VP8 (keyframes at 0 and at `keyframeAt`), each cut into RTP packets.
    private func packets(count: Int, keyframeAt: Int) throws -> [[[UInt8]]] {
        let encoder = try VP8Encoder(size: size, framesPerSecond: 30, bitrateKbps: 600)
        let pattern = TestPatternRenderer(width: size.width, height: size.height)
        let frame = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        var payloader = VP8Payloader()
        var sequence: UInt16 = 1000
        var frames: [[[UInt8]]] = []
        for n in 0..<count {
            pattern.render(counter: UInt32(n), into: frame, framesPerSecond: 30)
            frame.timestamp = MonotonicTimestamp(nanoseconds: 1_000_000_000 + Int64(n) * 33_333_333)
            var encoded: [UInt8] = []
            try encoder.encode(frame, forceKeyframe: n == keyframeAt) { encoded = Array($0.bytes) }
            var rtp: [[UInt8]] = []
            encoded.withUnsafeBytes { bytes in
                payloader.packetize(bytes, maxPayloadSize: 1200) { isLast, appendPayload in
                    var packet: [UInt8] = [0x80, 96 | (isLast ? 0x80 : 0), UInt8(sequence >> 8), UInt8(sequence & 0xff)]
                    let timestamp = UInt32(n) * 3000
                    packet += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: timestamp >> $0) }
                    packet += [0x12, 0x34, 0x56, 0x78]   // SSRC
                    appendPayload(&packet)
                    rtp.append(packet)
                    sequence &+= 1
                }
            }
            frames.append(rtp)
        }
        return frames
    }

    @Test("a renderer that stalls never holds up the packets: frames behind it are dropped, a keyframe is asked for, and decoding resumes at it")
    func aStalledRendererDoesNotStallReceiving() throws {
        let frames = try packets(count: 20, keyframeAt: 12)
        let renderer = HeldRenderer()
        let media = ReceivedMedia(video: renderer, audio: nil, maxBitrate: 1_000_000, logger: Logger(label: "test")) { _ in }
        try media.configure(ReceivedMedia.Negotiated(videoPayloadType: 96, videoCodec: .vp8, videoCodecName: "VP8"))
        var feedback: [RTCPPacket] = []
        var now = 1.0
        func feed(_ range: Range<Int>) {
            for n in range {
                for packet in frames[n] { media.receive(rtp: packet[...], now: now, feedback: &feedback) }
                now += 1.0 / 30
            }
        }
        // The first frame's render is held: 3 or 4 more wait in the slots (4, once the decode
        // thread has let go of the first one's), the next is dropped, and the jitter buffer
        // gives up the rest until the keyframe it asks for.
        feed(0..<12)
        #expect(!renderer.letGo.withLock { $0 } && !renderer.timedOut.withLock { $0 }, "receiving waited for the renderer")
        let pli = feedback.contains { if case .pictureLossIndication = $0 { true } else { false } }
        #expect(pli, "a keyframe is asked for: \(feedback)")
        let dropped = try #require(media.stats.video).framesDropped
        #expect(dropped >= 7, "frames 5-11 dropped: \(dropped)")
        renderer.release()
        // Let the decoder catch up, as it would in the 33 ms between live frames (10 s at most).
        for _ in 0..<1000 where renderer.counters.withLock({ $0.count }) < 4 || media.stats.video?.framesDecoded != UInt64(renderer.counters.withLock { $0.count }) {
            usleep(10_000)
        }
        // Then live pace: each frame decoded before the next comes.
        for n in 12..<20 {
            let before = media.stats.video?.framesDecoded ?? 0
            feed(n..<n + 1)
            for _ in 0..<1000 where (media.stats.video?.framesDecoded ?? 0) == before { usleep(10_000) }
        }
        try media.finishRenderers()
        let rendered = renderer.counters.withLock { $0 }
        let held = rendered.prefix { $0 < 12 }.count
        #expect((4...5).contains(held) && rendered == Array(0..<UInt32(held)) + Array(12..<20), "\(rendered)")
        let video = try #require(media.stats.video)
        #expect(video.framesDecoded == UInt64(held + 8) && video.keyframesDecoded == 2 && video.decodeErrors == 0, "\(video)")
        #expect(video.width == 320 && video.height == 240)
    }
}
