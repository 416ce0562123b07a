/// The last packets of one RTP stream, kept as they were sent (before SRTP),
/// so a NACK can be answered with the very same packet. Slots are
/// preallocated and indexed by sequence number: storing a packet reuses a
/// slot's buffer, nothing is allocated per packet.
struct PacketHistory {
    static let packetCapacity = 1500

    private var packets: [[UInt8]]
    private var sequences: [UInt16]
    private var filled: [Bool]
    private let mask: Int

    /// `capacity` is rounded up to a power of two.
    init(capacity: Int) {
        var size = 1
        while size < capacity { size <<= 1 }
        mask = size - 1
        packets = (0..<size).map { _ in
            var buffer = [UInt8]()
            buffer.reserveCapacity(Self.packetCapacity)
            return buffer
        }
        sequences = Array(repeating: 0, count: size)
        filled = Array(repeating: false, count: size)
    }

    var capacity: Int { mask + 1 }

    /// Writes the packet for `sequence` into its slot (replacing the oldest).
    mutating func store(sequence: UInt16, _ write: (inout [UInt8]) -> Void) {
        let slot = Int(sequence) & mask
        packets[slot].removeAll(keepingCapacity: true)
        write(&packets[slot])
        sequences[slot] = sequence
        filled[slot] = true
    }

    /// The packet sent with `sequence`, if it is still kept.
    func withPacket<R>(_ sequence: UInt16, _ body: ([UInt8]) -> R) -> R? {
        let slot = Int(sequence) & mask
        guard filled[slot], sequences[slot] == sequence else { return nil }
        return body(packets[slot])
    }
}
