/// A time per frame, as V4L2 expresses rates (1/30 s rather than 30 fps).
public struct FrameInterval: Hashable, Sendable, CustomStringConvertible {
    public var numerator: UInt32
    public var denominator: UInt32

    public init(numerator: UInt32, denominator: UInt32) {
        self.numerator = numerator
        self.denominator = denominator
    }

    /// The interval closest to 1/fps, kept exact for common rates (30 → 1/30, 29.97 → 1001/30000).
    public init(framesPerSecond fps: Double) {
        precondition(fps > 0, "a frame rate is positive")
        if fps == fps.rounded() { self.init(numerator: 1, denominator: UInt32(fps)); return }
        if (fps * 2) == (fps * 2).rounded() { self.init(numerator: 2, denominator: UInt32(fps * 2)); return }
        let ntsc = (fps * 1001).rounded()
        if abs(ntsc / 1001 - fps) < 1e-6 { self.init(numerator: 1001, denominator: UInt32(ntsc)); return }
        self.init(numerator: 1000, denominator: UInt32((fps * 1000).rounded()))
    }

    public var framesPerSecond: Double {
        numerator == 0 ? 0 : Double(denominator) / Double(numerator)
    }

    public var description: String { "\(numerator)/\(denominator) s" }
}
