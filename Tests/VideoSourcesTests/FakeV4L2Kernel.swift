import Glibc
import MediaTypes
import Foundation
@testable import VideoSources

/// A scripted kernel for the capturer's unit tests, in the spirit of
/// swift-nio's SyscallAbstractionLayer: it "plays" V4L2 devices, so the tests
/// produce what real drivers rarely do on demand (EAGAIN, ENODEV mid-stream,
/// corrupt and short buffers, sequence gaps, drivers that adjust formats).
final class FakeV4L2Kernel: V4L2Kernel, @unchecked Sendable {  // all state behind `state`
    /// One node of the fake system.
    struct Node {
        var isCharacterDevice = true
        var openError: Errno?
        var queryCapError: Errno?
        var capabilities = V4L2Capabilities(driver: "fake", card: "Fake Camera", busInfo: "usb-fake-1",
                                            flags: [.videoCapture, .streaming])
        var formats: [(entry: V4L2FormatEntry, sizes: [V4L2FrameSizeEntry])] = []
        /// Intervals by format and size; `defaultIntervals` for sizes not listed.
        var intervals: [String: [V4L2FrameIntervalEntry]] = [:]
        var defaultIntervals: [V4L2FrameIntervalEntry] = [.discrete(FrameInterval(numerator: 1, denominator: 30))]
        /// Rewrites what S_FMT is asked (a driver adjusting the format).
        var adjustFormat: (@Sendable (V4L2PixFormat) -> V4L2PixFormat)?
        /// Rewrites what S_PARM is asked (a driver clamping the rate).
        var adjustInterval: (@Sendable (FrameInterval) -> FrameInterval)?
        var setFormatError: Errno?
        var streamOnError: Errno?
        var controls: [UInt32: (info: V4L2ControlInfo, value: Int32)] = [:]
    }

    /// What the stream does at each poll.
    enum Step {
        /// A filled buffer: bytes to copy in (nil: leave it), bytesused, sequence, flags, timestamp (nil: now).
        case frame(bytes: [UInt8]?, bytesUsed: Int?, sequence: UInt32, flags: UInt32, timestamp: MonotonicTimestamp?)
        /// Several buffers ready at once (each as in `.frame`, bytes left as they are).
        case burst(sequences: [UInt32])
        /// poll says readable, DQBUF says EAGAIN.
        case spuriousWake
        /// DQBUF fails with this errno.
        case dequeueError(Errno)
        /// POLLERR with nothing to dequeue.
        case pollError
        /// The node disappears (open fails with ENOENT) or comes back.
        case removeNode(String)
        case restoreNode(String, Node)
    }

    struct Calls {
        var queued: [Int] = []
        var streamOn = 0
        var streamOff = 0
        var requestedBuffers: [Int] = []
        var setFormats: [V4L2PixFormat] = []
        var setIntervals: [FrameInterval] = []
        var setControls: [(UInt32, Int32)] = []
        var opened: [String] = []
        var closed = 0
    }

    fileprivate struct State {
        var nodes: [String: Node]
        var fdToPath: [Int32: String] = [:]
        var nextFD: Int32 = 100
        var format: [Int32: V4L2PixFormat] = [:]
        var interval: [Int32: FrameInterval] = [:]
        var buffers: [Int32: [UnsafeMutableRawPointer]] = [:]
        var bufferLength = 0
        var queue: [Int] = []       // buffers the driver may fill, in order
        var ready: [V4L2DequeuedBuffer] = []
        var script: [Step] = []
        var streaming: [Int32: Bool] = [:]
        var calls = Calls()
        var idlePolls = 0
    }
    private var stateStorage: State
    private let lock = NSLock()
    /// The fake's own lock (a plain NSLock: the closures here need not be Sendable).
    private var state: FakeV4L2Kernel { self }

    init(nodes: [String: Node]) {
        stateStorage = State(nodes: nodes)
    }

    fileprivate func withLock<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&stateStorage)
    }

    deinit {
        state.withLock { s in
            for (_, list) in s.buffers { for b in list { b.deallocate() } }
        }
    }

    /// Puts a node back at once (the capturer polls nothing while waiting for it).
    func withLockRestore(_ path: String, _ node: Node) {
        withLock { $0.nodes[path] = node }
    }

    /// Appends steps the stream performs, one per poll.
    func script(_ steps: [Step]) { state.withLock { $0.script.append(contentsOf: steps) } }

    var calls: Calls { state.withLock { $0.calls } }
    var remainingSteps: Int { state.withLock { $0.script.count } }
    var idlePolls: Int { state.withLock { $0.idlePolls } }

    private func node(_ s: State, _ fd: Int32) throws(Errno) -> Node {
        guard let path = s.fdToPath[fd], let node = s.nodes[path] else { throw .noDevice }
        return node
    }

    // MARK: V4L2Kernel

    func isCharacterDevice(path: String) throws(Errno) -> Bool {
        let node = state.withLock { $0.nodes[path] }
        guard let node else { throw .noSuchFile }
        return node.isCharacterDevice
    }

    func open(path: String) throws(Errno) -> Int32 {
        let result: Result<Int32, Errno> = state.withLock { s in
            guard let node = s.nodes[path] else { return .failure(.noSuchFile) }
            if let e = node.openError { return .failure(e) }
            if let e = node.queryCapError { return .failure(e) }  // the real open probes QUERYCAP
            let fd = s.nextFD
            s.nextFD += 1
            s.fdToPath[fd] = path
            s.calls.opened.append(path)
            return .success(fd)
        }
        return try result.get()
    }

    func close(_ fd: Int32) {
        state.withLock { s in
            s.fdToPath[fd] = nil
            s.calls.closed += 1
        }
    }

    private func withNode<T>(_ fd: Int32, _ body: (inout State, Node) throws(Errno) -> T) throws(Errno) -> T {
        let result: Result<T, Errno> = state.withLock { s in
            do throws(Errno) {
                let n = try node(s, fd)
                return .success(try body(&s, n))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    func queryCapabilities(_ fd: Int32) throws(Errno) -> V4L2Capabilities {
        try withNode(fd) { _, n throws(Errno) in n.capabilities }
    }

    func enumerateFormat(_ fd: Int32, index: UInt32) throws(Errno) -> V4L2FormatEntry {
        try withNode(fd) { _, n throws(Errno) in
            guard Int(index) < n.formats.count else { throw .invalidArgument }
            return n.formats[Int(index)].entry
        }
    }

    func enumerateFrameSize(_ fd: Int32, pixelFormat: PixelFormat, index: UInt32) throws(Errno) -> V4L2FrameSizeEntry {
        try withNode(fd) { _, n throws(Errno) in
            guard let f = n.formats.first(where: { $0.entry.pixelFormat == pixelFormat }), Int(index) < f.sizes.count else {
                throw .invalidArgument
            }
            return f.sizes[Int(index)]
        }
    }

    static func key(_ f: PixelFormat, _ s: FrameSize) -> String { "\(f.name) \(s)" }

    func enumerateFrameInterval(_ fd: Int32, pixelFormat: PixelFormat, size: FrameSize, index: UInt32) throws(Errno) -> V4L2FrameIntervalEntry {
        try withNode(fd) { _, n throws(Errno) in
            let list = n.intervals[Self.key(pixelFormat, size)] ?? n.defaultIntervals
            guard Int(index) < list.count else { throw .invalidArgument }
            return list[Int(index)]
        }
    }

    func getFormat(_ fd: Int32) throws(Errno) -> V4L2PixFormat {
        try withNode(fd) { s, _ throws(Errno) in
            guard let f = s.format[fd] else { throw .invalidArgument }
            return f
        }
    }

    func setFormat(_ fd: Int32, _ format: V4L2PixFormat) throws(Errno) -> V4L2PixFormat {
        try withNode(fd) { s, n throws(Errno) in
            if let e = n.setFormatError { throw e }
            s.calls.setFormats.append(format)
            var granted = n.adjustFormat?(format) ?? format
            let bpp = granted.pixelFormat == .yuyv ? 2 : 1
            granted.bytesPerLine = granted.pixelFormat.isCompressed ? 0 : granted.width * bpp
            granted.sizeImage = granted.pixelFormat == .nv12 ? granted.width * granted.height * 3 / 2
                : granted.pixelFormat == .yuyv ? granted.width * granted.height * 2 : granted.width * granted.height
            s.format[fd] = granted
            return granted
        }
    }

    func getStreamParameters(_ fd: Int32) throws(Errno) -> V4L2StreamParameters {
        try withNode(fd) { s, _ throws(Errno) in
            V4L2StreamParameters(supportsFrameInterval: true,
                                 frameInterval: s.interval[fd] ?? FrameInterval(numerator: 1, denominator: 30))
        }
    }

    func setFrameInterval(_ fd: Int32, _ interval: FrameInterval) throws(Errno) -> V4L2StreamParameters {
        try withNode(fd) { s, n throws(Errno) in
            s.calls.setIntervals.append(interval)
            s.interval[fd] = n.adjustInterval?(interval) ?? interval
            return V4L2StreamParameters(supportsFrameInterval: true, frameInterval: s.interval[fd]!)
        }
    }

    func requestBuffers(_ fd: Int32, count: Int) throws(Errno) -> Int {
        try withNode(fd) { s, _ throws(Errno) in
            s.calls.requestedBuffers.append(count)
            for b in s.buffers[fd] ?? [] { b.deallocate() }
            s.buffers[fd] = nil
            s.queue = []
            s.ready = []
            guard count > 0, let f = s.format[fd] else { return 0 }
            s.bufferLength = max(f.sizeImage, 1)
            s.buffers[fd] = (0..<count).map { _ in
                let p = UnsafeMutableRawPointer.allocate(byteCount: s.bufferLength, alignment: 64)
                p.initializeMemory(as: UInt8.self, repeating: 0, count: s.bufferLength)
                return p
            }
            return count
        }
    }

    func queryBuffer(_ fd: Int32, index: Int) throws(Errno) -> (offset: Int, length: Int) {
        try withNode(fd) { s, _ throws(Errno) in (index, s.bufferLength) }
    }

    func mapBuffer(_ fd: Int32, offset: Int, length: Int) throws(Errno) -> UnsafeMutableRawPointer {
        try withNode(fd) { s, _ throws(Errno) in
            guard let list = s.buffers[fd], offset < list.count else { throw .invalidArgument }
            return list[offset]
        }
    }

    func unmapBuffer(_ address: UnsafeMutableRawPointer, length: Int) {}

    func queueBuffer(_ fd: Int32, index: Int) throws(Errno) {
        try withNode(fd) { s, _ throws(Errno) in
            s.calls.queued.append(index)
            s.queue.append(index)
        }
    }

    func dequeueBuffer(_ fd: Int32) throws(Errno) -> V4L2DequeuedBuffer {
        let result: Result<V4L2DequeuedBuffer, Errno> = state.withLock { s in
            guard s.fdToPath[fd] != nil else { return .failure(.noDevice) }
            if case .dequeueError(let e)? = s.script.first {
                s.script.removeFirst()
                return .failure(e)
            }
            guard !s.ready.isEmpty else { return .failure(.wouldBlock) }
            return .success(s.ready.removeFirst())
        }
        return try result.get()
    }

    func streamOn(_ fd: Int32) throws(Errno) {
        try withNode(fd) { s, n throws(Errno) in
            if let e = n.streamOnError { throw e }
            s.calls.streamOn += 1
            s.streaming[fd] = true
        }
    }

    func streamOff(_ fd: Int32) throws(Errno) {
        try withNode(fd) { s, _ throws(Errno) in
            s.calls.streamOff += 1
            s.streaming[fd] = false
            s.queue = []
            s.ready = []
        }
    }

    /// Fills the next queued buffer as a step says; returns false when no buffer is queued.
    private func fill(_ s: inout State, fd: Int32, bytes: [UInt8]?, bytesUsed: Int?, sequence: UInt32,
                      flags: UInt32, timestamp: MonotonicTimestamp?) -> Bool {
        guard !s.queue.isEmpty, let list = s.buffers[fd] else { return false }
        let index = s.queue.removeFirst()
        if let bytes {
            bytes.withUnsafeBytes { list[index].copyMemory(from: $0.baseAddress!, byteCount: min($0.count, s.bufferLength)) }
        }
        s.ready.append(V4L2DequeuedBuffer(
            index: index, bytesUsed: bytesUsed ?? s.bufferLength, sequence: sequence,
            flags: flags | V4L2DequeuedBuffer.flagTimestampMonotonic,
            timestamp: timestamp ?? .now()))
        return true
    }

    func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) throws(Errno) -> V4L2PollResult {
        enum Outcome { case result(V4L2PollResult), idle }
        let outcome: Outcome = state.withLock { s in
            guard let step = s.script.first else { return .idle }
            switch step {
            case .frame(let bytes, let used, let seq, let flags, let ts):
                guard fill(&s, fd: fd, bytes: bytes, bytesUsed: used, sequence: seq, flags: flags, timestamp: ts) else { return .idle }
                s.script.removeFirst()
                return .result(V4L2PollResult(deviceReadable: true, deviceError: false, woken: false))
            case .burst(let sequences):
                s.script.removeFirst()
                for q in sequences {
                    _ = fill(&s, fd: fd, bytes: nil, bytesUsed: nil, sequence: q, flags: 0, timestamp: nil)
                }
                return .result(V4L2PollResult(deviceReadable: true, deviceError: false, woken: false))
            case .spuriousWake:
                s.script.removeFirst()
                return .result(V4L2PollResult(deviceReadable: true, deviceError: false, woken: false))
            case .dequeueError:
                return .result(V4L2PollResult(deviceReadable: true, deviceError: false, woken: false))
            case .pollError:
                s.script.removeFirst()
                return .result(V4L2PollResult(deviceReadable: false, deviceError: true, woken: false))
            case .removeNode(let path):
                s.script.removeFirst()
                s.nodes[path] = nil
                return .result(.timedOut)
            case .restoreNode(let path, let node):
                s.script.removeFirst()
                s.nodes[path] = node
                return .result(.timedOut)
            }
        }
        switch outcome {
        case .result(let r):
            return r
        case .idle:
            // Nothing scripted: wait on the real wake-up eventfd (bounded), as the real kernel would.
            state.withLock { $0.idlePolls += 1 }
            var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            let n = Glibc.poll(&p, 1, min(timeoutMilliseconds, 20))
            return V4L2PollResult(deviceReadable: false, deviceError: false, woken: n > 0)
        }
    }

    func queryControl(_ fd: Int32, id: UInt32) throws(Errno) -> V4L2ControlInfo {
        try withNode(fd) { _, n throws(Errno) in
            guard let c = n.controls[id] else { throw .invalidArgument }
            return c.info
        }
    }

    func getControl(_ fd: Int32, id: UInt32) throws(Errno) -> Int32 {
        try withNode(fd) { s, n throws(Errno) in
            guard let path = s.fdToPath[fd], let c = s.nodes[path]?.controls[id] else { throw .invalidArgument }
            return c.value
        }
    }

    func setControl(_ fd: Int32, id: UInt32, value: Int32) throws(Errno) {
        try withNode(fd) { s, _ throws(Errno) in
            guard let path = s.fdToPath[fd], s.nodes[path]?.controls[id] != nil else { throw .invalidArgument }
            s.nodes[path]!.controls[id]!.value = value
            s.calls.setControls.append((id, value))
        }
    }

    func setOutputFormat(_ fd: Int32, _ format: V4L2PixFormat) throws(Errno) -> V4L2PixFormat { format }

    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int { bytes.count }
}

extension FakeV4L2Kernel.Node {
    /// A camera with the given formats; each format gets `sizes` as discrete sizes.
    static func camera(_ formats: [PixelFormat], sizes: [FrameSize], busInfo: String = "usb-fake-1") -> Self {
        var node = Self()
        node.capabilities.busInfo = busInfo
        node.formats = formats.map { f in
            (V4L2FormatEntry(pixelFormat: f, description: f.name, isCompressed: f.isCompressed, isEmulated: false),
             sizes.map { .discrete($0) })
        }
        return node
    }
}
