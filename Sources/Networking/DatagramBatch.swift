#if canImport(Glibc)
import Glibc
#endif

/// Room for several datagrams received in one system call (`UDPSocket.receive(into:)`),
/// made once and reused: a transport thread woken for a video frame's packets
/// takes them all in one recvmmsg instead of one recvfrom each, and one more
/// to learn that nothing is left.
public final class DatagramBatch {
    /// The most datagrams one receive takes.
    public let capacity: Int
    /// Bytes kept of each datagram (a longer one is truncated).
    public let datagramSize: Int
    let buffers: UnsafeMutableRawBufferPointer
    let senders: UnsafeMutablePointer<sockaddr_storage>
    let lengths: UnsafeMutablePointer<Int>
    /// How many the last receive took.
    public internal(set) var count = 0

    /// `capacity` is at most 64.
    public init(capacity: Int = 16, datagramSize: Int = 2048) {
        self.capacity = min(max(capacity, 1), 64)
        self.datagramSize = datagramSize
        buffers = .allocate(byteCount: self.capacity * datagramSize, alignment: 16)
        senders = .allocate(capacity: self.capacity)
        senders.initialize(repeating: sockaddr_storage(), count: self.capacity)
        lengths = .allocate(capacity: self.capacity)
        lengths.initialize(repeating: 0, count: self.capacity)
    }

    deinit {
        buffers.deallocate()
        senders.deallocate()
        lengths.deallocate()
    }

    /// Datagram `index` of the last receive; valid until the next.
    public func datagram(_ index: Int) -> UnsafeRawBufferPointer {
        precondition(index < count, "datagram \(index) of \(count)")
        let start = index * datagramSize
        return UnsafeRawBufferPointer(rebasing: buffers[start..<start + min(lengths[index], datagramSize)])
    }

    /// Who sent datagram `index`; nil for a family other than IPv4 and IPv6.
    public func sender(_ index: Int) -> TransportAddress? {
        precondition(index < count, "datagram \(index) of \(count)")
        return (senders + index).withMemoryRebound(to: sockaddr.self, capacity: 1) { TransportAddress(sockaddr: $0) }
    }
}
