import RTP

/// What a receiver saw of one source, for its receiver reports (RFC 3550
/// §6.4.1, appendix A.3): extended highest sequence, packets lost overall and
/// the fraction lost since the previous report, interarrival jitter, and the
/// last sender report's echo (LSR, DLSR) the sender times its round trip by.
/// Shared by the router (a publisher's packets) and the subscriber.
package struct ReceptionCounter: Sendable {
    package let ssrc: UInt32
    private let baseSequence: UInt32
    private var cycles: UInt32 = 0
    private var maxSequence: UInt16
    package private(set) var received: UInt64 = 0
    private var expectedPrior: UInt64 = 0
    private var receivedPrior: UInt64 = 0
    /// RFC 3550 A.8: in RTP clock units, scaled by 16 as the appendix keeps it.
    private var scaledJitter: Int64 = 0
    private var previousTransit: Int64?
    private var lastSenderReport: UInt32 = 0
    private var lastSenderReportArrival = 0.0

    package init(ssrc: UInt32, firstSequence: UInt16) {
        self.ssrc = ssrc
        baseSequence = UInt32(firstSequence)
        maxSequence = firstSequence
    }

    package mutating func count(sequence: UInt16) {
        received += 1
        guard isNewer(sequence, than: maxSequence) else { return }
        if sequence < maxSequence { cycles &+= 1 << 16 }   // wrapped
        maxSequence = sequence
    }

    /// Interarrival jitter (RFC 3550 A.8): the packet's RTP timestamp against
    /// its arrival, both in the media clock.
    package mutating func noteArrival(timestamp: UInt32, arrival: Double, clockRate: Int) {
        let transit = Int64(arrival * Double(clockRate)) &- Int64(timestamp)
        defer { previousTransit = transit }
        guard let previous = previousTransit else { return }
        var d = transit &- previous
        if d < 0 { d = -d }
        guard d < Int64(clockRate) * 10 else { return }   // a jump (new stream, wrap): not jitter
        scaledJitter += d - ((scaledJitter + 8) >> 4)
    }

    /// The interarrival jitter in seconds.
    package func jitterSeconds(clockRate: Int) -> Double { Double(scaledJitter >> 4) / Double(clockRate) }

    /// A sender report from this source: its middle 32 NTP bits are echoed.
    package mutating func noteSenderReport(ntpTimestamp: UInt64, arrival: Double) {
        lastSenderReport = UInt32(truncatingIfNeeded: ntpTimestamp >> 16)
        lastSenderReportArrival = arrival
    }

    package var extendedHighestSequence: UInt32 { cycles &+ UInt32(maxSequence) }

    /// Packets expected but never received.
    package var lost: Int64 { max(Int64(UInt64(extendedHighestSequence &- baseSequence) + 1) - Int64(received), 0) }

    /// The report block for now; starts the next interval.
    package mutating func report(now: Double = 0) -> ReceptionReport {
        let expected = UInt64(extendedHighestSequence &- baseSequence) + 1
        let expectedInterval = expected - min(expectedPrior, expected)
        let receivedInterval = received - min(receivedPrior, received)
        expectedPrior = expected
        receivedPrior = received
        let lostInterval = expectedInterval > receivedInterval ? expectedInterval - receivedInterval : 0
        let fraction = expectedInterval == 0 ? 0 : UInt8(min(255, lostInterval * 256 / expectedInterval))
        var delay: UInt32 = 0
        if lastSenderReport != 0, now >= lastSenderReportArrival {
            delay = UInt32(min((now - lastSenderReportArrival) * 65536, Double(UInt32.max)))
        }
        return ReceptionReport(ssrc: ssrc, fractionLost: fraction, cumulativeLost: Int32(min(lost, 0x7f_ffff)),
                               highestSequence: extendedHighestSequence,
                               jitter: UInt32(truncatingIfNeeded: max(scaledJitter >> 4, 0)),
                               lastSenderReport: lastSenderReport, delaySinceLastSenderReport: delay)
    }
}
