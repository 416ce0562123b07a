import MediaTypes

/// An open, validated V4L2 capture node.
///
/// Opening follows one fixed sequence with a distinct error for each step
/// (as µStreamer and libcamera do): the path exists, it is a character
/// device, it opens, it answers VIDIOC_QUERYCAP, and it can capture video
/// by streaming through the single-planar API.
final class V4L2Device {
    let path: String
    let kernel: any V4L2Kernel
    let fd: Int32
    let capabilities: V4L2Capabilities

    private init(path: String, kernel: any V4L2Kernel, fd: Int32, capabilities: V4L2Capabilities) {
        self.path = path
        self.kernel = kernel
        self.fd = fd
        self.capabilities = capabilities
    }

    deinit { kernel.close(fd) }

    static func open(path: String, kernel: any V4L2Kernel) throws(CaptureError) -> V4L2Device {
        let isCharacterDevice: Bool
        do {
            isCharacterDevice = try kernel.isCharacterDevice(path: path)
        } catch {
            throw openError(error, path: path)
        }
        guard isCharacterDevice else {
            throw .notACaptureDevice(device: path, reason: "not a character device")
        }
        let fd: Int32
        do {
            fd = try kernel.open(path: path)
        } catch {
            throw openError(error, path: path)
        }
        let capabilities: V4L2Capabilities
        do {
            capabilities = try kernel.queryCapabilities(fd)
        } catch {
            kernel.close(fd)
            if error == .notATypewriter || error == .invalidArgument {
                throw .notACaptureDevice(device: path, reason: "not a V4L2 device")
            }
            throw openError(error, path: path)
        }
        let flags = capabilities.flags
        if !flags.contains(.videoCapture) {
            kernel.close(fd)
            if flags.contains(.videoCaptureMultiplanar) { throw .multiplanarNotSupported(device: path) }
            let what = flags.contains(.videoOutput) || flags.contains(.videoOutputMultiplanar)
                ? "it is a video output node" : "it has no video capture capability"
            throw .notACaptureDevice(device: path, reason: what)
        }
        if !flags.contains(.streaming) {
            kernel.close(fd)
            throw .notACaptureDevice(device: path, reason: "it does not support streaming I/O")
        }
        return V4L2Device(path: path, kernel: kernel, fd: fd, capabilities: capabilities)
    }

    /// Maps an errno from stat/open/querycap to what the user can act on.
    static func openError(_ error: Errno, path: String) -> CaptureError {
        switch error {
        case .noSuchFile, .noDevice, .noDeviceOrAddress: .noSuchDevice(device: path)
        case .accessDenied, .notPermitted: .permissionDenied(device: path)
        case .busy: .busy(device: path)
        case .notATypewriter, .invalidArgument: .notACaptureDevice(device: path, reason: "not a V4L2 device")
        default: .driverError(device: path, operation: "open", errno: error.code)
        }
    }

    /// Maps an errno from a call made while configuring or streaming.
    func error(_ error: Errno, during operation: String) -> CaptureError {
        if error.meansDeviceGone { return .deviceLost(device: path) }
        if error == .busy { return .busy(device: path) }
        return .driverError(device: path, operation: operation, errno: error.code)
    }

    // MARK: enumeration

    /// Guards against drivers that never end a list with EINVAL.
    private static let enumerationLimit: UInt32 = 512

    /// Every format with its sizes; emulated ones are kept but flagged.
    func formats() throws(CaptureError) -> [DeviceFormatOption] {
        var result: [DeviceFormatOption] = []
        for index in 0..<Self.enumerationLimit {
            let entry: V4L2FormatEntry
            do {
                entry = try kernel.enumerateFormat(fd, index: index)
            } catch {
                if error == .invalidArgument { break }
                throw self.error(error, during: "VIDIOC_ENUM_FMT")
            }
            result.append(DeviceFormatOption(entry: entry, sizes: frameSizes(entry.pixelFormat)))
        }
        return result
    }

    /// Sizes of one format; a driver that cannot enumerate them yields none.
    func frameSizes(_ pixelFormat: PixelFormat) -> [V4L2FrameSizeEntry] {
        var sizes: [V4L2FrameSizeEntry] = []
        for index in 0..<Self.enumerationLimit {
            guard let entry = try? kernel.enumerateFrameSize(fd, pixelFormat: pixelFormat, index: index) else { break }
            sizes.append(entry)
            if case .discrete = entry { continue }
            break  // stepwise and continuous come as a single entry
        }
        return sizes
    }

    /// Intervals of one format at one size; none if the driver cannot say.
    func frameIntervals(_ pixelFormat: PixelFormat, _ size: FrameSize) -> [V4L2FrameIntervalEntry] {
        var intervals: [V4L2FrameIntervalEntry] = []
        for index in 0..<Self.enumerationLimit {
            guard let entry = try? kernel.enumerateFrameInterval(fd, pixelFormat: pixelFormat, size: size, index: index) else { break }
            intervals.append(entry)
            if case .discrete = entry { continue }
            break
        }
        return intervals
    }

    func negotiator() throws(CaptureError) -> FormatNegotiator {
        let formats = try formats()
        return FormatNegotiator(device: path, formats: formats, intervals: { [self] in frameIntervals($0, $1) })
    }

    /// Whether the device has a control, and its value.
    func control(_ id: UInt32) -> (info: V4L2ControlInfo, value: Int32)? {
        guard let info = try? kernel.queryControl(fd, id: id), !info.isDisabled,
              let value = try? kernel.getControl(fd, id: id) else { return nil }
        return (info, value)
    }
}
