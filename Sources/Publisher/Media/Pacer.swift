/// Spreads video packets over time so a keyframe (dozens of packets) does not
/// leave as one burst that overflows a router queue or the receiver's socket
/// buffer. A leaky bucket: the budget grows at the pacing rate (a multiple of
/// the target bitrate) and each packet spends its size. Audio and
/// retransmissions go first and are never held back: they are small and late
/// audio is useless. Queues are fixed rings: nothing is allocated per packet.
struct Pacer {
    struct Item: Equatable {
        var stream: Int
        var sequence: UInt16
        var size: Int
        var isRetransmission: Bool
    }

    /// Bytes per second the bucket refills at.
    private(set) var rate: Double
    /// At most this much burst (bytes) is saved up while idle.
    private let maximumBudget: Double
    private var budget: Double = 0
    private var lastRefill: Double?
    private var urgent: Ring
    private var paced: Ring
    /// Video packets dropped because the queue was full (the link is far
    /// slower than the encoder): the receiver's NACK/PLI repairs the loss.
    private(set) var dropped: UInt64 = 0
    /// Time between sends while something waits.
    static let interval = 0.005

    init(bitsPerSecond: Int, multiplier: Double = 2.5, capacity: Int = 2048) {
        rate = Double(bitsPerSecond) / 8 * multiplier
        maximumBudget = max(rate * 0.02, 3000)
        urgent = Ring(capacity: capacity / 4)
        paced = Ring(capacity: capacity)
    }

    mutating func setBitrate(_ bitsPerSecond: Int, multiplier: Double = 2.5) {
        rate = max(Double(bitsPerSecond) / 8 * multiplier, 10_000)
    }

    mutating func enqueue(_ item: Item, urgent isUrgent: Bool) {
        if isUrgent {
            if !urgent.push(item) { dropped += 1 }
        } else if !paced.push(item) {
            _ = paced.pop()
            dropped += 1
            _ = paced.push(item)
        }
    }

    var isEmpty: Bool { urgent.isEmpty && paced.isEmpty }
    var queuedPackets: Int { urgent.count + paced.count }

    /// The next packet allowed to leave at `now`, nil when the budget is spent
    /// or nothing waits.
    mutating func next(now: Double) -> Item? {
        refill(now)
        if let item = urgent.pop() {
            budget -= Double(item.size)
            return item
        }
        guard let item = paced.peek(), budget > 0 else { return nil }
        _ = paced.pop()
        budget -= Double(item.size)
        return item
    }

    /// When `next` may have something again; nil when the queues are empty.
    func nextDeadline(now: Double) -> Double? {
        if !urgent.isEmpty { return now }
        guard !paced.isEmpty else { return nil }
        return budget > 0 ? now : now + Self.interval
    }

    private mutating func refill(_ now: Double) {
        if let last = lastRefill {
            budget = min(budget + (now - last) * rate, maximumBudget)
        } else {
            budget = maximumBudget
        }
        lastRefill = now
    }

    /// A fixed-capacity FIFO.
    struct Ring {
        private var items: [Item]
        private var head = 0
        private(set) var count = 0

        init(capacity: Int) {
            items = Array(repeating: Item(stream: 0, sequence: 0, size: 0, isRetransmission: false), count: max(capacity, 1))
        }

        var isEmpty: Bool { count == 0 }

        mutating func push(_ item: Item) -> Bool {
            guard count < items.count else { return false }
            items[(head + count) % items.count] = item
            count += 1
            return true
        }

        func peek() -> Item? { count == 0 ? nil : items[head] }

        mutating func pop() -> Item? {
            guard count > 0 else { return nil }
            let item = items[head]
            head = (head + 1) % items.count
            count -= 1
            return item
        }
    }
}
