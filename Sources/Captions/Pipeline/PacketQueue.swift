import MediaTypes

/// Opus packets waiting for the captioner: fixed slots, filled by the
/// receive thread, drained by the captioner's; full means the newest is dropped.
/// The two threads contend for the lock at every packet, hence a pthread
/// mutex (`PThreadLocked`), which ThreadSanitizer can follow.
final class PacketQueue: @unchecked Sendable {   // storage behind `lock`
    static let slots = 512            // 10 s of 20 ms packets: recognition may take a while
    static let slotBytes = 1500
    private let lock = PThreadLocked(Indices())
    private let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: slots * slotBytes, alignment: 8)
    private let lengths = UnsafeMutableBufferPointer<Int>.allocate(capacity: slots)
    /// Set once, before the first packet (the thread's wake-up).
    nonisolated(unsafe) var wake: StopSignal?

    private struct Indices: Sendable {
        var head = 0
        var count = 0
    }

    deinit {
        storage.deallocate()
        lengths.deallocate()
    }

    func push(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard packet.count <= Self.slotBytes else { return false }
        let pushed = lock.withLock { i -> Bool in
            guard i.count < Self.slots else { return false }
            let slot = (i.head + i.count) % Self.slots
            UnsafeMutableRawBufferPointer(rebasing: storage[slot * Self.slotBytes ..< slot * Self.slotBytes + packet.count])
                .copyMemory(from: packet)
            lengths[slot] = packet.count
            i.count += 1
            return true
        }
        if pushed { wake?.wakeUp() }
        return pushed
    }

    /// Hands the oldest packet to `body` (on the draining thread); false when empty.
    func pop(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        // The slot is read outside the lock: only this thread frees it, after reading.
        guard let slot = lock.withLock({ i -> Int? in i.count > 0 ? i.head : nil }) else { return false }
        body(UnsafeRawBufferPointer(rebasing: storage[slot * Self.slotBytes ..< slot * Self.slotBytes + lengths[slot]]))
        lock.withLock { i in
            i.head = (i.head + 1) % Self.slots
            i.count -= 1
        }
        return true
    }
}
