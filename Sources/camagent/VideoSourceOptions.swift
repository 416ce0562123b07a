import ArgumentParser
import Logging
import MediaTypes
import VideoSources

/// Options that choose and shape a video source; shared by capture and publish.
struct VideoSourceOptions: ParsableArguments {
    @Option(name: .customLong("device"), help: "Camera: a node (/dev/videoN), a /dev/v4l/by-id or by-path link, a card name ('camagent devices' lists them) or usb:VID:PID[:SERIAL]; or 'test-pattern'. Default: the first camera, else the test pattern. publish takes it more than once: one stream per camera.")
    var devices: [String] = []

    /// The camera, for the commands that take one.
    var device: String? { devices.first }

    @Option(help: "Frame size WxH; the nearest the device offers is used.", transform: { text in
        guard let size = FrameSize(parsing: text), size.width <= 16384, size.height <= 16384 else {
            throw ValidationError("--size takes WxH, e.g. 1280x720")
        }
        return size
    })
    var size: FrameSize = FrameSize(width: 1280, height: 720)

    @Option(help: "Desired frames per second; the highest offered at or below it is used (else the lowest).")
    var fps: Double = 30

    @Option(help: "Pixel format from the device: auto, nv12, yuyv or mjpeg.", transform: { text in
        guard let f = FormatPreference(name: text) else { throw ValidationError("--format takes auto, nv12, yuyv or mjpeg") }
        return f
    })
    var format: FormatPreference = .auto

    @Flag(help: "Fail instead of using the nearest size or rate when the device does not offer exactly what was asked.")
    var exact = false

    @Option(help: "Camera mounting rotation in degrees clockwise: 0, 90, 180 or 270.", transform: { text in
        guard let degrees = Int(text), let r = VideoOrientation.Rotation(rawValue: degrees) else {
            throw ValidationError("--rotation takes 0, 90, 180 or 270")
        }
        return r
    })
    var rotation: VideoOrientation.Rotation = .none

    @Flag(help: "The camera image is mirrored horizontally.")
    var mirror = false

    @Flag(help: "Rotate and mirror the pixels (by default orientation is only carried as frame metadata).")
    var rotatePixels = false

    @Option(help: "mmap buffers to ask the driver for.")
    var buffers = 4

    @Option(help: "Seconds without a frame before the device counts as stalled.")
    var frameTimeout: Double = 10

    @Flag(inversion: .prefixedNo, help: "After the device is lost (the camera, or the microphone), wait for it to come back and resume.")
    var reconnect = false

    @Flag(help: "Let the frame-rate governor act when the delivered rate stays low (turn off exposure priority, renegotiate).")
    var adapt = false

    func validate() throws {
        guard fps > 0, fps <= 1000 else { throw ValidationError("--fps must be between 0 and 1000") }
        guard buffers >= 1, buffers <= 32 else { throw ValidationError("--buffers must be between 1 and 32") }
        // Bounded: infinity passed "> 0" and trapped when made into milliseconds.
        guard frameTimeout > 0, frameTimeout <= 3600 else { throw ValidationError("--frame-timeout must be between 0 and 3600 seconds") }
        for device in devices where device != "test-pattern" && device != "none" {
            do { _ = try DeviceName(parsing: device) } catch { throw ValidationError(error.description) }
        }
        if devices.count > 1 && devices.contains("none") { throw ValidationError("--device none leaves out video: it cannot go with other cameras") }
    }

    var orientation: VideoOrientation { VideoOrientation(rotation: rotation, mirrored: mirror) }

    var isTestPattern: Bool { device == "test-pattern" }

    /// The device to open: the one given, else the first capture device, else
    /// the test pattern (said plainly on stderr).
    func resolvedDevice(logger: Logger) -> String {
        if let device { return device }
        if let first = VideoDevices.list().first {
            printError("camagent: using \(first.path) (\(first.card))")
            return first.path
        }
        printError("camagent: no camera found; using the built-in test pattern")
        return "test-pattern"
    }

    func captureOptions() -> V4L2CaptureOptions {
        var options = V4L2CaptureOptions(request: NegotiationRequest(size: size, framesPerSecond: fps, format: format, exact: exact))
        options.bufferCount = buffers
        options.orientation = orientation
        options.rotatePixels = rotatePixels
        options.frameTimeout = .milliseconds(Int64(frameTimeout * 1000))
        options.reconnect = reconnect
        options.adapt = adapt
        return options
    }

    /// A capturer for the resolved device.
    func makeCapture(device: String, logger: Logger) -> any VideoCapture {
        if device == "test-pattern" {
            return TestPatternCapture(size: size, framesPerSecond: fps, orientation: orientation,
                                      rotatePixels: rotatePixels, logger: logger)
        }
        return V4L2VideoCapture(device: device, options: captureOptions(), logger: logger)
    }
}

extension CaptureSettings {
    /// The lines `capture` and `publish` print after negotiation.
    var negotiationText: String {
        let fmt = deviceFormat
        var lines = [
            "device:    \(device) — \(card) (driver \(driver), bus \(busInfo))",
            "format:    \(fmt.pixelFormat) \(fmt.width)x\(fmt.height), \(fmt.bytesPerRow[0]) bytes per row → NV12 \(outputFormat.width)x\(outputFormat.height)",
            "rate:      asked \(requestedFramesPerSecond.formatted(decimals: 2)) fps, granted \(grantedFramesPerSecond.formatted(decimals: 2)) fps",
            "buffers:   \(bufferCount) mmap",
        ]
        if requestedSize != fmt.size { lines.append("size:      asked \(requestedSize), using \(fmt.size) (nearest offered)") }
        if !orientation.isUpright {
            lines.append("rotation:  \(orientation) \(rotatesPixels ? "(pixels rotated)" : "(metadata only)")")
        }
        return lines.joined(separator: "\n")
    }
}
