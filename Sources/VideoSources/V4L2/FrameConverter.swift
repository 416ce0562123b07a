import MediaTypes

/// Turns one driver buffer into a pooled NV12 frame: the single conversion
/// (or copy) on the capture path, after which the buffer goes straight back
/// to the driver.
struct FrameConverter {
    enum Failure: Error, Hashable { case tooShort, badJPEG }

    let deviceFormat: V4L2PixFormat

    /// Bytes a complete raw picture takes; compressed formats have no minimum.
    var minimumBytes: Int {
        switch deviceFormat.pixelFormat {
        case .yuyv: deviceFormat.bytesPerLine * deviceFormat.height
        case .nv12: deviceFormat.bytesPerLine * deviceFormat.height * 3 / 2
        default: 4
        }
    }

    /// Converts `bytes` (the used part of a driver buffer) into `frame`.
    func convert(_ bytes: UnsafeRawBufferPointer, into frame: VideoFrame) throws(Failure) {
        guard bytes.count >= minimumBytes else { throw .tooShort }
        switch deviceFormat.pixelFormat {
        case .yuyv:
            Self.yuyvToNV12(bytes, stride: deviceFormat.bytesPerLine, into: frame)
        case .nv12:
            Self.copyNV12(bytes, stride: deviceFormat.bytesPerLine, height: deviceFormat.height, into: frame)
        default:
            throw .badJPEG
        }
    }

    // Placeholders until PixelConversion (libyuv) lands.
    static func yuyvToNV12(_ src: UnsafeRawBufferPointer, stride: Int, into frame: VideoFrame) {
        let y = frame.yPlane, uv = frame.uvPlane
        for row in 0..<frame.height {
            let s = src.baseAddress! + row * stride
            for x in 0..<frame.width { y[row * frame.yStride + x] = s.load(fromByteOffset: 2 * x, as: UInt8.self) }
            if row % 2 == 0 {
                for x in Swift.stride(from: 0, to: frame.width, by: 2) {
                    uv[(row / 2) * frame.uvStride + x] = s.load(fromByteOffset: 2 * x + 1, as: UInt8.self)
                    uv[(row / 2) * frame.uvStride + x + 1] = s.load(fromByteOffset: 2 * x + 3, as: UInt8.self)
                }
            }
        }
    }

    static func copyNV12(_ src: UnsafeRawBufferPointer, stride: Int, height: Int, into frame: VideoFrame) {
        for row in 0..<frame.height {
            (frame.yPlane.baseAddress! + row * frame.yStride).copyMemory(from: src.baseAddress! + row * stride, byteCount: frame.width)
        }
        for row in 0..<(frame.height + 1) / 2 {
            (frame.uvPlane.baseAddress! + row * frame.uvStride).copyMemory(from: src.baseAddress! + (height + row) * stride, byteCount: frame.width)
        }
    }
}

/// Placeholder until PixelConversion's rotation lands.
enum PixelRotation {
    static func apply(_ orientation: VideoOrientation, from source: VideoFrame, into destination: VideoFrame) {
        destination.copy(from: source)
    }
}
