import Synchronization

/// The queue of messages for one signalling connection. The registry fills
/// it while it holds its lock, so every connection sees events in the order
/// they happened; the connection's writer task drains it onto the socket.
/// The queue is bounded: a client that does not read is cut off
/// (`overflowed`) rather than allowed to make the router hold its backlog.
final class Outbox: Sendable {
    enum Item: Sendable, Equatable {
        case text(String)
        /// Close the socket with this reason (a forced disconnect).
        case close(reason: String)
    }

    /// Messages queued per connection before it counts as not reading.
    static let defaultCapacity = 1024
    /// And bytes: 1024 signals of 8 KiB each, sent by one client to another
    /// that does not read, would be 8 MiB a connection.
    static let defaultByteCapacity = 2 << 20

    let items: AsyncStream<Item>
    private let continuation: AsyncStream<Item>.Continuation
    private let overflow = Atomic<Bool>(false)
    private let byteCapacity: Int
    private let queuedBytes = Atomic<Int>(0)

    init(capacity: Int = defaultCapacity, byteCapacity: Int = defaultByteCapacity) {
        (items, continuation) = AsyncStream<Item>.makeStream(bufferingPolicy: .bufferingOldest(capacity))
        self.byteCapacity = byteCapacity
    }

    /// True once a message did not fit: the queue was ended there.
    var overflowed: Bool { overflow.load(ordering: .relaxed) }

    func send(_ text: String) {
        let size = text.utf8.count
        if queuedBytes.add(size, ordering: .relaxed).newValue > byteCapacity {
            endOverflowed(); return
        }
        if case .dropped = continuation.yield(.text(text)) { endOverflowed() }
    }

    /// The writer took `text` off the queue: its bytes no longer count.
    func taken(_ text: String) {
        queuedBytes.subtract(text.utf8.count, ordering: .relaxed)
    }

    private func endOverflowed() {
        overflow.store(true, ordering: .relaxed)
        continuation.finish()
    }

    /// Queues a close after what is queued, and ends the queue.
    func close(reason: String) {
        _ = continuation.yield(.close(reason: reason))
        continuation.finish()
    }

    /// Ends the queue: the writer stops once it has sent what is queued.
    func finish() { continuation.finish() }
}
