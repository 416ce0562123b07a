/// Puts a subscriber's audio packets in play order without holding them:
/// each packet is played as it comes; a gap before it is filled by loss
/// concealment; a packet older than one already played is too late.
/// (Audio waits for nothing: a late packet is worth less than no delay.)
struct AudioPlayout {
    enum Decision: Equatable {
        /// Play it, after concealing this many missing packets.
        case play(concealing: Int)
        case late
        case duplicate
    }

    /// More missing than this (a long outage, a new sender) is not concealed:
    /// concealing seconds of speech makes noise, not sound.
    static let maxConcealed = 5
    private var highest: Int64?

    mutating func arrange(sequence: UInt16) -> Decision {
        guard let previous = highest else {
            highest = Int64(sequence) + (1 << 16)
            return .play(concealing: 0)
        }
        var extended = (previous & ~0xFFFF) | Int64(sequence)
        if extended - previous > 0x8000 { extended -= 1 << 16 } else if previous - extended > 0x8000 { extended += 1 << 16 }
        if extended == previous { return .duplicate }
        if extended < previous { return .late }
        highest = extended
        let missing = Int(extended - previous - 1)
        return .play(concealing: missing <= Self.maxConcealed ? missing : 0)
    }

    mutating func reset() { highest = nil }
}
