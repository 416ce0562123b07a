extension Duration {
    /// The duration in whole nanoseconds (saturating).
    public var nanosecondsClamped: Int64 {
        let (s, a) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? .min : .max }
        return ns &+ a / 1_000_000_000
    }

    /// The duration in seconds as a Double.
    public var secondsDouble: Double {
        let (s, a) = components
        return Double(s) + Double(a) / 1e18
    }

    public var milliseconds: Double { secondsDouble * 1000 }
}
