internal import CYUV
import MediaTypes

/// Why an MJPEG buffer was not turned into a picture. The capturer drops
/// such frames and counts them; a camera sends a few after every start.
public enum JPEGError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No start-of-image marker, no end-of-image marker, or too short: a torn or truncated frame.
    case brokenMarkers
    /// The picture is not the negotiated size.
    case sizeMismatch(width: Int, height: Int)
    /// libjpeg could not decode it.
    case decodeFailed

    public var description: String {
        switch self {
        case .brokenMarkers: "broken JPEG markers (truncated or torn frame)"
        case .sizeMismatch(let w, let h): "JPEG is \(w)x\(h), not the negotiated size"
        case .decodeFailed: "JPEG decode failed"
        }
    }
}

/// Conversions into and out of NV12 frames, all through libyuv (SIMD, no allocation).
public enum NV12Conversion {
    /// The frame's picture at half its width and height in `destination`
    /// (a simulcast layer): exactly 2:1 from the source's top left where
    /// the source is large enough (an odd half drops the last column or
    /// row), so libyuv takes its 2:1 path, which allocates nothing (its
    /// other ratios allocate a row buffer per call: only a picture under
    /// 4x4 gets there).
    public static func halve(_ source: VideoFrame, into destination: VideoFrame) {
        _ = NV12Scale(source.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(source.yStride),
                      source.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(source.uvStride),
                      Int32(min(source.width, destination.width * 2)), Int32(min(source.height, destination.height * 2)),
                      destination.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(destination.yStride),
                      destination.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(destination.uvStride),
                      Int32(destination.width), Int32(destination.height), kFilterBox)
    }

    /// Packed YUYV 4:2:2 (`stride` bytes per row) into the frame's NV12 planes.
    public static func yuyvToNV12(_ source: UnsafeRawBufferPointer, stride: Int, into frame: VideoFrame) {
        precondition(source.count >= stride * frame.height, "YUYV source too short")
        _ = YUY2ToNV12(source.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(stride),
                       frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                       frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                       Int32(frame.width), Int32(frame.height))
    }

    /// NV12 with `stride` bytes per row (the UV plane follows `height` rows
    /// of Y) copied into the frame with its own strides: the pass-through path.
    public static func copyNV12(_ source: UnsafeRawBufferPointer, stride: Int, height: Int, into frame: VideoFrame) {
        precondition(source.count >= stride * (height + (frame.height + 1) / 2), "NV12 source too short")
        let y = source.baseAddress!.assumingMemoryBound(to: UInt8.self)
        _ = NV12Copy(y, Int32(stride), y + stride * height, Int32(stride),
                     frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                     frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                     Int32(frame.width), Int32(frame.height))
    }

    /// The JPEG in a buffer, from SOI to EOI, found by walking its segments.
    /// Drivers may report more bytes than the image (v4l2loopback reports the
    /// whole buffer, with leftovers of older frames after the end), so the end
    /// is found, not assumed. nil when a marker is missing or the data is truncated.
    public static func validatedJPEG(_ source: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let n = source.count
        guard n >= 128, source[0] == 0xFF, source[1] == 0xD8 else { return nil }
        var i = 2
        while i + 1 < n {
            guard source[i] == 0xFF else { return nil }
            let marker = source[i + 1]
            switch marker {
            case 0xFF:
                i += 1  // fill byte
            case 0xD9:
                return UnsafeRawBufferPointer(rebasing: source[0..<(i + 2)])
            case 0x01, 0xD0...0xD7:
                i += 2  // markers without a length
            default:
                guard i + 3 < n else { return nil }
                let length = Int(source[i + 2]) << 8 | Int(source[i + 3])
                guard length >= 2 else { return nil }
                i += 2 + length
                if marker == 0xDA {
                    // Entropy-coded data runs to the next marker that is not a
                    // stuffed 0xFF00 or a restart marker.
                    while i + 1 < n {
                        if source[i] == 0xFF, source[i + 1] != 0, !(0xD0...0xD7).contains(source[i + 1]) { break }
                        i += 1
                    }
                }
            }
        }
        return nil
    }

    /// Width and height from the JPEG headers, without decoding.
    public static func jpegDimensions(_ source: UnsafeRawBufferPointer) -> FrameSize? {
        guard let jpeg = validatedJPEG(source) else { return nil }
        var w: Int32 = 0, h: Int32 = 0
        guard MJPGSize(jpeg.baseAddress!.assumingMemoryBound(to: UInt8.self), jpeg.count, &w, &h) == 0 else { return nil }
        return FrameSize(width: Int(w), height: Int(h))
    }

    /// Bytes of a tightly packed I420 picture (Y, then U, then V).
    public static func i420ByteCount(width: Int, height: Int) -> Int {
        width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)
    }

    /// The frame as tightly packed I420 (what Y4M files carry).
    public static func nv12ToI420(_ frame: VideoFrame, into destination: UnsafeMutableRawBufferPointer) {
        let (w, h) = (frame.width, frame.height)
        let (cw, ch) = ((w + 1) / 2, (h + 1) / 2)
        precondition(destination.count >= i420ByteCount(width: w, height: h), "I420 destination too short")
        let y = destination.baseAddress!.assumingMemoryBound(to: UInt8.self)
        _ = NV12ToI420(frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                       frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                       y, Int32(w), y + w * h, Int32(cw), y + w * h + cw * ch, Int32(cw), Int32(w), Int32(h))
    }

    /// Tightly packed I420 into the frame's NV12 planes.
    public static func i420ToNV12(_ source: UnsafeRawBufferPointer, into frame: VideoFrame) {
        let (w, h) = (frame.width, frame.height)
        let (cw, ch) = ((w + 1) / 2, (h + 1) / 2)
        precondition(source.count >= i420ByteCount(width: w, height: h), "I420 source too short")
        let y = source.baseAddress!.assumingMemoryBound(to: UInt8.self)
        _ = I420ToNV12(y, Int32(w), y + w * h, Int32(cw), y + w * h + cw * ch, Int32(cw),
                       frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                       frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                       Int32(w), Int32(h))
    }

    /// The frame as packed YUYV (width*2 bytes per row), going through an
    /// I420 `scratch` of `i420ByteCount` bytes that the caller keeps.
    public static func nv12ToYUYV(_ frame: VideoFrame, into destination: UnsafeMutableRawBufferPointer,
                                  scratch: UnsafeMutableRawBufferPointer) {
        let (w, h) = (frame.width, frame.height)
        let (cw, ch) = ((w + 1) / 2, (h + 1) / 2)
        precondition(destination.count >= w * 2 * h, "YUYV destination too short")
        nv12ToI420(frame, into: scratch)
        let y = scratch.baseAddress!.assumingMemoryBound(to: UInt8.self)
        _ = I420ToYUY2(y, Int32(w), y + w * h, Int32(cw), y + w * h + cw * ch, Int32(cw),
                       destination.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(w * 2), Int32(w), Int32(h))
    }
}

/// Rotates and mirrors NV12 frames in pixels (only when `--rotate-pixels` is
/// asked; otherwise orientation travels as metadata). libyuv has no NV12 to
/// NV12 rotation: the Y plane goes through RotatePlane, and the interleaved
/// UV plane is rotated as one plane of 16-bit U+V pairs.
public final class PixelRotator {
    /// Holds the mirrored picture before it is rotated; allocated once.
    private let intermediate: VideoFrame

    public init(maxWidth: Int, maxHeight: Int) {
        intermediate = VideoFrame(maxWidth: max(maxWidth, maxHeight), maxHeight: max(maxWidth, maxHeight))
    }

    /// The size a picture has after rotation.
    public static func rotatedSize(width: Int, height: Int, rotation: VideoOrientation.Rotation) -> FrameSize {
        switch rotation {
        case .clockwise90, .clockwise270: FrameSize(width: height, height: width)
        case .none, .upsideDown: FrameSize(width: width, height: height)
        }
    }

    /// Writes `source` mirrored (if asked) and then rotated clockwise into
    /// `destination`, whose format is set to the rotated size.
    public func apply(_ orientation: VideoOrientation, from source: VideoFrame, into destination: VideoFrame) {
        let size = Self.rotatedSize(width: source.width, height: source.height, rotation: orientation.rotation)
        destination.setFormat(.nv12(width: size.width, height: size.height,
                                    framesPerSecond: source.format.estimatedFramesPerSecond))
        guard orientation.mirrored else {
            rotate(source, into: destination, orientation.rotation)
            return
        }
        guard orientation.rotation != .none else {
            mirror(source, into: destination)
            return
        }
        intermediate.setFormat(.nv12(width: source.width, height: source.height, framesPerSecond: 0))
        mirror(source, into: intermediate)
        rotate(intermediate, into: destination, orientation.rotation)
    }

    private func mirror(_ s: VideoFrame, into d: VideoFrame) {
        MirrorPlane(s.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(s.yStride),
                    d.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(d.yStride),
                    Int32(s.width), Int32(s.height))
        MirrorUVPlane(s.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(s.uvStride),
                      d.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(d.uvStride),
                      Int32((s.width + 1) / 2), Int32((s.height + 1) / 2))
    }

    private func rotate(_ s: VideoFrame, into d: VideoFrame, _ rotation: VideoOrientation.Rotation) {
        let mode: RotationMode
        switch rotation {
        case .none: mode = kRotate0
        case .clockwise90: mode = kRotate90
        case .upsideDown: mode = kRotate180
        case .clockwise270: mode = kRotate270
        }
        _ = RotatePlane(s.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(s.yStride),
                        d.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(d.yStride),
                        Int32(s.width), Int32(s.height), mode)
        // UV pairs as 16-bit samples; strides in 16-bit units (NV12 strides are even).
        _ = RotatePlane_16(UnsafeRawPointer(s.uvPlane.baseAddress!).assumingMemoryBound(to: UInt16.self), Int32(s.uvStride / 2),
                           d.uvPlane.baseAddress!.assumingMemoryBound(to: UInt16.self), Int32(d.uvStride / 2),
                           Int32((s.width + 1) / 2), Int32((s.height + 1) / 2), mode)
    }
}
