extension Double {
    /// Fixed-point text without Foundation, e.g. 12.5 → "12.50".
    public func formatted(decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(self) * scale).rounded()
        // Past what an Int holds (a --duration of 1e300) the Double's own text, never a trap.
        guard isFinite, scaled < 9e18 else { return "\(self)" }
        let whole = Int(scaled / scale)
        let fraction = Int(scaled - Double(whole) * scale)
        let sign = self < 0 && scaled != 0 ? "-" : ""
        guard decimals > 0 else { return "\(sign)\(whole)" }
        var digits = String(fraction)
        while digits.count < decimals { digits = "0" + digits }
        return "\(sign)\(whole).\(digits)"
    }
}
