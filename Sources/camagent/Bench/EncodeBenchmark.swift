import ArgumentParser
import Encoders
import Foundation
import MediaTypes
import PixelConversion

/// What one encoder spent on the test pattern (`camagent bench --encode`).
struct EncodeBenchResult: Encodable {
    var codec: String
    var width: Int
    var height: Int
    var frames: Int
    /// Encoding threads (libvpx's choice for this size on this machine; OpenH264 runs on one).
    var threads: Int
    /// VP8's temporal layers, as publish encodes them (1 for H.264).
    var temporalLayers: Int
    /// Each frame encoded at its own time (1/fps apart, as publish does), not back to back.
    var paced: Bool
    /// User + system CPU of the whole process (the encoder's own threads
    /// included) per frame, over the encoding loop only.
    var cpuMillisecondsPerFrame: Double
    var wallMillisecondsPerFrame: Double
    var keyframes: Int
    var kilobitsPerSecond: Double
}

/// The video encoder alone, on the same pictures the publish path sends:
/// `frames` test-pattern frames are drawn first (not timed), then encoded one
/// after the other with capture times 1/fps apart, so the rate control sees
/// real time. Benchmarks/bench.py encodes the same frames with GStreamer's
/// vp8enc and openh264enc, read from a Y4M file that `camagent capture`
/// wrote from the same pattern.
struct EncodeBenchmark {
    enum Codec: String, CaseIterable, ExpressibleByArgument { case vp8, h264 }

    let codec: Codec
    let size: FrameSize
    let frames: Int
    let framesPerSecond: Double
    let bitrateKbps: Int
    /// VP8's temporal layers (publish encodes `PublisherSettings().videoTemporalLayers`).
    let temporalLayers: Int
    /// Waits for each frame's time before encoding it, as publish meets its
    /// frames: the encoder's caches and the core go cold between frames,
    /// which back-to-back encoding never sees. CPU is counted the same way.
    var paced = false

    func run() throws -> EncodeBenchResult {
        let renderer = TestPatternRenderer(width: size.width, height: size.height)
        let start = MonotonicTimestamp.now()
        let pictures = (0..<frames).map { i -> VideoFrame in
            let frame = VideoFrame(maxWidth: size.width, maxHeight: size.height)
            renderer.render(counter: UInt32(i), into: frame, framesPerSecond: framesPerSecond)
            frame.timestamp = start + .nanoseconds(Int64(Double(i) * 1e9 / framesPerSecond))
            return frame
        }
        let encode: (VideoFrame, (EncodedVideoFrame) -> Void) throws -> Void
        let threads: Int
        var layers = 1
        switch codec {
        case .vp8:
            let encoder = try VP8Encoder(size: size, framesPerSecond: framesPerSecond, bitrateKbps: bitrateKbps,
                                         temporalLayers: temporalLayers)
            encode = { frame, out in try encoder.encode(frame, forceKeyframe: false, out) }
            threads = encoder.threads
            layers = encoder.temporalLayers
        case .h264:
            let encoder = try H264Encoder(size: size, framesPerSecond: framesPerSecond, bitrateKbps: bitrateKbps)
            encode = { frame, out in try encoder.encode(frame, forceKeyframe: false, out) }
            threads = 1
        }
        var bytes = 0, keyframes = 0
        let cpuBefore = ProcessCPU.seconds()
        let wallBefore = MonotonicTimestamp.now()
        for (index, frame) in pictures.enumerated() {
            if paced {
                let due = wallBefore + .nanoseconds(Int64(Double(index) * 1e9 / framesPerSecond))
                let wait = due - MonotonicTimestamp.now()
                if wait > .zero { Thread.sleep(forTimeInterval: wait.secondsDouble) }
            }
            try encode(frame) { encoded in
                bytes += encoded.bytes.count
                if encoded.isKeyframe { keyframes += 1 }
            }
        }
        let wall = (MonotonicTimestamp.now() - wallBefore).secondsDouble
        let cpu = ProcessCPU.seconds() - cpuBefore
        return EncodeBenchResult(
            codec: codec.rawValue, width: size.width, height: size.height, frames: frames, threads: threads,
            temporalLayers: layers, paced: paced,
            cpuMillisecondsPerFrame: cpu * 1000 / Double(frames),
            wallMillisecondsPerFrame: wall * 1000 / Double(frames),
            keyframes: keyframes,
            kilobitsPerSecond: Double(bytes) * 8 / (Double(frames) / framesPerSecond) / 1000)
    }
}

/// User + system CPU time of this process, every thread included.
enum ProcessCPU {
    static func seconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return s(usage.ru_utime) + s(usage.ru_stime)
    }
}
