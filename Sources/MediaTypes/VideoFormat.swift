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

/// Bytes per row of each plane of a picture, at most three planes, stored
/// inline: formats are built on the per-frame path, and an `[Int]` here would
/// cost a heap allocation for every frame.
public struct PlaneStrides: Hashable, Sendable, RandomAccessCollection, ExpressibleByArrayLiteral {
    public static let maximumPlanes = 3
    private var first = 0, second = 0, third = 0
    public private(set) var count = 0

    public init(_ strides: some Sequence<Int>) {
        for stride in strides { append(stride) }
    }

    public init(arrayLiteral strides: Int...) {
        self.init(strides)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(plane: Int) -> Int {
        precondition(plane >= 0 && plane < count, "no plane \(plane) in \(count) planes")
        switch plane {
        case 0: return first
        case 1: return second
        default: return third
        }
    }

    public mutating func append(_ stride: Int) {
        precondition(count < Self.maximumPlanes, "at most \(Self.maximumPlanes) planes")
        switch count {
        case 0: first = stride
        case 1: second = stride
        default: third = stride
        }
        count += 1
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
