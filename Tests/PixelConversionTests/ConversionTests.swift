import Foundation
import MediaTypes
import PixelConversion
import Testing

/// A small NV12 frame whose every pixel differs, so rotations can be checked exactly.
func numberedFrame(width: Int, height: Int) -> VideoFrame {
    let f = VideoFrame(maxWidth: width, maxHeight: height)
    f.setFormat(.nv12(width: width, height: height, framesPerSecond: 30))
    for y in 0..<height { for x in 0..<width { f.yPlane[y * f.yStride + x] = UInt8((y * width + x) % 256) } }
    for y in 0..<(height / 2) {
        for x in 0..<(width / 2) {
            f.uvPlane[y * f.uvStride + 2 * x] = UInt8(x * 10 + y)
            f.uvPlane[y * f.uvStride + 2 * x + 1] = UInt8(200 - x - y)
        }
    }
    return f
}

func luma(_ f: VideoFrame, _ x: Int, _ y: Int) -> UInt8 { f.yPlane[y * f.yStride + x] }
func chroma(_ f: VideoFrame, _ x: Int, _ y: Int) -> (UInt8, UInt8) {
    (f.uvPlane[y * f.uvStride + 2 * x], f.uvPlane[y * f.uvStride + 2 * x + 1])
}

@Suite("Conversion to and from NV12")
struct ConversionTests {
    @Test func yuyvToNV12() {
        // 4x2 YUYV: Y values 10..17, chroma pairs (U,V) = (50,60), (70,80) on row 0.
        let w = 4, h = 2
        var yuyv: [UInt8] = []
        for row in 0..<h {
            for pair in 0..<(w / 2) {
                let y0 = UInt8(10 + row * w + pair * 2)
                yuyv += [y0, UInt8(50 + pair * 20), y0 + 1, UInt8(60 + pair * 20)]
            }
        }
        let f = VideoFrame(maxWidth: w, maxHeight: h)
        f.setFormat(.nv12(width: w, height: h, framesPerSecond: 30))
        yuyv.withUnsafeBytes { NV12Conversion.yuyvToNV12($0, stride: w * 2, into: f) }
        #expect((0..<8).map { luma(f, $0 % 4, $0 / 4) } == Array(10...17))
        #expect(chroma(f, 0, 0) == (50, 60))
        #expect(chroma(f, 1, 0) == (70, 80))
    }

    @Test func nv12CopyHonoursStrides() {
        let w = 6, h = 4, srcStride = 8
        var src = [UInt8](repeating: 0xEE, count: srcStride * (h + h / 2))
        for y in 0..<h { for x in 0..<w { src[y * srcStride + x] = UInt8(y * 10 + x) } }
        for y in 0..<(h / 2) { for x in 0..<w { src[(h + y) * srcStride + x] = UInt8(100 + y * 10 + x) } }
        let f = VideoFrame(maxWidth: w, maxHeight: h)
        f.setFormat(.nv12(width: w, height: h, framesPerSecond: 30))
        src.withUnsafeBytes { NV12Conversion.copyNV12($0, stride: srcStride, height: h, into: f) }
        #expect(luma(f, 5, 3) == 35)
        #expect(chroma(f, 2, 1) == (114, 115))
        #expect(!Array(f.yPlane).contains(0xEE))
    }

    @Test func nv12ToI420AndBack() {
        let f = numberedFrame(width: 8, height: 6)
        let size = NV12Conversion.i420ByteCount(width: 8, height: 6)
        let i420 = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { i420.deallocate() }
        NV12Conversion.nv12ToI420(f, into: i420)
        // U plane then V plane, each 4x3.
        #expect(i420[48 + 1 * 4 + 2] == chroma(f, 2, 1).0)
        #expect(i420[48 + 12 + 1 * 4 + 2] == chroma(f, 2, 1).1)
        let back = VideoFrame(maxWidth: 8, maxHeight: 6)
        back.setFormat(f.format)
        NV12Conversion.i420ToNV12(UnsafeRawBufferPointer(i420), into: back)
        #expect(Array(back.yPlane) == Array(f.yPlane) && Array(back.uvPlane) == Array(f.uvPlane))
    }

    @Test(arguments: [VideoOrientation.Rotation.clockwise90, .upsideDown, .clockwise270])
    func rotationMovesEveryPixel(rotation: VideoOrientation.Rotation) {
        let (w, h) = (8, 4)
        let src = numberedFrame(width: w, height: h)
        let dst = VideoFrame(maxWidth: h, maxHeight: w)
        PixelRotator(maxWidth: w, maxHeight: h).apply(VideoOrientation(rotation: rotation), from: src, into: dst)
        for y in 0..<h {
            for x in 0..<w {
                let (dx, dy): (Int, Int)
                switch rotation {
                case .clockwise90: (dx, dy) = (h - 1 - y, x)
                case .upsideDown: (dx, dy) = (w - 1 - x, h - 1 - y)
                case .clockwise270: (dx, dy) = (y, w - 1 - x)
                case .none: (dx, dy) = (x, y)
                }
                #expect(luma(dst, dx, dy) == luma(src, x, y))
            }
        }
        let (cw, ch) = (w / 2, h / 2)
        for y in 0..<ch {
            for x in 0..<cw {
                let (dx, dy): (Int, Int)
                switch rotation {
                case .clockwise90: (dx, dy) = (ch - 1 - y, x)
                case .upsideDown: (dx, dy) = (cw - 1 - x, ch - 1 - y)
                case .clockwise270: (dx, dy) = (y, cw - 1 - x)
                case .none: (dx, dy) = (x, y)
                }
                #expect(chroma(dst, dx, dy) == chroma(src, x, y))
            }
        }
    }

    @Test func mirrorAndRotate() {
        let src = numberedFrame(width: 8, height: 4)
        let mirrored = VideoFrame(maxWidth: 8, maxHeight: 8)
        let rotator = PixelRotator(maxWidth: 8, maxHeight: 4)
        rotator.apply(VideoOrientation(rotation: .none, mirrored: true), from: src, into: mirrored)
        #expect(luma(mirrored, 7, 0) == luma(src, 0, 0) && chroma(mirrored, 3, 1) == chroma(src, 0, 1))
        let both = VideoFrame(maxWidth: 8, maxHeight: 8)
        rotator.apply(VideoOrientation(rotation: .clockwise90, mirrored: true), from: src, into: both)
        #expect(both.width == 4 && both.height == 8)
        // Mirrored first: source (0,0) is at mirrored (7,0), which rotates to (3,7).
        #expect(luma(both, 3, 7) == luma(src, 0, 0))
    }
}

@Suite("MJPEG decoding")
struct MJPEGTests {
    /// A JPEG of a known picture, made by ffmpeg (a tool nobody here wrote).
    func jpeg(width: Int, height: Int, gray: UInt8, pixelFormat: String = "yuvj420p") throws -> [UInt8] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-jpeg-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let raw = dir.appendingPathComponent("in.gray"), out = dir.appendingPathComponent("out.jpg")
        // Left half `gray`, right half white.
        var pixels = [UInt8](repeating: 235, count: width * height)
        for y in 0..<height { for x in 0..<(width / 2) { pixels[y * width + x] = gray } }
        try Data(pixels).write(to: raw)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "gray", "-s", "\(width)x\(height)",
                       "-i", raw.path, "-pix_fmt", pixelFormat, "-q:v", "2", "-frames:v", "1", out.path]
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        return Array(try Data(contentsOf: out))
    }

    /// 4:2:2 is what UVC webcams send (and what Debian's libyuv cannot decode).
    @Test(arguments: ["yuvj420p", "yuvj422p", "yuvj444p", "gray"])
    func decodesKnownContent(pixelFormat: String) throws {
        let bytes = try jpeg(width: 64, height: 48, gray: 60, pixelFormat: pixelFormat)
        let f = VideoFrame(maxWidth: 64, maxHeight: 48)
        f.setFormat(.nv12(width: 64, height: 48, framesPerSecond: 30))
        try bytes.withUnsafeBytes { try JPEGDecoder().decode($0, into: f) }
        // Full-range JPEG decoded by libyuv: compare within JPEG's loss.
        #expect(abs(Int(luma(f, 10, 20)) - 60) <= 8)
        #expect(abs(Int(luma(f, 50, 20)) - 235) <= 8)
        #expect(abs(Int(chroma(f, 10, 10).0) - 128) <= 4)
        #expect(bytes.withUnsafeBytes { NV12Conversion.jpegDimensions($0) } == FrameSize(width: 64, height: 48))
    }

    @Test func trailingPaddingIsAccepted() throws {
        let image = try jpeg(width: 64, height: 48, gray: 60)
        let bytes = image + [UInt8](repeating: 0, count: 300)
        // Both frames start as a value the picture does not have, so a decode that wrote
        // nothing cannot pass.
        func decoded(_ jpeg: [UInt8]) throws -> VideoFrame {
            let f = VideoFrame(maxWidth: 64, maxHeight: 48)
            f.setFormat(.nv12(width: 64, height: 48, framesPerSecond: 30))
            for i in f.yPlane.indices { f.yPlane[i] = 0xEE }
            for i in f.uvPlane.indices { f.uvPlane[i] = 0x11 }
            try jpeg.withUnsafeBytes { try JPEGDecoder().decode($0, into: f) }
            return f
        }
        let padded = try decoded(bytes), plain = try decoded(image)
        // The picture: left half gray 60, right half white, no colour (within JPEG's loss).
        for y in [0, 20, 47] {
            #expect(abs(Int(luma(padded, 10, y)) - 60) <= 8, "row \(y)")
            #expect(abs(Int(luma(padded, 50, y)) - 235) <= 8, "row \(y)")
        }
        for (x, y) in [(5, 0), (25, 23), (31, 12)] {
            let (u, v) = chroma(padded, x, y)
            #expect(abs(Int(u) - 128) <= 4 && abs(Int(v) - 128) <= 4, "chroma at \(x),\(y): \(u),\(v)")
        }
        // The padding changes nothing: every pixel is what the unpadded JPEG decodes to.
        #expect(Array(padded.yPlane) == Array(plain.yPlane))
        #expect(Array(padded.uvPlane) == Array(plain.uvPlane))
    }

    @Test func leftoverBytesAfterTheImageAreIgnored() throws {
        // As v4l2loopback reports: bytesused is the whole buffer, an older, longer frame's tail after EOI.
        let bytes = try jpeg(width: 64, height: 48, gray: 60) + [UInt8](repeating: 0x5A, count: 500) + [0xFF, 0xD9, 0x12]
        let f = VideoFrame(maxWidth: 64, maxHeight: 48)
        f.setFormat(.nv12(width: 64, height: 48, framesPerSecond: 30))
        try bytes.withUnsafeBytes { try JPEGDecoder().decode($0, into: f) }
        #expect(abs(Int(luma(f, 10, 20)) - 60) <= 8)
    }

    @Test func brokenJPEGsAreRejected() throws {
        let good = try jpeg(width: 64, height: 48, gray: 60)
        let f = VideoFrame(maxWidth: 64, maxHeight: 48)
        f.setFormat(.nv12(width: 64, height: 48, framesPerSecond: 30))
        let truncated = Array(good.prefix(good.count / 2))
        let noSOI = [UInt8](repeating: 0x55, count: 2) + good.dropFirst(2)
        let garbage = [UInt8](repeating: 0xAB, count: 4000)
        for broken in [truncated, noSOI, garbage] {
            #expect(throws: JPEGError.brokenMarkers) {
                try broken.withUnsafeBytes { try JPEGDecoder().decode($0, into: f) }
            }
        }
        let other = VideoFrame(maxWidth: 32, maxHeight: 24)
        other.setFormat(.nv12(width: 32, height: 24, framesPerSecond: 30))
        #expect(throws: JPEGError.sizeMismatch(width: 64, height: 48)) {
            try good.withUnsafeBytes { try JPEGDecoder().decode($0, into: other) }
        }
    }
}

@Suite("Test pattern")
struct TestPatternTests {
    @Test(arguments: [(160, 120), (640, 480), (1280, 720)])
    func counterRoundTrips(size: (Int, Int)) {
        let renderer = TestPatternRenderer(width: size.0, height: size.1)
        let f = VideoFrame(maxWidth: size.0, maxHeight: size.1)
        for counter: UInt32 in [0, 1, 41, 65535, 1_234_567, UInt32.max] {
            renderer.render(counter: counter, into: f)
            #expect(TestPatternCounter.decode(f) == counter)
        }
    }

    @Test func survivesAYUYVRoundTrip() {
        let renderer = TestPatternRenderer(width: 320, height: 240)
        let f = VideoFrame(maxWidth: 320, maxHeight: 240)
        renderer.render(counter: 987_654, into: f)
        var yuyv = [UInt8](repeating: 0, count: 320 * 240 * 2)
        var scratch = [UInt8](repeating: 0, count: NV12Conversion.i420ByteCount(width: 320, height: 240))
        yuyv.withUnsafeMutableBytes { y in scratch.withUnsafeMutableBytes { NV12Conversion.nv12ToYUYV(f, into: y, scratch: $0) } }
        let back = VideoFrame(maxWidth: 320, maxHeight: 240)
        back.setFormat(f.format)
        yuyv.withUnsafeBytes { NV12Conversion.yuyvToNV12($0, stride: 640, into: back) }
        #expect(TestPatternCounter.decode(back) == 987_654)
    }

    @Test func aPictureWithoutCounterDecodesToNil() {
        let f = VideoFrame(maxWidth: 320, maxHeight: 240)
        f.setFormat(.nv12(width: 320, height: 240, framesPerSecond: 30))
        f.yPlane.initializeMemory(as: UInt8.self, repeating: 128)
        #expect(TestPatternCounter.decode(f) == nil)
        let renderer = TestPatternRenderer(width: 320, height: 240)
        renderer.render(counter: 5, into: f)
        f.yPlane[f.yStride * 4 + 320 * 20 / 40 + 3] = 0  // damage one cell: the check nibble catches it
        for row in 0..<renderer.bandHeight { for x in (8 * 8)..<(9 * 8) { f.yPlane[row * f.yStride + x] ^= 0xFF } }
        #expect(TestPatternCounter.decode(f) == nil)
    }

    @Test func patternMovesBetweenFrames() {
        let renderer = TestPatternRenderer(width: 320, height: 240)
        let a = VideoFrame(maxWidth: 320, maxHeight: 240), b = VideoFrame(maxWidth: 320, maxHeight: 240)
        renderer.render(counter: 10, into: a)
        renderer.render(counter: 11, into: b)
        let row = 200
        let differs = (0..<320).contains { a.yPlane[row * a.yStride + $0] != b.yPlane[row * b.yStride + $0] }
        #expect(differs)
    }
}

@Suite("Full range to limited range (MJPEG colours at the receiver)")
struct RangeConversionTests {
    @Test func endsAndMiddleLandWhereVideoRangeHasThem() {
        let frame = VideoFrame(maxWidth: 4, maxHeight: 2)
        frame.setFormat(.nv12(width: 4, height: 2, framesPerSecond: 0))
        let luma: [UInt8] = [0, 255, 128, 64, 10, 20, 30, 40]
        for (i, v) in luma.enumerated() { frame.yPlane[(i / 4) * frame.yStride + i % 4] = v }
        let chroma: [UInt8] = [0, 255, 128, 200]
        for (i, v) in chroma.enumerated() { frame.uvPlane[i] = v }
        let out = VideoFrame(maxWidth: 4, maxHeight: 2)
        RangeConversion.fullToLimited(frame, into: out)
        #expect(out.width == 4 && out.height == 2)
        #expect(out.yPlane[0] == 16 && out.yPlane[1] == 235 && out.yPlane[2] == 126 && out.yPlane[3] == 71)
        #expect(out.uvPlane[0] == 16 && out.uvPlane[1] == 240 && out.uvPlane[2] == 128 && out.uvPlane[3] == 191)
        // In place gives the same.
        RangeConversion.fullToLimited(frame, into: frame)
        #expect((0..<4).allSatisfy { frame.yPlane[$0] == out.yPlane[$0] && frame.uvPlane[$0] == out.uvPlane[$0] })
    }
}
