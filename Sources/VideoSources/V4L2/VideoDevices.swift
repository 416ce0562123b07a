import MediaTypes

/// Lists and describes V4L2 capture devices.
public enum VideoDevices {
    /// Every node under /dev that can capture video (output and memory-to-memory nodes are left out).
    public static func list() -> [VideoDeviceDescription] {
        list(kernel: LibV4L2Kernel(), paths: DeviceDiscovery.videoNodes())
    }

    /// Describes one node, or says why it is not a capture device.
    public static func describe(path: String) throws(CaptureError) -> VideoDeviceDescription {
        try describe(path: path, kernel: LibV4L2Kernel())
    }

    static func list(kernel: any V4L2Kernel, paths: [String]) -> [VideoDeviceDescription] {
        paths.compactMap { try? describe(path: $0, kernel: kernel) }
    }

    static func describe(path: String, kernel: any V4L2Kernel) throws(CaptureError) -> VideoDeviceDescription {
        let device = try V4L2Device.open(path: path, kernel: kernel)
        let formats = try device.formats().map { option in
            VideoDeviceDescription.Format(
                fourcc: option.entry.pixelFormat.name, description: option.entry.description,
                compressed: option.entry.isCompressed, emulated: option.entry.isEmulated,
                sizes: option.sizes.map { describe($0, format: option.entry.pixelFormat, device: device) })
        }
        let caps = device.capabilities
        return VideoDeviceDescription(path: path, card: caps.card, driver: caps.driver, busInfo: caps.busInfo,
                                      stableNames: DeviceDiscovery.stableNames(for: path), formats: formats)
    }

    private static func describe(_ size: V4L2FrameSizeEntry, format: PixelFormat, device: V4L2Device) -> VideoDeviceDescription.Size {
        switch size {
        case .discrete(let s):
            return .init(kind: "discrete", width: s.width, height: s.height,
                         intervals: device.frameIntervals(format, s).map(describe))
        case .stepwise(let lo, let hi, let step):
            return .init(kind: "stepwise", width: lo.width, height: lo.height, maxWidth: hi.width, maxHeight: hi.height,
                         stepWidth: step.width, stepHeight: step.height,
                         intervals: device.frameIntervals(format, hi).map(describe))
        case .continuous(let lo, let hi):
            return .init(kind: "continuous", width: lo.width, height: lo.height, maxWidth: hi.width, maxHeight: hi.height,
                         stepWidth: 1, stepHeight: 1, intervals: device.frameIntervals(format, hi).map(describe))
        }
    }

    private static func describe(_ interval: V4L2FrameIntervalEntry) -> VideoDeviceDescription.Interval {
        switch interval {
        case .discrete(let i):
            return .init(kind: "discrete", numerator: i.numerator, denominator: i.denominator, fps: i.framesPerSecond)
        case .stepwise(let lo, let hi, let step):
            return .init(kind: "stepwise", numerator: lo.numerator, denominator: lo.denominator, fps: lo.framesPerSecond,
                         maxNumerator: hi.numerator, maxDenominator: hi.denominator, minFps: hi.framesPerSecond,
                         stepNumerator: step.numerator, stepDenominator: step.denominator)
        case .continuous(let lo, let hi):
            return .init(kind: "continuous", numerator: lo.numerator, denominator: lo.denominator, fps: lo.framesPerSecond,
                         maxNumerator: hi.numerator, maxDenominator: hi.denominator, minFps: hi.framesPerSecond)
        }
    }
}
