import Logging
import MediaTypes
import PixelConversion
import Synchronization

/// `camagent selftest --loopback`: writes frames carrying a counter into a
/// v4l2loopback device with camagent's own writer, captures them back with
/// camagent's capturer, and checks drops, duplicates, order and latency.
public final class LoopbackSelftest: Sendable {
    public let device: String
    public let size: FrameSize
    public let framesPerSecond: Double
    public let frameCount: Int
    /// More than this share of frames missing fails the test (a loaded machine drops some).
    public let maxMissingPercent: Double
    private let logger: Logger

    public init(device: String, size: FrameSize, framesPerSecond: Double, frames: Int,
                maxMissingPercent: Double = 10, logger: Logger) {
        self.device = device
        self.size = FrameSize(width: max(160, size.width & ~1), height: max(120, size.height & ~1))
        self.framesPerSecond = framesPerSecond
        self.frameCount = max(frames, 2)
        self.maxMissingPercent = maxMissingPercent
        self.logger = logger
    }

    /// Records what the capturer delivers, into storage sized once.
    private final class Recorder: VideoCaptureConsumer, @unchecked Sendable {  // state behind `lock`
        struct Seen { var counter: Int64; var at: MonotonicTimestamp }
        let lock = PThreadLocked(())
        nonisolated(unsafe) var seen: [Seen]
        init(capacity: Int) {
            seen = []
            seen.reserveCapacity(capacity)
        }
        func consume(_ frame: VideoFrame) {
            let counter = TestPatternCounter.decode(frame).map(Int64.init) ?? -1
            lock.withLock { _ in
                if seen.count < seen.capacity { seen.append(Seen(counter: counter, at: frame.deliveredAt)) }
            }
        }
        var snapshot: [Seen] { lock.withLock { _ in seen } }
    }

    /// The writer's side, handed to its thread once.
    private final class Writer: @unchecked Sendable {  // used by the writer thread only, then read after join
        let output: V4L2OutputWriter
        let renderer: TestPatternRenderer
        let frame: VideoFrame
        let yuyv: UnsafeMutableRawBufferPointer
        let scratch: UnsafeMutableRawBufferPointer
        var writeTimes: [MonotonicTimestamp]
        var written = 0
        var error: CaptureError?
        let stop = Atomic<Bool>(false)

        init(output: V4L2OutputWriter, size: FrameSize, count: Int) {
            self.output = output
            renderer = TestPatternRenderer(width: size.width, height: size.height)
            frame = VideoFrame(maxWidth: size.width, maxHeight: size.height)
            yuyv = .allocate(byteCount: size.width * size.height * 2, alignment: 64)
            scratch = .allocate(byteCount: NV12Conversion.i420ByteCount(width: size.width, height: size.height), alignment: 64)
            writeTimes = [MonotonicTimestamp](repeating: .zero, count: count)
        }

        deinit {
            yuyv.deallocate()
            scratch.deallocate()
        }

        func run(framesPerSecond: Double) {
            let interval = Int64(1e9 / framesPerSecond)
            let start = MonotonicTimestamp.now()
            let wake = WakeEvent()
            for i in 0..<writeTimes.count {
                if stop.load(ordering: .relaxed) { break }
                let due = start.nanoseconds + Int64(i) * interval
                let wait = due - MonotonicTimestamp.now().nanoseconds
                if wait > 0 { _ = wake.wait(milliseconds: Int32((wait + 999_999) / 1_000_000)) }
                renderer.render(counter: UInt32(i), into: frame)
                NV12Conversion.nv12ToYUYV(frame, into: yuyv, scratch: scratch)
                writeTimes[i] = .now()
                do throws(CaptureError) {
                    try output.write(UnsafeRawBufferPointer(yuyv))
                } catch {
                    self.error = error
                    break
                }
                written = i + 1
            }
        }
    }

    public func run() throws(CaptureError) -> LoopbackSelftestReport {
        let output = try V4L2OutputWriter(device: device, format: .yuyv, size: size)
        let writer = Writer(output: output, size: size, count: frameCount)
        let rate = framesPerSecond
        let writerThread = DeviceThread(name: "camagent-writer") { writer.run(framesPerSecond: rate) }
        defer {
            writer.stop.store(true, ordering: .relaxed)
            writerThread.join()
        }

        // v4l2loopback shows its capture side once a writer is attached: wait for it.
        var capture: V4L2VideoCapture?
        var lastError: CaptureError?
        let readyBy = MonotonicTimestamp.now() + .seconds(30)
        while capture == nil && MonotonicTimestamp.now() < readyBy {
            var options = V4L2CaptureOptions(request: NegotiationRequest(size: size, framesPerSecond: framesPerSecond,
                                                                         format: .yuyv))
            options.frameTimeout = .seconds(10)
            let candidate = V4L2VideoCapture(device: device, options: options, logger: logger)
            do throws(CaptureError) {
                try candidate.initialize()
                capture = candidate
            } catch {
                lastError = error
                _ = WakeEvent().wait(milliseconds: 100)
            }
        }
        guard let capture else {
            throw lastError ?? .timeout(device: device, seconds: 30)
        }
        let recorder = Recorder(capacity: frameCount * 2)
        capture.setConsumer(recorder)
        try capture.start()

        // Until the writer is done, then a moment for the last frames to come through.
        let writingTime = Double(frameCount) / framesPerSecond
        let doneBy = MonotonicTimestamp.now() + .milliseconds(Int64(writingTime * 3000) + 15_000)
        while MonotonicTimestamp.now() < doneBy {
            if writer.error != nil || writer.written == frameCount { break }
            _ = WakeEvent().wait(milliseconds: 50)
            if capture.failure != nil { break }
        }
        let settleUntil = MonotonicTimestamp.now() + .seconds(2)
        while MonotonicTimestamp.now() < settleUntil,
              recorder.snapshot.last?.counter != Int64(frameCount - 1), capture.failure == nil {
            _ = WakeEvent().wait(milliseconds: 50)
        }
        capture.stop()
        capture.release()
        writer.stop.store(true, ordering: .relaxed)
        if let error = writer.error { throw error }
        if let failure = capture.failure { throw failure }
        return analyze(recorder.snapshot, writer: writer)
    }

    private func analyze(_ seen: [Recorder.Seen], writer: Writer) -> LoopbackSelftestReport {
        var missing = 0, duplicates = 0, outOfOrder = 0, undecodable = 0
        var latency = LatencySamples(capacity: max(seen.count, 1))
        var previous: Int64?
        var first: Int64?
        for s in seen {
            guard s.counter >= 0, s.counter < writer.writeTimes.count else { undecodable += 1; continue }
            if first == nil { first = s.counter }
            if let p = previous {
                if s.counter == p { duplicates += 1 }
                else if s.counter < p { outOfOrder += 1 }
                else { missing += Int(s.counter - p - 1) }
            }
            if previous == nil || s.counter > previous! { previous = s.counter }
            latency.record(max(0, (s.at - writer.writeTimes[Int(s.counter)]).nanosecondsClamped))
        }
        if let last = previous { missing += max(0, writer.written - 1 - Int(last)) }
        let captured = seen.count
        var problems: [String] = []
        if captured == 0 { problems.append("no frame came back") }
        if outOfOrder > 0 { problems.append("\(outOfOrder) frames out of order") }
        if undecodable > 0 { problems.append("\(undecodable) frames without a readable counter") }
        let span = max(1, writer.written - Int(first ?? 0))
        let missingPercent = Double(missing) / Double(span) * 100
        if missingPercent > maxMissingPercent {
            problems.append("\(missing) of \(span) frames missing (\(missingPercent.formatted(decimals: 1))%)")
        }
        if duplicates > 0 { problems.append("\(duplicates) duplicated frames") }
        return LoopbackSelftestReport(
            device: device, width: size.width, height: size.height, framesPerSecond: framesPerSecond,
            framesWritten: writer.written, framesCaptured: captured, firstCounter: first.map(Int.init),
            lastCounter: previous.map(Int.init), missing: missing, duplicates: duplicates, outOfOrder: outOfOrder,
            undecodable: undecodable, latencyP50Ms: Double(latency.percentile(50)) / 1e6,
            latencyP99Ms: Double(latency.percentile(99)) / 1e6, maxMissingPercent: maxMissingPercent,
            passed: problems.isEmpty, problems: problems)
    }
}
