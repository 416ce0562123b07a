import Glibc
import MediaTypes
import Synchronization
import SystemdSupport
import Testing

@Suite("Output written on a thread of its own: a reader that stops never stops camagent")
struct OutputQueueTests {
    /// A stand-in for write(2) on a pipe nobody reads: it blocks until opened,
    /// then records each line with its descriptor.
    final class StuckReader: Sendable {
        private let open = Atomic<Bool>(false)
        private let wake = WakeEvent()
        let written = PThreadLocked<[(fd: Int32, text: String)]>([])
        /// Lines the writer has started on (the first one stays stuck in it).
        let started = Atomic<Int>(0)

        func write(_ fd: Int32, _ text: String) -> Bool {
            started.add(1, ordering: .relaxed)
            while !open.load(ordering: .acquiring) { _ = wake.wait(milliseconds: 50) }
            written.withLock { $0.append((fd, text)) }
            return true
        }

        func release() {
            open.store(true, ordering: .releasing)
            wake.signal()
        }
    }

    @Test("while the reader is stuck, lines queue up to the capacity, the rest are dropped, counted and reported once it reads")
    func stuckReaderLosesLinesNotTheCaller() async throws {
        let reader = StuckReader()
        let queue = OutputQueue(capacity: 100) { reader.write($0, $1) }
        let line = String(repeating: "x", count: 19) + "\n"   // 20 bytes: five fit
        // The first line goes to the writer, which is stuck in it; its bytes still count.
        #expect(queue.enqueue(1, line))
        for _ in 0..<200 where reader.started.load(ordering: .relaxed) == 0 { usleep(10_000) }
        #expect(reader.started.load(ordering: .relaxed) == 1)
        // Every call returns at once, whether its line fits or not.
        let taken = (0..<10).map { queue.enqueue($0 < 8 ? 1 : 2, line) }
        #expect(taken == [true, true, true, true, false, false, false, false, false, false])
        #expect(queue.droppedCounts == [1: 4, 2: 2])
        #expect(queue.flush(seconds: 0.2) == false)   // a stuck reader: flush gives up

        reader.release()
        #expect(queue.flush(seconds: 30))
        let written = reader.written.withLock { $0 }
        #expect(written.count == 7)
        #expect(written.prefix(5).allSatisfy { $0.fd == 1 && $0.text == line })
        // After what got through, stderr says what did not.
        #expect(written[5].fd == 2 && written[5].text == queue.lossNotice(fd: 1, lines: 4))
        #expect(written[6].fd == 2 && written[6].text == queue.lossNotice(fd: 2, lines: 2))
        #expect(written[5].text == "camagent: 4 lines of stdout dropped: its reader fell 100 bytes behind\n")
        #expect(queue.droppedCounts.isEmpty)
        // Room again: lines are taken and written in order.
        #expect(queue.enqueue(2, "a\n") && queue.enqueue(1, "b\n"))
        #expect(queue.flush(seconds: 30))
        #expect(reader.written.withLock { $0.suffix(2).map(\.text) } == ["a\n", "b\n"])
    }

    @Test("a line larger than the whole queue is dropped, not cut")
    func oversizedLine() {
        // The writer is held in a first line while the others are offered: with an idle
        // writer, the loss notice could go out before "ok" was even queued (it did, once,
        // under ThreadSanitizer), and the order would say nothing about the queue.
        let reader = StuckReader()
        let queue = OutputQueue(capacity: 8) { reader.write($0, $1) }
        #expect(queue.enqueue(1, "a\n"))
        for _ in 0..<200 where reader.started.load(ordering: .relaxed) == 0 { usleep(10_000) }
        #expect(reader.started.load(ordering: .relaxed) == 1)
        #expect(queue.enqueue(1, "0123456789\n") == false)
        #expect(queue.enqueue(1, "ok\n"))
        reader.release()
        #expect(queue.flush(seconds: 30))
        #expect(reader.written.withLock { $0.map(\.text) } == ["a\n", "ok\n", queue.lossNotice(fd: 1, lines: 1)])
    }

    @Test("a reader that goes away (EPIPE on a real pipe) is told once, and its descriptor is not written again")
    func readerGoneOnARealPipe() throws {
        signal(SIGPIPE, SIG_IGN)   // as camagent's main does: EPIPE, not death
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[1]) }
        let writeEnd = ends[1]
        let queue = OutputQueue(capacity: 1 << 16)
        let told = Atomic<Int>(0)
        queue.whenReaderGone { fd in if fd == writeEnd { told.add(1, ordering: .relaxed) } }
        #expect(queue.enqueue(ends[1], "read\n"))
        #expect(queue.flush(seconds: 30))
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(read(ends[0], &buffer, 16) == 5)
        close(ends[0])   // the reader goes away
        #expect(queue.enqueue(ends[1], "lost\n"))
        #expect(queue.flush(seconds: 30))
        #expect(told.load(ordering: .relaxed) == 1)
        #expect(queue.goneDescriptors == [ends[1]])
        // From now on its lines are refused at once, neither written nor counted as a loss to report.
        #expect(queue.enqueue(ends[1], "more\n") == false)
        #expect(queue.droppedCounts.isEmpty && queue.flush(seconds: 30))
        // Whoever asks later is told at once.
        queue.whenReaderGone { fd in if fd == writeEnd { told.add(1, ordering: .relaxed) } }
        #expect(told.load(ordering: .relaxed) == 2)
    }

    @Test("the other descriptor is still written after one reader went away")
    func otherDescriptorGoesOn() {
        let written = PThreadLocked<[(fd: Int32, text: String)]>([])
        let queue = OutputQueue(capacity: 1 << 16) { fd, text in
            guard fd == 2 else { return false }   // stdout's reader is gone
            written.withLock { $0.append((fd, text)) }
            return true
        }
        #expect(queue.enqueue(1, "a\n") && queue.enqueue(2, "b\n"))
        #expect(queue.flush(seconds: 30))
        #expect(queue.enqueue(1, "c\n") == false && queue.enqueue(2, "d\n"))
        #expect(queue.flush(seconds: 30))
        #expect(written.withLock { $0.map(\.text) } == ["b\n", "d\n"])
    }
}
