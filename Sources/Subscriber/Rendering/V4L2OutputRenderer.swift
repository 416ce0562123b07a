import MediaTypes
import PixelConversion
import VideoSources
#if canImport(Glibc)
import Glibc
#endif

/// Video into a V4L2 output node: the writer side of a v4l2loopback device,
/// which any program then opens as a camera. The node is checked at once
/// (it exists, it is a character device); its format is set at the first
/// frame, to that frame's size: NV12 when the node takes it, else YUYV
/// (converted, through buffers allocated once). Frames of another size
/// later are counted and left out: a reader negotiated the first.
public final class V4L2OutputRenderer: VideoRenderer, @unchecked Sendable {   // one receive thread at a time
    public let path: String
    private var writer: V4L2OutputWriter?
    private var packed: UnsafeMutableRawBufferPointer?
    private var scratch: UnsafeMutableRawBufferPointer?
    public private(set) var framesWritten = 0
    public private(set) var framesOfAnotherSize = 0

    public init(device path: String) throws(RenderError) {
        self.path = path
        var info = stat()
        guard stat(path, &info) == 0 else {
            let error: CaptureError = errno == ENOENT ? .noSuchDevice(device: path) : .permissionDenied(device: path)
            throw RenderError(error, target: path)
        }
        guard info.st_mode & S_IFMT == S_IFCHR else {
            let error: CaptureError = .notACaptureDevice(device: path, reason: "not a character device: video goes to a v4l2loopback node")
            throw RenderError(error, target: path)
        }
    }

    deinit {
        packed?.deallocate()
        scratch?.deallocate()
    }

    /// What the node took, once the first frame set it ("NV12 640x480").
    public var negotiated: String? { writer.map { "\($0.format) \($0.size.width)x\($0.size.height)" } }

    public func render(_ frame: VideoFrame) throws(RenderError) {
        if writer == nil { try open(for: frame) }
        guard let writer else { return }
        guard writer.size.width == frame.width, writer.size.height == frame.height else {
            framesOfAnotherSize += 1
            return
        }
        do {
            if writer.format == .nv12 {
                try writer.write(UnsafeRawBufferPointer(start: frame.yPlane.baseAddress,
                                                        count: VideoFrame.byteCount(of: frame.format)))
            } else if let packed, let scratch {
                NV12Conversion.nv12ToYUYV(frame, into: packed, scratch: scratch)
                try writer.write(UnsafeRawBufferPointer(packed))
            }
        } catch {
            throw RenderError(error, target: path)
        }
        framesWritten += 1
    }

    public func finish() throws(RenderError) { writer = nil }

    private func open(for frame: VideoFrame) throws(RenderError) {
        let size = FrameSize(width: frame.width, height: frame.height)
        do {
            // NV12 as decoded, when the node takes it (no conversion, one copy into the driver).
            writer = try V4L2OutputWriter(device: path, format: .nv12, size: size)
        } catch .formatNotSupported {
            do { writer = try V4L2OutputWriter(device: path, format: .yuyv, size: size) } catch {
                throw RenderError(error, target: path)
            }
            packed = .allocate(byteCount: size.width * 2 * size.height, alignment: 64)
            scratch = .allocate(byteCount: NV12Conversion.i420ByteCount(width: size.width, height: size.height), alignment: 64)
        } catch {
            throw RenderError(error, target: path)
        }
    }
}
