import MediaTypes

/// Which pixel format the user wants from the device.
public enum FormatPreference: Hashable, Sendable, CustomStringConvertible {
    /// NV12 (passed through) > YUYV (converted) > MJPEG (decoded), with MJPEG
    /// preferred where the raw formats cannot reach the asked rate at that size.
    case auto
    case nv12, yuyv, mjpeg

    public init?(name: String) {
        switch name.lowercased() {
        case "auto": self = .auto
        case "nv12": self = .nv12
        case "yuyv", "yuy2": self = .yuyv
        case "mjpeg", "mjpg", "jpeg": self = .mjpeg
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .auto: "auto"
        case .nv12: "nv12"
        case .yuyv: "yuyv"
        case .mjpeg: "mjpeg"
        }
    }

    /// Device formats that satisfy this preference, in order of preference.
    var acceptedFormats: [PixelFormat] {
        switch self {
        case .auto: [.nv12, .yuyv, .mjpeg, .jpeg]
        case .nv12: [.nv12]
        case .yuyv: [.yuyv]
        case .mjpeg: [.mjpeg, .jpeg]
        }
    }
}

/// What the user asked for.
public struct NegotiationRequest: Hashable, Sendable {
    public var size: FrameSize
    public var framesPerSecond: Double
    public var format: FormatPreference
    /// With `exact`, a size or rate the device does not offer is an error
    /// instead of being replaced by the nearest one.
    public var exact: Bool

    public init(size: FrameSize, framesPerSecond: Double, format: FormatPreference = .auto, exact: Bool = false) {
        self.size = size
        self.framesPerSecond = framesPerSecond
        self.format = format
        self.exact = exact
    }
}

/// A device's format with its sizes, as enumerated.
struct DeviceFormatOption: Hashable, Sendable {
    var entry: V4L2FormatEntry
    var sizes: [V4L2FrameSizeEntry]
}

/// The outcome: what to set on the device.
struct NegotiationPlan: Hashable, Sendable {
    var pixelFormat: PixelFormat
    var size: FrameSize
    /// nil when the device lists no intervals for this size (the driver's default applies).
    var interval: FrameInterval?

    var framesPerSecond: Double { interval?.framesPerSecond ?? 0 }
}

/// Picks format, size and frame interval from what a device offers.
/// Pure: the device is consulted through `intervals` only, so tests script it.
struct FormatNegotiator {
    var device: String
    var formats: [DeviceFormatOption]
    var intervals: (PixelFormat, FrameSize) -> [V4L2FrameIntervalEntry]

    /// Formats camagent can turn into NV12, never an emulated one.
    var usableFormats: [DeviceFormatOption] {
        formats.filter { !$0.entry.isEmulated }
    }

    func plan(for request: NegotiationRequest) throws(CaptureError) -> NegotiationPlan {
        let accepted = request.format.acceptedFormats
        let candidates = accepted.compactMap { pf in usableFormats.first { $0.entry.pixelFormat == pf } }
        guard !candidates.isEmpty else {
            throw .formatNotSupported(
                device: device,
                requested: request.format == .auto ? "any of NV12, YUYV, MJPEG" : request.format.description.uppercased(),
                available: usableFormats.map { $0.entry.pixelFormat.name })
        }

        // For each format: its nearest size and the rate the rule picks there.
        struct Option { var plan: NegotiationPlan; var distance: Int; var rank: Int }
        var options: [Option] = []
        for (rank, candidate) in candidates.enumerated() {
            // A driver that enumerates no sizes (TV and HDMI capture cards, vivid's
            // TV input) is asked for the wanted one: S_FMT then adjusts it to what
            // the driver can do, and the session reads back what was granted.
            let size = candidate.sizes.isEmpty ? request.size : Self.nearestSize(to: request.size, in: candidate.sizes)
            guard let size else { continue }
            let entries = intervals(candidate.entry.pixelFormat, size)
            let interval = FrameRateChoice.choose(desired: request.framesPerSecond, from: entries)
            options.append(Option(
                plan: NegotiationPlan(pixelFormat: candidate.entry.pixelFormat, size: size, interval: interval),
                distance: Self.distance(size, request.size), rank: rank))
        }
        guard let nearest = options.map(\.distance).min() else {
            throw .sizeNotSupported(device: device, requested: request.size, available: [])
        }
        // Nearest size first; among those, a format that reaches the asked rate,
        // in preference order; failing that, the one with the highest rate.
        let atNearest = options.filter { $0.distance == nearest }
        let reaching = atNearest.filter { $0.plan.framesPerSecond + FrameRateChoice.tolerance >= request.framesPerSecond }
        let chosen: Option
        if let first = reaching.min(by: { $0.rank < $1.rank }) {
            chosen = first
        } else {
            chosen = atNearest.max { a, b in
                a.plan.framesPerSecond != b.plan.framesPerSecond
                    ? a.plan.framesPerSecond < b.plan.framesPerSecond : a.rank > b.rank
            }!
        }

        if request.exact {
            try checkExact(chosen.plan, request: request)
        }
        return chosen.plan
    }

    private func checkExact(_ plan: NegotiationPlan, request: NegotiationRequest) throws(CaptureError) {
        guard let option = usableFormats.first(where: { $0.entry.pixelFormat == plan.pixelFormat }) else { return }
        if plan.size != request.size {
            throw .sizeNotSupported(device: device, requested: request.size, available: Self.listedSizes(option.sizes))
        }
        let rate = plan.framesPerSecond
        if abs(rate - request.framesPerSecond) > max(0.01, request.framesPerSecond * 0.001) {
            throw .rateNotSupported(device: device, requested: request.framesPerSecond,
                                    available: FrameRateChoice.listedRates(intervals(plan.pixelFormat, plan.size)))
        }
    }

    /// A plan for the governor when the delivered rate stays too low: MJPEG at
    /// the same size if the device has it and it is not in use, else the next
    /// smaller size of the current format. nil when there is nothing to try.
    func fallback(from current: NegotiationPlan, desiredRate: Double) -> NegotiationPlan? {
        if !current.pixelFormat.isCompressed,
           let mjpeg = usableFormats.first(where: { $0.entry.pixelFormat.isCompressed }),
           let size = Self.nearestSize(to: current.size, in: mjpeg.sizes), size == current.size {
            let interval = FrameRateChoice.choose(desired: desiredRate, from: intervals(mjpeg.entry.pixelFormat, size))
            return NegotiationPlan(pixelFormat: mjpeg.entry.pixelFormat, size: size, interval: interval)
        }
        guard let option = usableFormats.first(where: { $0.entry.pixelFormat == current.pixelFormat }) else { return nil }
        let smaller = Self.listedSizes(option.sizes).filter { $0 < current.size }.max()
        guard let smaller else { return nil }
        let interval = FrameRateChoice.choose(desired: desiredRate, from: intervals(current.pixelFormat, smaller))
        return NegotiationPlan(pixelFormat: current.pixelFormat, size: smaller, interval: interval)
    }

    // MARK: sizes

    /// Distance between sizes: how far apart width and height are.
    static func distance(_ a: FrameSize, _ b: FrameSize) -> Int {
        abs(a.width - b.width) + abs(a.height - b.height)
    }

    /// The offered size nearest the wanted one; ties go to the larger size.
    static func nearestSize(to wanted: FrameSize, in entries: [V4L2FrameSizeEntry]) -> FrameSize? {
        var best: FrameSize?
        func consider(_ s: FrameSize) {
            guard let b = best else { best = s; return }
            let (ds, db) = (distance(s, wanted), distance(b, wanted))
            if ds < db || (ds == db && s > b) { best = s }
        }
        for entry in entries {
            switch entry {
            case .discrete(let s):
                consider(s)
            case .stepwise(let lo, let hi, let step):
                consider(FrameSize(width: snap(wanted.width, lo.width, hi.width, step.width),
                                   height: snap(wanted.height, lo.height, hi.height, step.height)))
            case .continuous(let lo, let hi):
                consider(FrameSize(width: snap(wanted.width, lo.width, hi.width, 1),
                                   height: snap(wanted.height, lo.height, hi.height, 1)))
            }
        }
        return best
    }

    /// `value` clamped to [lo, hi] and rounded to the nearest lo + k*step.
    static func snap(_ value: Int, _ lo: Int, _ hi: Int, _ step: Int) -> Int {
        let clamped = min(max(value, lo), hi)
        let step = max(step, 1)
        let k = (clamped - lo + step / 2) / step
        return min(lo + k * step, hi)
    }

    /// Sizes to quote: discrete sizes, or a range's ends.
    static func listedSizes(_ entries: [V4L2FrameSizeEntry]) -> [FrameSize] {
        var sizes: [FrameSize] = []
        for entry in entries {
            switch entry {
            case .discrete(let s): sizes.append(s)
            case .stepwise(let lo, let hi, _), .continuous(let lo, let hi):
                sizes.append(lo)
                sizes.append(hi)
            }
        }
        return Array(Set(sizes)).sorted()
    }
}
