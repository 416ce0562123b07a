/// Chooses a frame interval from what a device offers at one format and size.
///
/// The rule: the highest rate at or below the desired one; if every rate is
/// above it, the lowest. (The OpenTok iOS sample takes the highest rate
/// strictly below and gives up when none qualifies; that fails for a camera
/// whose only rate is 30 when 30 is asked, and for one that only does 60.)
enum FrameRateChoice {
    /// Rates within this many fps count as equal (29.97 offered, 29.97 asked).
    static let tolerance = 0.001

    static func choose(desired: Double, from entries: [V4L2FrameIntervalEntry]) -> FrameInterval? {
        var bestAtOrBelow: FrameInterval?
        var lowest: FrameInterval?
        func consider(_ interval: FrameInterval) {
            let rate = interval.framesPerSecond
            guard rate > 0 else { return }
            if rate <= desired + tolerance, rate > (bestAtOrBelow?.framesPerSecond ?? 0) { bestAtOrBelow = interval }
            if lowest == nil || rate < lowest!.framesPerSecond { lowest = interval }
        }
        for entry in entries {
            switch entry {
            case .discrete(let interval):
                consider(interval)
            case .stepwise(let minInterval, let maxInterval, let step):
                consider(maxInterval)  // the lowest rate of the range
                if let snapped = snappedInterval(desired: desired, min: minInterval, max: maxInterval, step: step) {
                    consider(snapped)
                }
            case .continuous(let minInterval, let maxInterval):
                consider(maxInterval)
                if let snapped = snappedInterval(desired: desired, min: minInterval, max: maxInterval, step: nil) {
                    consider(snapped)
                }
            }
        }
        return bestAtOrBelow ?? lowest
    }

    /// The shortest interval in the range that is at least 1/desired (so its
    /// rate is at or below the desired one), or nil if the whole range is faster.
    private static func snappedInterval(desired: Double, min: FrameInterval, max: FrameInterval,
                                        step: FrameInterval?) -> FrameInterval? {
        guard desired > 0 else { return nil }
        if min.framesPerSecond <= desired + tolerance { return min }  // the fastest rate already qualifies
        if max.framesPerSecond > desired + tolerance { return nil }
        let wanted = FrameInterval(framesPerSecond: desired)
        guard let step, step.numerator > 0 else { return wanted }
        // interval = min + k * step, with the smallest k making it >= wanted; exact rational arithmetic.
        let (a, b) = (UInt64(min.numerator), UInt64(min.denominator))
        let (c, e) = (UInt64(step.numerator), UInt64(step.denominator))
        let (w, x) = (UInt64(wanted.numerator), UInt64(wanted.denominator))
        // k >= (w/x - a/b) / (c/e) = (w*b - a*x) * e / (x * b * c)
        let numerator = (w * b).subtractingReportingOverflow(a * x)
        guard !numerator.overflow else { return min }
        let top = numerator.partialValue * e
        let bottom = x * b * c
        let k = (top + bottom - 1) / bottom
        var n = a * e + k * c * b
        var d = b * e
        let g = gcd(n, d)
        n /= g
        d /= g
        guard n <= UInt64(UInt32.max), d <= UInt64(UInt32.max) else { return wanted }
        let interval = FrameInterval(numerator: UInt32(n), denominator: UInt32(d))
        return interval.framesPerSecond < max.framesPerSecond ? max : interval
    }

    private static func gcd(_ a: UInt64, _ b: UInt64) -> UInt64 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return Swift.max(a, 1)
    }

    /// The rates to quote in an error message: discrete rates, or a range's ends.
    static func listedRates(_ entries: [V4L2FrameIntervalEntry]) -> [Double] {
        var rates: [Double] = []
        for entry in entries {
            switch entry {
            case .discrete(let i): rates.append(i.framesPerSecond)
            case .stepwise(let lo, let hi, _), .continuous(let lo, let hi):
                rates.append(hi.framesPerSecond)
                rates.append(lo.framesPerSecond)
            }
        }
        return Array(Set(rates)).sorted(by: >)
    }
}
