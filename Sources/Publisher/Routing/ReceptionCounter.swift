import RTP

/// What a receiver saw of one source, for its receiver reports (RFC 3550
/// §6.4.1, appendix A.3): extended highest sequence, packets lost overall and
/// the fraction lost since the previous report.
struct ReceptionCounter {
    let ssrc: UInt32
    private let baseSequence: UInt32
    private var cycles: UInt32 = 0
    private var maxSequence: UInt16
    private var received: UInt64 = 0
    private var expectedPrior: UInt64 = 0
    private var receivedPrior: UInt64 = 0

    init(ssrc: UInt32, firstSequence: UInt16) {
        self.ssrc = ssrc
        baseSequence = UInt32(firstSequence)
        maxSequence = firstSequence
    }

    mutating func count(sequence: UInt16) {
        received += 1
        guard isNewer(sequence, than: maxSequence) else { return }
        if sequence < maxSequence { cycles &+= 1 << 16 }   // wrapped
        maxSequence = sequence
    }

    var extendedHighestSequence: UInt32 { cycles &+ UInt32(maxSequence) }

    /// The report block for now; starts the next interval.
    mutating func report() -> ReceptionReport {
        let expected = UInt64(extendedHighestSequence &- baseSequence) + 1
        let lost = max(Int64(expected) - Int64(received), 0)
        let expectedInterval = expected - min(expectedPrior, expected)
        let receivedInterval = received - min(receivedPrior, received)
        expectedPrior = expected
        receivedPrior = received
        let lostInterval = expectedInterval > receivedInterval ? expectedInterval - receivedInterval : 0
        let fraction = expectedInterval == 0 ? 0 : UInt8(min(255, lostInterval * 256 / expectedInterval))
        return ReceptionReport(ssrc: ssrc, fractionLost: fraction, cumulativeLost: Int32(min(lost, 0x7f_ffff)),
                               highestSequence: extendedHighestSequence, jitter: 0, lastSenderReport: 0,
                               delaySinceLastSenderReport: 0)
    }
}
