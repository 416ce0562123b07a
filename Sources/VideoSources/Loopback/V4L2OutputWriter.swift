import MediaTypes

/// Writes whole frames into a V4L2 output node (the writer side of a
/// v4l2loopback device), for the self-test and for feeding test frames.
public final class V4L2OutputWriter {
    public let path: String
    public let format: PixelFormat
    public let size: FrameSize
    /// Bytes of one frame in the negotiated format.
    public let frameBytes: Int
    private let kernel: any V4L2Kernel
    private let fd: Int32

    /// Opens `path` and sets its output format (YUYV or NV12 at `size`).
    public convenience init(device path: String, format: PixelFormat, size: FrameSize) throws(CaptureError) {
        try self.init(device: path, format: format, size: size, kernel: LibV4L2Kernel())
    }

    init(device path: String, format: PixelFormat, size: FrameSize, kernel: any V4L2Kernel) throws(CaptureError) {
        precondition(format == .yuyv || format == .nv12, "the writer sends YUYV or NV12")
        self.path = path
        self.kernel = kernel
        let isCharacterDevice: Bool
        do throws(Errno) {
            isCharacterDevice = try kernel.isCharacterDevice(path: path)
            fd = isCharacterDevice ? try kernel.open(path: path) : -1
        } catch {
            throw V4L2Device.openError(error, path: path)
        }
        guard isCharacterDevice else { throw .notACaptureDevice(device: path, reason: "not a character device") }
        let bytesPerLine = format == .yuyv ? size.width * 2 : size.width
        let image = format == .yuyv ? bytesPerLine * size.height : bytesPerLine * size.height * 3 / 2
        let granted: V4L2PixFormat
        do throws(Errno) {
            // Only S_FMT on the output type tells: v4l2loopback with exclusive_caps
            // stops announcing its output side once a writer has used it.
            _ = try kernel.queryCapabilities(fd)
            granted = try kernel.setOutputFormat(fd, V4L2PixFormat(pixelFormat: format, width: size.width, height: size.height,
                                                                   bytesPerLine: bytesPerLine, sizeImage: image))
        } catch {
            kernel.close(fd)
            if error == .notATypewriter || error == .invalidArgument {
                throw .notACaptureDevice(device: path, reason: "not a video output node (is another writer attached?)")
            }
            if error == .busy { throw .busy(device: path) }
            throw .driverError(device: path, operation: "VIDIOC_S_FMT (output)", errno: error.code)
        }
        guard granted.pixelFormat == format, granted.width == size.width, granted.height == size.height else {
            kernel.close(fd)
            throw .formatNotSupported(device: path, requested: "\(format) \(size)",
                                      available: ["\(granted.pixelFormat) \(granted.width)x\(granted.height)"])
        }
        self.format = format
        self.size = size
        frameBytes = max(image, granted.sizeImage > 0 ? min(granted.sizeImage, image) : image)
    }

    deinit { kernel.close(fd) }

    /// Writes one frame of `frameBytes` bytes.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(CaptureError) {
        precondition(bytes.count >= frameBytes, "a frame is \(frameBytes) bytes")
        var offset = 0
        while offset < frameBytes {
            do {
                let n = try kernel.write(fd, UnsafeRawBufferPointer(rebasing: bytes[offset..<frameBytes]))
                offset += max(n, 1)
            } catch {
                if error == .wouldBlock { continue }
                throw error.meansDeviceGone ? .deviceLost(device: path)
                    : .driverError(device: path, operation: "write", errno: error.code)
            }
        }
    }
}
