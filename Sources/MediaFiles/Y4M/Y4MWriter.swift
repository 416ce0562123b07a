#if canImport(Glibc)
import Glibc
#endif
import MediaTypes
import PixelConversion

/// Why a media file could not be written or read, naming the file.
public enum MediaFileError: Error, Hashable, Sendable, CustomStringConvertible {
    case cannotOpen(path: String, errno: Int32)
    case writeFailed(path: String, errno: Int32)
    case malformed(path: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let p, let e): "\(p): cannot open: \(SystemErrorText.describe(e))"
        case .writeFailed(let p, let e): "\(p): write failed: \(SystemErrorText.describe(e))"
        case .malformed(let p, let reason): "\(p): \(reason)"
        }
    }
}

/// Writes NV12 frames as a YUV4MPEG2 file (4:2:0 planar, what ffmpeg and
/// players read). Frames are converted into one I420 buffer allocated at
/// open; nothing is allocated per frame.
public final class Y4MWriter {
    public let path: String
    public let width: Int
    public let height: Int
    private let fd: Int32
    private let scratch: UnsafeMutableRawBufferPointer
    public private(set) var framesWritten = 0

    /// `fullRange` tags the file XCOLORRANGE=FULL (ffmpeg reads it), for MJPEG sources.
    public init(path: String, width: Int, height: Int, framesPerSecond: Double, fullRange: Bool = false) throws(MediaFileError) {
        self.path = path
        self.width = width
        self.height = height
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        scratch = .allocate(byteCount: NV12Conversion.i420ByteCount(width: width, height: height) + 6, alignment: 64)
        let (num, den) = Self.rateFraction(framesPerSecond)
        let range = fullRange ? " XCOLORRANGE=FULL" : ""
        let header = "YUV4MPEG2 W\(width) H\(height) F\(num):\(den) Ip A1:1 C420jpeg\(range)\n"
        // Every stored property is set: a throw from here on runs deinit, which closes
        // the file and frees the buffer (doing it here too was a double free).
        try Self.writeAll(fd, path: path, Array(header.utf8))
    }

    deinit {
        Glibc.close(fd)
        scratch.deallocate()
    }

    /// The Y4M frame-rate fraction for a rate: 30 → 30:1, 12.5 → 25:2, 29.97 → 30000:1001.
    public static func rateFraction(_ fps: Double) -> (Int, Int) {
        guard fps > 0, fps.isFinite else { return (30, 1) }
        if fps == fps.rounded() { return (Int(fps), 1) }
        if (fps * 2) == (fps * 2).rounded() { return (Int(fps * 2), 2) }
        let ntsc = (fps * 1001).rounded()
        if abs(ntsc / 1001 - fps) < 1e-3 { return (Int(ntsc), 1001) }
        return (Int((fps * 1000).rounded()), 1000)
    }

    /// Appends one frame (converted to I420); its size must be the file's.
    public func write(_ frame: VideoFrame) throws(MediaFileError) {
        guard frame.width == width, frame.height == height else {
            throw .malformed(path: path, reason: "frame is \(frame.width)x\(frame.height), file is \(width)x\(height)")
        }
        // "FRAME\n" and the picture go out in one write.
        let marker: [UInt8] = [0x46, 0x52, 0x41, 0x4D, 0x45, 0x0A]
        for (i, b) in marker.enumerated() { scratch[i] = b }
        NV12Conversion.nv12ToI420(frame, into: UnsafeMutableRawBufferPointer(rebasing: scratch[6...]))
        try Self.writeAll(fd, path: path, UnsafeRawBufferPointer(scratch))
        framesWritten += 1
    }

    /// Flushes to disk and closes.
    public func close() throws(MediaFileError) {
        if fsync(fd) != 0 && errno != EINVAL { throw .writeFailed(path: path, errno: errno) }
    }

    private static func writeAll(_ fd: Int32, path: String, _ bytes: [UInt8]) throws(MediaFileError) {
        let result: Result<Void, MediaFileError> = bytes.withUnsafeBytes { raw in
            do throws(MediaFileError) { try writeAll(fd, path: path, raw); return .success(()) } catch { return .failure(error) }
        }
        try result.get()
    }

    private static func writeAll(_ fd: Int32, path: String, _ bytes: UnsafeRawBufferPointer) throws(MediaFileError) {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw .writeFailed(path: path, errno: errno)
            }
            offset += n
        }
    }
}
