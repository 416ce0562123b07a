import Testing
@testable import Subscriber

@Suite("AudioPlayout")
struct AudioPlayoutTests {
    @Test("in order, a gap concealed, late and duplicate packets, a wrap, an outage not concealed")
    func decisions() {
        var playout = AudioPlayout()
        #expect(playout.arrange(sequence: 65533) == .play(concealing: 0))
        #expect(playout.arrange(sequence: 65534) == .play(concealing: 0))
        #expect(playout.arrange(sequence: 1) == .play(concealing: 2))   // 65535 and 0 lost, across the wrap
        #expect(playout.arrange(sequence: 0) == .late)
        #expect(playout.arrange(sequence: 1) == .duplicate)
        #expect(playout.arrange(sequence: 500) == .play(concealing: 0), "an outage is not concealed")
    }
}
