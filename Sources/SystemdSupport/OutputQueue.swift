import MediaTypes
#if canImport(Glibc)
import Glibc
#endif

/// What camagent prints on stdout and stderr, written by a thread of its own.
///
/// A reader that stops reading (a paused pipe, a consumer that hangs) leaves
/// write(2) blocked once the pipe is full. Printing used to happen on the
/// thread with something to say: the main loop, which then never saw SIGTERM,
/// or a media thread, which stopped forwarding. Now printing only queues the
/// line and returns. One queue serves both descriptors, so that lines keep
/// their order where stdout and stderr go to the same place (the journal).
///
/// The queue holds at most `capacity` bytes. A line that does not fit is
/// dropped and counted, and once the reader catches up stderr says how many
/// were lost: a slow reader loses lines rather than stopping the agent.
/// At exit (`flush`) the writer gets a few seconds to empty it.
///
/// A reader that goes away (`publish --json | head -3`: EPIPE, SIGPIPE being
/// ignored) is not written to again, and whoever asked (`whenReaderGone`) is
/// told: a long-running command stops cleanly then, as on SIGTERM, rather than
/// being killed by SIGPIPE mid-session or running on with nobody reading.
public final class OutputQueue: Sendable {
    /// The process's one queue for fds 1 and 2.
    public static let standard = OutputQueue(capacity: 1 << 20)

    private struct Line {
        var fd: Int32
        var text: String
    }

    private struct State {
        var pending: [Line] = []
        /// Bytes queued or being written.
        var bytes = 0
        /// Lines that did not fit, per descriptor, not yet reported.
        var dropped: [Int32: Int] = [:]
        var writing = false
        var thread: DeviceThread?
        /// Descriptors whose reader went away: their lines are dropped unwritten.
        var gone: Set<Int32> = []
        var onGone: [@Sendable (Int32) -> Void] = []
    }

    public let capacity: Int
    private let state = PThreadLocked(State())
    private let wake = WakeEvent()
    private let write: @Sendable (Int32, String) -> Bool

    /// `write` writes one whole line, however long the reader takes (by default
    /// write(2) until all of it is taken), false if the reader went away; tests
    /// pass a slow, stuck or closed one.
    public init(capacity: Int, write: (@Sendable (Int32, String) -> Bool)? = nil) {
        self.capacity = capacity
        self.write = write ?? { writeWhole($0, $1) }
    }

    /// Queues `text` (newline included) for `fd`; never waits for the reader.
    /// False when it did not fit and was dropped.
    @discardableResult
    public func enqueue(_ fd: Int32, _ text: String) -> Bool {
        let size = text.utf8.count
        let queued = state.withLock { s -> Bool in
            if s.thread == nil {
                s.thread = DeviceThread(name: "camagent-output") { [self] in run() }
            }
            if s.gone.contains(fd) { return false }
            guard s.bytes + size <= capacity else {
                s.dropped[fd, default: 0] += 1
                return false
            }
            s.pending.append(Line(fd: fd, text: text))
            s.bytes += size
            return true
        }
        wake.signal()   // a drop too: the writer reports it once it has room
        return queued
    }

    /// Waits until everything queued has been written, and any loss reported,
    /// at most `seconds`. True if it was.
    @discardableResult
    public func flush(seconds: Double) -> Bool {
        let deadline = MonotonicTimestamp.now() + .seconds(seconds)
        while MonotonicTimestamp.now() < deadline {
            if state.withLock({ $0.pending.isEmpty && !$0.writing && $0.dropped.isEmpty }) { return true }
            usleep(5_000)
        }
        return false
    }

    /// Runs `action` with the descriptor (on the output thread) once a reader has
    /// gone away, or now if one has already (stdout's, when both have).
    public func whenReaderGone(_ action: @escaping @Sendable (Int32) -> Void) {
        let already = state.withLock { s -> Int32? in
            if s.gone.isEmpty { s.onGone.append(action) }
            return s.gone.min()
        }
        if let already { action(already) }
    }

    /// Descriptors whose reader went away.
    public var goneDescriptors: Set<Int32> { state.withLock { $0.gone } }

    /// Lines dropped so far and not yet reported, per descriptor (for tests).
    public var droppedCounts: [Int32: Int] { state.withLock { $0.dropped } }

    private func run() {
        while true {
            let batch = state.withLock { s -> [Line] in
                var batch = s.pending
                s.pending = []
                // Room again after a loss: say so on stderr, after what did get through.
                if batch.isEmpty, !s.dropped.isEmpty {
                    batch = s.dropped.sorted { $0.key < $1.key }.filter { !s.gone.contains($0.key) }.map { fd, count in
                        Line(fd: 2, text: lossNotice(fd: fd, lines: count))
                    }
                    s.dropped = [:]
                    s.bytes += batch.reduce(0) { $0 + $1.text.utf8.count }
                }
                s.writing = !batch.isEmpty
                return batch
            }
            if batch.isEmpty {
                _ = wake.wait(milliseconds: -1)
                continue
            }
            for line in batch where !state.withLock({ $0.gone.contains(line.fd) }) {
                if !write(line.fd, line.text) { readerGone(line.fd) }
            }
            let written = batch.reduce(0) { $0 + $1.text.utf8.count }
            state.withLock { s in
                s.bytes -= written
                s.writing = false
            }
        }
    }

    private func readerGone(_ fd: Int32) {
        let told = state.withLock { s -> [@Sendable (Int32) -> Void] in
            let first = s.gone.isEmpty
            s.gone.insert(fd)
            s.dropped[fd] = nil
            defer { s.onGone = [] }
            return first ? s.onGone : []
        }
        for action in told { action(fd) }
    }

    public func lossNotice(fd: Int32, lines: Int) -> String {
        let stream = fd == 1 ? "stdout" : fd == 2 ? "stderr" : "fd \(fd)"
        let room = capacity >= 1024 ? "\(capacity >> 10) KiB" : "\(capacity) bytes"
        return "camagent: \(lines) line\(lines == 1 ? "" : "s") of \(stream) dropped: its reader fell \(room) behind\n"
    }
}
