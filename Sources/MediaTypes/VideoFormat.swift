/// Width and height of a picture in pixels.
public struct FrameSize: Hashable, Sendable, CustomStringConvertible, Comparable {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// Parses "1280x720".
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        self.init(width: w, height: h)
    }

    public var pixelCount: Int { width * height }
    public var description: String { "\(width)x\(height)" }

    public static func < (a: FrameSize, b: FrameSize) -> Bool {
        (a.pixelCount, a.width) < (b.pixelCount, b.width)
    }
}

/// The shape of the frames a capturer produces, in the OpenTok `VideoFormat` sense:
/// pixel format, size, bytes per row of each plane, and the estimates a consumer
/// (an encoder, a pacer) plans with.
public struct VideoFormat: Hashable, Sendable, CustomStringConvertible {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    /// Bytes per row for each plane (one entry for packed formats, two for NV12).
    public var bytesPerRow: [Int]
    /// Frames per second the device was granted (not the one asked for).
    public var estimatedFramesPerSecond: Double
    /// Time from exposure to the frame reaching the consumer, as estimated.
    public var estimatedCaptureDelay: Duration

    public init(
        pixelFormat: PixelFormat, width: Int, height: Int, bytesPerRow: [Int],
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

extension Double {
    /// Fixed-point text without Foundation, e.g. 12.5 → "12.50".
    public func formatted(decimals: Int) -> String {
        guard isFinite else { return "\(self)" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(self) * scale).rounded()
        let whole = Int(scaled / scale)
        let fraction = Int(scaled - Double(whole) * scale)
        let sign = self < 0 && scaled != 0 ? "-" : ""
        guard decimals > 0 else { return "\(sign)\(whole)" }
        var digits = String(fraction)
        while digits.count < decimals { digits = "0" + digits }
        return "\(sign)\(whole).\(digits)"
    }
}
