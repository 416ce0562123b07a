import MediaTypes
import PixelConversion

/// What `camagent bench` measured.
struct BenchResult: Encodable {
    var conversion: ConversionBenchResult?
    var mjpeg: MJPEGBenchResult?
    var encode: EncodeBenchResult?

    var text: String {
        var lines: [String] = []
        if let c = conversion {
            lines += [
                "conversion at \(c.width)x\(c.height), cold buffers (working set \(c.workingSetMiB.formatted(decimals: 0)) MiB):",
                "  YUYV→NV12   \((c.yuyvToNV12Nanoseconds / 1e6).formatted(decimals: 3)) ms/frame",
                "  memcpy      \((c.memcpyNanoseconds / 1e6).formatted(decimals: 3)) ms/frame (same source bytes)",
                "  ratio       \(c.yuyvToMemcpyRatio.formatted(decimals: 2))x memcpy",
            ]
        }
        if let m = mjpeg {
            lines.append("MJPEG (\(m.width)x\(m.height), \(m.jpegBytes) bytes) → NV12: "
                + "\((m.nanosecondsPerFrame / 1e6).formatted(decimals: 3)) ms/frame, "
                + "\((m.nanosecondsPerMegapixel / 1e6).formatted(decimals: 3)) ms/megapixel")
        }
        if let e = encode {
            lines.append("\(e.codec) encode (\(e.width)x\(e.height), \(e.frames) frames\(e.paced ? " at 30 fps" : ""), \(e.threads) thread\(e.threads == 1 ? "" : "s")): "
                + "\(e.cpuMillisecondsPerFrame.formatted(decimals: 3)) ms CPU/frame, "
                + "\(e.wallMillisecondsPerFrame.formatted(decimals: 3)) ms wall/frame, "
                + "\(e.keyframes) keyframes, \(e.kilobitsPerSecond.formatted(decimals: 0)) kbit/s")
        }
        return lines.joined(separator: "\n")
    }
}

/// Nanoseconds are per frame, medians of the rounds.
struct ConversionBenchResult: Encodable {
    var width: Int
    var height: Int
    var workingSetMiB: Double
    var yuyvToNV12Nanoseconds: Double
    var memcpyNanoseconds: Double
    /// yuyvToNV12 / memcpy of the same source bytes (target ≤ 1.25).
    var yuyvToMemcpyRatio: Double
}

struct MJPEGBenchResult: Encodable {
    var width: Int
    var height: Int
    var jpegBytes: Int
    var nanosecondsPerFrame: Double
    var nanosecondsPerMegapixel: Double
}

/// Median of the rounds of `body`, each timed over `frames` calls, per call.
func medianNanosecondsPerFrame(rounds: Int, frames: Int, _ body: (Int) throws -> Void) rethrows -> Double {
    var perFrame: [Double] = []
    for _ in 0..<rounds {
        let start = MonotonicTimestamp.now()
        for i in 0..<frames { try body(i) }
        perFrame.append((MonotonicTimestamp.now() - start).secondsDouble * 1e9 / Double(frames))
    }
    return perFrame.sorted()[perFrame.count / 2]
}

/// YUYV→NV12 (libyuv, as the capturer does it) against a plain copy of the
/// same YUYV bytes, both cycling through enough buffers to defeat the caches.
struct ConversionBenchmark {
    let size: FrameSize
    let frames: Int
    let rounds: Int
    /// Larger than any L3 cache this runs on, so each frame is read cold.
    static let workingSetBytes = 256 << 20

    func run() -> BenchResult {
        let yuyvBytes = size.width * 2 * size.height
        let nv12 = VideoFormat.nv12(width: size.width, height: size.height, framesPerSecond: 30)
        let count = max(4, Self.workingSetBytes / (2 * yuyvBytes))

        // Sources hold the test pattern (real content, not zeros that compress in caches).
        let pattern = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        TestPatternRenderer(width: max(size.width, 160), height: max(size.height, 120))
            .render(counter: 1, into: pattern)
        let sources = (0..<count).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: yuyvBytes, alignment: 64) }
        let i420 = UnsafeMutableRawBufferPointer.allocate(
            byteCount: NV12Conversion.i420ByteCount(width: size.width, height: size.height), alignment: 64)
        defer { i420.deallocate() }
        for s in sources { NV12Conversion.nv12ToYUYV(pattern, into: s, scratch: i420) }
        let copies = (0..<count).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: yuyvBytes, alignment: 64) }
        let outputs = (0..<count).map { _ -> VideoFrame in
            let f = VideoFrame(maxWidth: size.width, maxHeight: size.height)
            f.setFormat(nv12)
            return f
        }
        defer { (sources + copies).forEach { $0.deallocate() } }

        let convert = medianNanosecondsPerFrame(rounds: rounds, frames: frames) { i in
            NV12Conversion.yuyvToNV12(UnsafeRawBufferPointer(sources[i % count]), stride: size.width * 2,
                                      into: outputs[(i + 1) % count])
        }
        let copy = medianNanosecondsPerFrame(rounds: rounds, frames: frames) { i in
            copies[(i + 1) % count].copyMemory(from: UnsafeRawBufferPointer(sources[i % count]))
        }
        return BenchResult(conversion: ConversionBenchResult(
            width: size.width, height: size.height,
            workingSetMiB: Double(count * (2 * yuyvBytes)) / Double(1 << 20),
            yuyvToNV12Nanoseconds: convert, memcpyNanoseconds: copy, yuyvToMemcpyRatio: convert / copy))
    }
}

/// One JPEG decoded to NV12 over and over through the capturer's decoder.
struct MJPEGBenchmark {
    let jpeg: [UInt8]
    let frames: Int
    let rounds: Int

    init(jpeg: some Collection<UInt8>, frames: Int, rounds: Int) {
        self.jpeg = Array(jpeg)
        self.frames = frames
        self.rounds = rounds
    }

    func run() throws -> MJPEGBenchResult {
        guard let size = jpeg.withUnsafeBytes({ NV12Conversion.jpegDimensions($0) }) else {
            throw JPEGError.brokenMarkers
        }
        let frame = VideoFrame(maxWidth: size.width, maxHeight: size.height)
        frame.setFormat(.nv12(width: size.width, height: size.height, framesPerSecond: 30))
        let decoder = JPEGDecoder()
        let perFrame = try jpeg.withUnsafeBytes { bytes in
            try medianNanosecondsPerFrame(rounds: rounds, frames: frames) { _ in try decoder.decode(bytes, into: frame) }
        }
        return MJPEGBenchResult(
            width: size.width, height: size.height, jpegBytes: jpeg.count,
            nanosecondsPerFrame: perFrame,
            nanosecondsPerMegapixel: perFrame / (Double(size.pixelCount) / 1e6))
    }
}
