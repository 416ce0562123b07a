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
        let slots = VideoDecoding.slotCount
        let keyframe = slots + 6
        let frames = try packets(count: keyframe + 8, keyframeAt: keyframe)
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
        // The first frame's render is held: the slots fill behind it (all of them once the
        // decode thread has let go of the first one's, one fewer before), the next frame is
        // dropped, and the jitter buffer gives up the rest until the keyframe it asks for.
        feed(0..<keyframe)
        #expect(!renderer.letGo.withLock { $0 } && !renderer.timedOut.withLock { $0 }, "receiving waited for the renderer")
        let pli = feedback.contains { if case .pictureLossIndication = $0 { true } else { false } }
        #expect(pli, "a keyframe is asked for: \(feedback)")
        let dropped = try #require(media.stats.video).framesDropped
        #expect(dropped >= UInt64(keyframe - 2 - slots), "frames behind the slots dropped: \(dropped)")
        renderer.release()
        // Let the decoder catch up, as it would between live frames (10 s at most).
        for _ in 0..<1000 where renderer.counters.withLock({ $0.count }) < slots || media.stats.video?.framesDecoded != UInt64(renderer.counters.withLock { $0.count }) {
            usleep(10_000)
        }
        // Then live pace: each frame decoded before the next comes.
        for n in keyframe..<frames.count {
            let before = media.stats.video?.framesDecoded ?? 0
            feed(n..<n + 1)
            for _ in 0..<1000 where (media.stats.video?.framesDecoded ?? 0) == before { usleep(10_000) }
        }
        try media.finishRenderers()
        let rendered = renderer.counters.withLock { $0 }
        let held = rendered.prefix { $0 < UInt32(keyframe) }.count
        #expect((slots...slots + 1).contains(held) && rendered == Array(0..<UInt32(held)) + Array(UInt32(keyframe)..<UInt32(frames.count)),
                "\(rendered)")
        let video = try #require(media.stats.video)
        #expect(video.framesDecoded == UInt64(held + frames.count - keyframe) && video.keyframesDecoded == 2 && video.decodeErrors == 0,
                "\(video)")
        #expect(video.width == 320 && video.height == 240)
    }

    /// A VP8 decoding that renders into `renderer`, with no thread of its own yet.
    private func vp8Decoding(into renderer: StampingRenderer) throws -> VideoDecoding {
        let decoding = VideoDecoding(renderer: renderer, logger: Logger(label: "test"), onEvent: { _ in }, onRenderFailure: { _ in })
        try decoding.prepare(.vp8)
        return decoding
    }

    /// Whole frames, straight from their packets (one packet each at this size):
    /// the RTP header and the 4-byte VP8 descriptor dropped.
    private func wholeFrames(_ frames: [[[UInt8]]]) -> [[UInt8]] {
        frames.map { rtp in rtp.flatMap { Array($0.dropFirst(12 + 4)) } }
    }

    @Test("lip sync: with audio 150 ms behind its sender, each frame waits until it is as late; a far later audio is waited for at most 0.3 s; no audio, no wait")
    func framesWaitForTheirAudio() throws {
        let frames = try packets(count: 16, keyframeAt: 0)
        let renderer = StampingRenderer()
        let decoding = try vp8Decoding(into: renderer)
        let thread = StoppableThread(name: "test-decode") { stop in decoding.run(stop) }
        decoding.wake = thread.signal
        defer { thread.stop() }
        let bytes = wholeFrames(frames)
        // Each frame is handed over as its sender stamps it: its delay starts at 0.
        // `ahead`: the sender's clock is that far ahead of this one.
        func handOver(_ n: Int, ahead: Double = 0) -> Double {
            let sent = wallClock()
            let frame = VideoJitterBuffer.Frame(timestamp: UInt32(n) * 3000, isKeyframe: n == 0, firstSequence: 0, lastSequence: 0)
            #expect(decoding.submit(frame, bytes: bytes[n], codec: .vp8, clock: (ntp: sent + ahead, rtp: UInt32(n) * 3000)))
            return sent
        }
        func renderedCount() -> Int { renderer.stamps.withLock { $0.count } }
        func waitForRender(_ count: Int) { for _ in 0..<1000 where renderedCount() < count { usleep(10_000) } }

        decoding.setAudioDelay(0.15)
        var sent: [Double] = []
        for n in 0..<4 { sent.append(handOver(n)) }
        waitForRender(4)
        decoding.setAudioDelay(5)
        for n in 4..<8 { sent.append(handOver(n)) }
        waitForRender(8)
        decoding.setAudioDelay(nil)
        for n in 8..<12 { sent.append(handOver(n)) }
        waitForRender(12)
        // The sender's clock 0.2 s ahead: both delays come out negative, their difference counts.
        decoding.setAudioDelay(-0.05)
        for n in 12..<16 { sent.append(handOver(n, ahead: 0.2)) }
        waitForRender(16)
        let stamps = renderer.stamps.withLock { $0 }
        try #require(stamps.count == 16, "\(stamps.count) frames rendered")
        let delays = zip(stamps, sent).map { $0 - $1 }
        // Never before its audio (a lower bound: a busy machine only makes it later).
        #expect(delays[0..<4].allSatisfy { $0 >= 0.149 }, "\(delays)")
        // Five seconds of audio delay are not waited for: 0.3 s at most (checked loosely).
        #expect(delays[4..<8].allSatisfy { $0 >= 0.299 && $0 < 4 }, "\(delays)")
        #expect(delays[12..<16].allSatisfy { $0 >= 0.149 }, "\(delays)")
        #expect(try #require(decoding.decoded.lipSyncHold) > 0.1)
        #expect(decoding.decoded.framesDecoded == 16)
    }

    @Test("a frame that does not decode is reported once, with its timestamp; the frames after it are skipped until the next keyframe")
    func aBadFrameSkipsToTheNextKeyframe() throws {
        let frames = try packets(count: 8, keyframeAt: 5)
        let renderer = StampingRenderer()
        let decoding = try vp8Decoding(into: renderer)
        var bytes = wholeFrames(frames)
        // Frame 2: a VP8 frame tag that promises more than there is.
        bytes[2] = [0xff, 0xff, 0xff]
        for n in 0..<8 {
            let frame = VideoJitterBuffer.Frame(timestamp: UInt32(n) * 3000, isKeyframe: n == 0 || n == 5, firstSequence: 0, lastSequence: 0)
            #expect(decoding.submit(frame, bytes: bytes[n], codec: .vp8, clock: nil))
        }
        decoding.drain()   // no thread: decoded here, in order
        let decoded = decoding.decoded
        #expect(decoded.decodeErrors == 1 && decoded.framesSkipped == 2 && decoded.framesDecoded == 5, "\(decoded)")
        let failure = decoding.takeDecodeFailure()
        let again = decoding.takeDecodeFailure()
        #expect(failure == UInt32(2 * 3000) && again == nil, "\(String(describing: failure)), then \(String(describing: again))")
        #expect(renderer.stamps.withLock { $0.count } == 5)
    }
}

/// Wall-clock seconds now (the sender's clock, in these tests: one host).
private func wallClock() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Notes the wall-clock time of each frame it is given.
private final class StampingRenderer: VideoRenderer, @unchecked Sendable {
    let stamps = PThreadLocked<[Double]>([])
    func render(_ frame: VideoFrame) throws(RenderError) {
        let now = wallClock()
        stamps.withLock { $0.append(now) }
    }
    func finish() throws(RenderError) {}
}
