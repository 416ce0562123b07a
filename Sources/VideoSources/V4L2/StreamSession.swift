import Logging
import MediaTypes
import PixelConversion

/// One open, negotiated device with its buffers, pool and converter: the
/// runtime state of a capture.
///
/// Owned by one thread at a time: the caller of `initialize`/`stop` while
/// not streaming, the capture thread while streaming. The hand-over is
/// ordered by thread creation and `pthread_join`, hence `@unchecked Sendable`.
final class StreamSession: @unchecked Sendable {
    let device: V4L2Device
    let negotiator: FormatNegotiator
    let options: V4L2CaptureOptions
    private(set) var plan: NegotiationPlan
    private(set) var deviceFormat: V4L2PixFormat
    private(set) var grantedRate: Double
    private(set) var buffers: MappedBuffers?
    private(set) var converter: FrameConverter
    private(set) var pool: VideoFramePool
    /// Frame the picture is converted into before rotation (`--rotate-pixels` only).
    private(set) var rotationScratch: VideoFrame?
    private(set) var rotator: PixelRotator?

    var path: String { device.path }
    var isStreaming: Bool { buffers != nil }

    /// Opens `path`, validates it and negotiates per `options`.
    init(path: String, kernel: any V4L2Kernel, options: V4L2CaptureOptions, logger: Logger) throws(CaptureError) {
        device = try V4L2Device.open(path: path, kernel: kernel)
        negotiator = try device.negotiator()
        self.options = options
        let plan = try negotiator.plan(for: options.request)
        let (format, rate) = try Self.apply(plan, to: device, logger: logger)
        self.plan = plan
        deviceFormat = format
        grantedRate = rate
        converter = FrameConverter(deviceFormat: format)
        pool = Self.makePool(for: format, options: options)
        rotationScratch = Self.makeScratch(for: format, options: options)
        rotator = rotationScratch.map { _ in PixelRotator(maxWidth: format.width, maxHeight: format.height) }
    }

    /// Sets format and interval on the device; returns what the driver granted.
    private static func apply(_ plan: NegotiationPlan, to device: V4L2Device, logger: Logger)
        throws(CaptureError) -> (V4L2PixFormat, Double)
    {
        let kernel = device.kernel
        let wanted = V4L2PixFormat(pixelFormat: plan.pixelFormat, width: plan.size.width,
                                   height: plan.size.height, bytesPerLine: 0, sizeImage: 0)
        let granted: V4L2PixFormat
        do {
            granted = try kernel.setFormat(device.fd, wanted)
        } catch {
            throw device.error(error, during: "VIDIOC_S_FMT")
        }
        guard granted.pixelFormat == plan.pixelFormat else {
            throw .formatNotSupported(device: device.path, requested: plan.pixelFormat.name,
                                      available: [granted.pixelFormat.name])
        }
        if granted.width != plan.size.width || granted.height != plan.size.height {
            logger.notice("driver adjusted the size", metadata: [
                "device": "\(device.path)", "asked": "\(plan.size)", "granted": "\(granted.width)x\(granted.height)",
            ])
        }
        var format = granted
        // Some drivers leave bytesperline at 0 for packed formats: derive it.
        if format.bytesPerLine == 0 {
            format.bytesPerLine = format.pixelFormat == .yuyv ? format.width * 2 : format.width
        }

        var rate = plan.framesPerSecond
        do {
            if let interval = plan.interval {
                let parameters = try kernel.setFrameInterval(device.fd, interval)
                if parameters.supportsFrameInterval, parameters.frameInterval.framesPerSecond > 0 {
                    rate = parameters.frameInterval.framesPerSecond
                }
            } else {
                let parameters = try kernel.getStreamParameters(device.fd)
                if parameters.frameInterval.framesPerSecond > 0 { rate = parameters.frameInterval.framesPerSecond }
            }
        } catch {
            // Drivers without S_PARM (ENOTTY/EINVAL) stream at their own rate.
            if error.meansDeviceGone || error == .busy { throw device.error(error, during: "VIDIOC_S_PARM") }
            logger.debug("driver does not take a frame interval", metadata: ["device": "\(device.path)", "error": "\(error)"])
        }
        return (format, rate)
    }

    private static func outputSize(for format: V4L2PixFormat, options: V4L2CaptureOptions) -> FrameSize {
        let quarterTurn = options.rotatePixels &&
            (options.orientation.rotation == .clockwise90 || options.orientation.rotation == .clockwise270)
        return quarterTurn ? FrameSize(width: format.height, height: format.width)
                           : FrameSize(width: format.width, height: format.height)
    }

    private static func makePool(for format: V4L2PixFormat, options: V4L2CaptureOptions) -> VideoFramePool {
        let size = outputSize(for: format, options: options)
        return VideoFramePool(count: options.poolSize, maxWidth: size.width, maxHeight: size.height)
    }

    private static func makeScratch(for format: V4L2PixFormat, options: V4L2CaptureOptions) -> VideoFrame? {
        guard options.rotatePixels, !options.orientation.isUpright else { return nil }
        return VideoFrame(maxWidth: format.width, maxHeight: format.height)
    }

    /// The NV12 format frames are delivered in.
    var outputFormat: VideoFormat {
        let size = Self.outputSize(for: deviceFormat, options: options)
        return .nv12(width: size.width, height: size.height, framesPerSecond: grantedRate,
                     captureDelay: estimatedCaptureDelay)
    }

    /// About one frame interval: exposure and readout happen before the
    /// kernel stamps the buffer.
    var estimatedCaptureDelay: Duration {
        grantedRate > 0 ? .nanoseconds(Int64(1e9 / grantedRate)) : .zero
    }

    var settings: CaptureSettings {
        let caps = device.capabilities
        var bytesPerRow: PlaneStrides = [deviceFormat.bytesPerLine]
        if deviceFormat.pixelFormat == .nv12 { bytesPerRow.append(deviceFormat.bytesPerLine) }
        return CaptureSettings(
            device: device.path, card: caps.card, driver: caps.driver, busInfo: caps.busInfo,
            deviceFormat: VideoFormat(pixelFormat: deviceFormat.pixelFormat, width: deviceFormat.width,
                                      height: deviceFormat.height, bytesPerRow: bytesPerRow,
                                      estimatedFramesPerSecond: grantedRate, estimatedCaptureDelay: estimatedCaptureDelay),
            outputFormat: outputFormat, requestedSize: options.request.size,
            requestedFramesPerSecond: options.request.framesPerSecond, grantedFramesPerSecond: grantedRate,
            bufferCount: buffers?.count ?? options.bufferCount, orientation: options.orientation,
            rotatesPixels: options.rotatePixels)
    }

    /// Maps buffers, queues them all and starts streaming.
    func startStreaming() throws(CaptureError) {
        guard buffers == nil else { return }
        let mapped = try MappedBuffers(device: device, count: options.bufferCount)
        do {
            for index in 0..<mapped.count { try device.kernel.queueBuffer(device.fd, index: index) }
            try device.kernel.streamOn(device.fd)
        } catch {
            _ = consume mapped
            _ = try? device.kernel.requestBuffers(device.fd, count: 0)
            if error == .noSpace {
                let f = deviceFormat
                throw .bandwidthExceeded(device: device.path,
                                         format: "\(f.pixelFormat.name) \(f.width)x\(f.height) at \(grantedRate.formatted(decimals: 0)) fps")
            }
            throw device.error(error, during: "VIDIOC_STREAMON")
        }
        buffers = consume mapped
    }

    /// Stops streaming and hands every buffer back to the driver. Errors are
    /// ignored: this also runs after the device is gone.
    func stopStreaming() {
        guard buffers != nil else { return }
        try? device.kernel.streamOff(device.fd)
        buffers = nil
        _ = try? device.kernel.requestBuffers(device.fd, count: 0)
    }

    /// Applies another plan while open (the governor's renegotiation).
    func renegotiate(to newPlan: NegotiationPlan, logger: Logger) throws(CaptureError) {
        let wasStreaming = isStreaming
        stopStreaming()
        let (format, rate) = try Self.apply(newPlan, to: device, logger: logger)
        plan = newPlan
        deviceFormat = format
        grantedRate = rate
        converter = FrameConverter(deviceFormat: format)
        let size = Self.outputSize(for: format, options: options)
        if VideoFrame.byteCount(of: .nv12(width: size.width, height: size.height, framesPerSecond: 0)) > pool.frameCapacity {
            pool = Self.makePool(for: format, options: options)
        }
        rotationScratch = Self.makeScratch(for: format, options: options)
        rotator = rotationScratch.map { _ in PixelRotator(maxWidth: format.width, maxHeight: format.height) }
        if wasStreaming { try startStreaming() }
    }

    /// The bytes of a dequeued buffer that hold the picture (v4l2loopback can
    /// report more than the buffer really has; never read past its end).
    func bytes(of buffer: V4L2DequeuedBuffer) -> UnsafeRawBufferPointer? {
        guard let list = buffers?.buffers, buffer.index >= 0, buffer.index < list.count else { return nil }
        let mapped = list[buffer.index]
        return UnsafeRawBufferPointer(start: mapped.address, count: min(buffer.bytesUsed, mapped.length))
    }
}
