import MediaTypes

/// Lists and describes V4L2 capture devices.
public enum VideoDevices {
    /// Every node under /dev that can capture video (output and memory-to-memory nodes are left out).
    public static func list() -> [VideoDeviceDescription] {
        list(kernel: LibV4L2Kernel(), tree: .system)
    }

    /// Describes the camera `name` names (a path, a card name, a USB id: see
    /// `DeviceName`), or says why there is none or it is not a capture device.
    public static func describe(name: String) throws(CaptureError) -> VideoDeviceDescription {
        let kernel = LibV4L2Kernel()
        let resolver = DeviceNameResolver(tree: .system, kernel: kernel)
        let path = try resolver.resolve((try? DeviceName(parsing: name)) ?? .path(name))
        return try describe(path: path, kernel: kernel, tree: .system, cardIsUnique: cardIsUnique(path, resolver))
    }

    static func list(kernel: any V4L2Kernel, tree: DeviceTree) -> [VideoDeviceDescription] {
        let resolver = DeviceNameResolver(tree: tree, kernel: kernel)
        let cards = resolver.cameras().map(\.card)
        return DeviceDiscovery.videoNodes(in: tree.dev).compactMap { path in
            guard let d = try? describe(path: path, kernel: kernel, tree: tree, cardIsUnique: false) else { return nil }
            return cards.filter({ $0 == d.card }).count == 1 ? describe(d, cardIsUnique: true) : d
        }
    }

    private static func cardIsUnique(_ path: String, _ resolver: DeviceNameResolver) -> Bool {
        let cameras = resolver.cameras()
        guard let card = cameras.first(where: { $0.path == path })?.card else { return false }
        return cameras.filter { $0.card == card }.count == 1
    }

    /// The description with its card name counted among the names (when no other camera has it).
    private static func describe(_ d: VideoDeviceDescription, cardIsUnique: Bool) -> VideoDeviceDescription {
        var d = d
        d.names = d.stableNames + [d.usbID].compactMap { $0 } + (cardIsUnique ? [d.card] : [])
        return d
    }

    static func describe(path: String, kernel: any V4L2Kernel, tree: DeviceTree,
                         cardIsUnique: Bool) throws(CaptureError) -> VideoDeviceDescription {
        let device = try V4L2Device.open(path: path, kernel: kernel)
        let formats = try device.formats().map { option in
            VideoDeviceDescription.Format(
                fourcc: option.entry.pixelFormat.name, description: option.entry.description,
                compressed: option.entry.isCompressed, emulated: option.entry.isEmulated,
                sizes: option.sizes.map { describe($0, format: option.entry.pixelFormat, device: device) })
        }
        let caps = device.capabilities
        let names = DeviceNameResolver(tree: tree, kernel: kernel).names(of: path, card: caps.card)
        let description = VideoDeviceDescription(path: path, card: caps.card, driver: caps.driver, busInfo: caps.busInfo,
                                                 stableNames: names.links, usbID: names.usb?.description, names: [],
                                                 formats: formats)
        return describe(description, cardIsUnique: cardIsUnique)
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
