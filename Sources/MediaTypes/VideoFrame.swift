#if canImport(Glibc)
import Glibc
#endif

/// One NV12 picture and what is known about it: when the sensor produced it
/// (kernel timestamp, CLOCK_MONOTONIC), its place in the device's sequence,
/// how the camera is mounted, and a few bytes of metadata.
///
/// Frames are owned by a ``VideoFramePool`` and reused: a capturer fills a free
/// frame and hands it to its consumer; once the consumer drops its last
/// reference the pool gives the frame out again. A consumer must treat a frame
/// as read-only and may keep it as long as it likes (the capturer then uses the
/// pool's other frames, or drops new pictures when none is free).
public final class VideoFrame: @unchecked Sendable {
    /// Bytes of pixel storage, fixed at allocation.
    public let capacity: Int
    private let storage: UnsafeMutableRawPointer

    /// NV12 format of the picture now in the frame.
    public private(set) var format: VideoFormat
    /// When the device captured it (the kernel's buffer timestamp).
    public var timestamp: MonotonicTimestamp = .zero
    /// When the capturer handed it to the consumer; `timestamp` to this is the capture latency.
    public var deliveredAt: MonotonicTimestamp = .zero
    /// The device's sequence number for this picture.
    public var sequence: UInt64 = 0
    public var orientation: VideoOrientation = .upright
    /// True when samples use the full 0-255 range (JPEG/JFIF, so MJPEG
    /// cameras) rather than video's 16-235 luma and 16-240 chroma. Carried
    /// as metadata, like orientation: a consumer signals it or converts.
    public var isFullRange = false
    public var metadata = FrameMetadata()

    /// Allocates a frame able to hold NV12 pictures up to `maxWidth` x `maxHeight`.
    public init(maxWidth: Int, maxHeight: Int) {
        let format = VideoFormat.nv12(width: maxWidth, height: maxHeight, framesPerSecond: 0)
        capacity = Self.byteCount(of: format)
        // 64-byte alignment lets libyuv take its SIMD paths on every row.
        storage = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 64)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: max(capacity, 1))
        self.format = format
    }

    deinit { storage.deallocate() }

    /// Bytes an NV12 picture of this format takes.
    public static func byteCount(of format: VideoFormat) -> Int {
        let chromaRows = (format.height + 1) / 2
        return format.bytesPerRow[0] * format.height + format.bytesPerRow[1] * chromaRows
    }

    /// Sets the picture's size and rate; storage is reused, never reallocated.
    /// Does nothing (and allocates nothing) when the format is unchanged.
    public func setFormat(_ newFormat: VideoFormat) {
        precondition(newFormat.pixelFormat == .nv12 && newFormat.bytesPerRow.count == 2, "frames hold NV12")
        precondition(Self.byteCount(of: newFormat) <= capacity, "format \(newFormat) exceeds the frame's capacity")
        if newFormat != format { format = newFormat }
    }

    /// Sets only the picture's frame rate (in place: no new format is made).
    public func setEstimatedFramesPerSecond(_ rate: Double) {
        format.estimatedFramesPerSecond = rate
    }

    public var width: Int { format.width }
    public var height: Int { format.height }
    public var yStride: Int { format.bytesPerRow[0] }
    public var uvStride: Int { format.bytesPerRow[1] }

    /// The luma plane: `height` rows of `yStride` bytes.
    public var yPlane: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: storage, count: yStride * height)
    }

    /// The interleaved chroma plane (U, V, U, V...): `(height + 1) / 2` rows of `uvStride` bytes.
    public var uvPlane: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: storage + yStride * height, count: uvStride * ((height + 1) / 2))
    }

    /// Copies every field but the storage identity from another frame (for tests and tools).
    public func copy(from other: VideoFrame) {
        setFormat(other.format)
        memcpy(storage, UnsafeRawPointer(other.yPlane.baseAddress!), Self.byteCount(of: other.format))
        timestamp = other.timestamp
        deliveredAt = other.deliveredAt
        sequence = other.sequence
        orientation = other.orientation
        isFullRange = other.isFullRange
        metadata = other.metadata
    }
}
