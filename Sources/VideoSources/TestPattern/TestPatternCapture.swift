import Logging
import MediaTypes
import PixelConversion

/// The built-in test pattern as a video capturer, so the agent runs (and is
/// tested) on a box with no camera. Frames are drawn on a dedicated thread on
/// an absolute CLOCK_MONOTONIC schedule (no drift), with the frame counter
/// drawn into the picture; frames come from a pool, as from a camera.
public final class TestPatternCapture: VideoCapture {
    public let name = "test-pattern"
    private let size: FrameSize
    private let framesPerSecond: Double
    private let orientation: VideoOrientation
    /// `--rotate-pixels`: frames leave turned (and upright), as from a camera with that option.
    private let rotatePixels: Bool
    private let logger: Logger
    private let recorder = CaptureStatisticsRecorder()

    private struct Control: @unchecked Sendable {  // renderer/pool: used by one capture thread at a time
        var consumer: (any VideoCaptureConsumer)?
        var settings: CaptureSettings?
        var thread: StoppableThread?
        var nextCounter: UInt32 = 0
    }
    private let control = PThreadLocked(Control())

    public init(size: FrameSize, framesPerSecond: Double, orientation: VideoOrientation = .upright,
                rotatePixels: Bool = false, logger: Logger) {
        // The pattern needs an even size of at least 160x120.
        self.size = FrameSize(width: max(160, size.width & ~1), height: max(120, size.height & ~1))
        self.framesPerSecond = min(max(framesPerSecond, 0.1), 240)
        self.orientation = orientation
        self.rotatePixels = rotatePixels && !orientation.isUpright
        self.logger = logger
    }

    deinit { release() }

    public func initialize() throws(CaptureError) {
        let format = VideoFormat.nv12(width: size.width, height: size.height, framesPerSecond: framesPerSecond)
        let turned = rotatePixels ? PixelRotator.rotatedSize(width: size.width, height: size.height,
                                                             rotation: orientation.rotation) : size
        let settings = CaptureSettings(
            device: name, card: "camagent test pattern", driver: "camagent", busInfo: "builtin",
            deviceFormat: format,
            outputFormat: .nv12(width: turned.width, height: turned.height, framesPerSecond: framesPerSecond),
            requestedSize: size,
            requestedFramesPerSecond: framesPerSecond, grantedFramesPerSecond: framesPerSecond,
            bufferCount: 4, orientation: orientation, rotatesPixels: rotatePixels)
        control.withLock { $0.settings = settings }
    }

    public func start() throws(CaptureError) {
        let needsInit = control.withLock { $0.settings == nil }
        if needsInit { try initialize() }
        control.withLock { c in
            guard c.thread == nil else { return }
            let side = max(size.width, size.height)   // room for the picture either way round
            let job = PatternJob(renderer: TestPatternRenderer(width: size.width, height: size.height),
                                 pool: VideoFramePool(count: 4, maxWidth: side, maxHeight: side),
                                 firstCounter: c.nextCounter,
                                 turning: rotatePixels ? (PixelRotator(maxWidth: side, maxHeight: side),
                                                          VideoFrame(maxWidth: size.width, maxHeight: size.height)) : nil)
            c.thread = StoppableThread(name: "camagent-pattern") { [self] signal in
                let next = run(job, signal)
                control.withLock { $0.nextCounter = next }
            }
        }
    }

    public func stop() {
        let thread: StoppableThread? = control.withLock { c in
            defer { c.thread = nil }
            return c.thread
        }
        thread?.stop()
    }

    public func release() { stop() }

    public var isCaptureStarted: Bool { control.withLock { $0.thread != nil } }
    public var captureSettings: CaptureSettings? { control.withLock { $0.settings } }
    public var statistics: CaptureStatistics { recorder.snapshot }

    public func setConsumer(_ consumer: (any VideoCaptureConsumer)?) {
        control.withLock { $0.consumer = consumer }
    }

    /// What the drawing thread works with; handed to it once.
    private final class PatternJob: @unchecked Sendable {  // used by the one pattern thread only
        let renderer: TestPatternRenderer
        let pool: VideoFramePool
        let firstCounter: UInt32
        /// With `rotatePixels`: the rotator and the upright picture it turns into a pool frame.
        let turning: (rotator: PixelRotator, upright: VideoFrame)?
        init(renderer: TestPatternRenderer, pool: VideoFramePool, firstCounter: UInt32,
             turning: (rotator: PixelRotator, upright: VideoFrame)?) {
            self.renderer = renderer
            self.pool = pool
            self.firstCounter = firstCounter
            self.turning = turning
        }
    }

    /// Draws frames until stopped; returns the next counter so a restart continues the count.
    private func run(_ job: PatternJob, _ signal: StopSignal) -> UInt32 {
        let interval = Int64(1e9 / framesPerSecond)
        let start = MonotonicTimestamp.now()
        var counter = job.firstCounter
        var index: Int64 = 0
        while !signal.isStopRequested {
            let due = MonotonicTimestamp(nanoseconds: start.nanoseconds + index * interval)
            let wait = due.nanoseconds - MonotonicTimestamp.now().nanoseconds
            if wait > 0 {
                if signal.wait(milliseconds: Int32(min((wait + 999_999) / 1_000_000, 1000))) { continue }
                if MonotonicTimestamp.now() < due { continue }
            }
            index += 1
            guard let frame = job.pool.acquire() else {
                recorder.update { $0.framesDroppedConsumerBusy += 1 }
                counter &+= 1
                continue
            }
            if let turning = job.turning {
                job.renderer.render(counter: counter, into: turning.upright, framesPerSecond: framesPerSecond)
                turning.rotator.apply(orientation, from: turning.upright, into: frame)
            } else {
                job.renderer.render(counter: counter, into: frame, framesPerSecond: framesPerSecond)
            }
            frame.timestamp = .now()
            frame.sequence = UInt64(counter)
            frame.orientation = job.turning == nil ? orientation : .upright
            let delivered = MonotonicTimestamp.now()
            frame.deliveredAt = delivered
            control.withLock { $0.consumer }?.consume(frame)
            recorder.recordDelivery(captured: frame.timestamp, delivered: delivered)
            counter &+= 1
        }
        return counter
    }
}
