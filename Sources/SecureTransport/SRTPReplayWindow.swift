/// What SRTP remembers of one SSRC in one direction: the highest packet index
/// seen (RTP: the 48-bit rollover counter and sequence number; SRTCP: the
/// 31-bit index) and, for a receiver, which of the `size` indices below it
/// have arrived (RFC 3711 §3.3.2).
final class SRTPReplayWindow {
    enum Verdict: Equatable { case fresh, replayed, tooOld }

    private(set) var highest: UInt64
    private var seen: [UInt64]
    private let size: UInt64

    /// - Parameters:
    ///   - first: the first authenticated index.
    ///   - size: how far back a late packet is still taken (a multiple of 64).
    init(first: UInt64, size: Int) {
        precondition(size > 0 && size % 64 == 0)
        highest = first
        self.size = UInt64(size)
        seen = [UInt64](repeating: 0, count: size / 64)
        mark(first)
    }

    func verdict(_ index: UInt64) -> Verdict {
        if index > highest { return .fresh }
        if highest - index >= size { return .tooOld }
        return isMarked(index) ? .replayed : .fresh
    }

    /// Records an authenticated index (one `verdict` called fresh).
    func accept(_ index: UInt64) {
        if index > highest {
            // The indices passed over have not arrived: clear their bits (all of them, after a jump).
            if index - highest >= size {
                for i in seen.indices { seen[i] = 0 }
            } else {
                var skipped = highest + 1
                while skipped < index {
                    clear(skipped)
                    skipped += 1
                }
            }
            highest = index
        }
        mark(index)
    }

    private func position(_ index: UInt64) -> (word: Int, bit: UInt64) {
        let slot = index % size
        return (Int(slot / 64), 1 << (slot % 64))
    }

    private func isMarked(_ index: UInt64) -> Bool {
        let (word, bit) = position(index)
        return seen[word] & bit != 0
    }

    private func mark(_ index: UInt64) {
        let (word, bit) = position(index)
        seen[word] |= bit
    }

    private func clear(_ index: UInt64) {
        let (word, bit) = position(index)
        seen[word] &= ~bit
    }
}

/// The packet index of an RTP sequence number (RFC 3711 §3.3.1): the rollover
/// counter is guessed from the highest index so far, so that a sequence number
/// within half the space either side of it lands next to it. Nil for a packet
/// that would come from before the first rollover counter (older than the
/// stream's start).
func srtpPacketIndex(sequence: UInt16, highest: UInt64) -> UInt64? {
    let rollover = highest >> 16
    let highestSequence = UInt16(truncatingIfNeeded: highest)
    var guess = rollover
    if highestSequence < 0x8000 {
        if sequence > highestSequence, sequence - highestSequence > 0x8000 {
            guard rollover > 0 else { return nil }
            guess = rollover - 1
        }
    } else if highestSequence - 0x8000 > sequence {
        guess = rollover + 1
    }
    return guess << 16 | UInt64(sequence)
}
