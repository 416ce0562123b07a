/// The shape of the frames a capturer produces, in the OpenTok `VideoFormat` sense:
/// pixel format, size, bytes per row of each plane, and the estimates a consumer
/// (an encoder, a pacer) plans with.
public struct VideoFormat: Hashable, Sendable, CustomStringConvertible {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    /// Bytes per row for each plane (one entry for packed formats, two for NV12).
    public var bytesPerRow: PlaneStrides
    /// Frames per second the device was granted (not the one asked for).
    public var estimatedFramesPerSecond: Double
    /// Time from exposure to the frame reaching the consumer, as estimated.
    public var estimatedCaptureDelay: Duration

    public init(
        pixelFormat: PixelFormat, width: Int, height: Int, bytesPerRow: PlaneStrides,
        estimatedFramesPerSecond: Double, estimatedCaptureDelay: Duration = .zero
    ) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.bytesPerRow = bytesPerRow
        self.estimatedFramesPerSecond = estimatedFramesPerSecond
        self.estimatedCaptureDelay = estimatedCaptureDelay
    }

    /// An NV12 format with tight strides (Y: width, UV: width rounded up to even).
    public static func nv12(width: Int, height: Int, framesPerSecond: Double,
                            captureDelay: Duration = .zero) -> VideoFormat {
        let uvStride = (width + 1) & ~1
        return VideoFormat(pixelFormat: .nv12, width: width, height: height,
                           bytesPerRow: [width, uvStride],
                           estimatedFramesPerSecond: framesPerSecond,
                           estimatedCaptureDelay: captureDelay)
    }

    public var size: FrameSize { FrameSize(width: width, height: height) }

    public var description: String {
        let fps = estimatedFramesPerSecond.formatted(decimals: 2)
        return "\(pixelFormat) \(width)x\(height) @ \(fps) fps"
    }
}
