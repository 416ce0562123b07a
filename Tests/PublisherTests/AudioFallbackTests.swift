import Testing
@testable import Publisher

@Suite("Audio fallback")
struct AudioFallbackTests {
    @Test("heavy loss warns, then stops video; a clear spell brings it back")
    func heavyLossThenRecovery() {
        var policy = AudioFallback()
        #expect(policy.report(fractionLost: 0.30) == nil, "one bad report is not a trend")
        #expect(policy.report(fractionLost: 0.30) == .warn)
        #expect(policy.report(fractionLost: 0.30) == .disableVideo)
        #expect(policy.state == .videoOff)
        for _ in 0..<4 { #expect(policy.report(fractionLost: 0.01) == nil) }
        #expect(policy.report(fractionLost: 0.01) == .enableVideo)
        #expect(policy.state == .normal)
    }

    @Test("moderate loss warns and lifts the warning without stopping video")
    func moderateLoss() {
        var policy = AudioFallback()
        #expect(policy.report(fractionLost: 0.12) == nil)
        #expect(policy.report(fractionLost: 0.12) == .warn)
        for _ in 0..<5 { #expect(policy.report(fractionLost: 0.15) == nil) }
        #expect(policy.report(fractionLost: 0.02) == nil)
        #expect(policy.report(fractionLost: 0.02) == .liftWarning)
        #expect(policy.state == .normal)
    }

    @Test("while video is off, a single clean report among lossy ones does not bring it back")
    func recoveryNeedsAClearSpell() {
        var policy = AudioFallback()
        for _ in 0..<3 { _ = policy.report(fractionLost: 0.5) }
        #expect(policy.state == .videoOff)
        for loss in [0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.0] { #expect(policy.report(fractionLost: loss) == nil) }
        #expect(policy.report(fractionLost: 0.0) == .enableVideo)
    }
}
