import MediaTypes
import TestSupport
import Testing
@testable import VideoSources

@Suite("Streaming through the fake kernel")
struct StreamingTests {
    let path = "/dev/video0"

    func makeCapture(_ node: FakeV4L2Kernel.Node = .camera([.yuyv], sizes: [qvga]),
                     configure: (inout V4L2CaptureOptions) -> Void = { _ in })
        -> (V4L2VideoCapture, FakeV4L2Kernel, CollectingConsumer)
    {
        let kernel = FakeV4L2Kernel(nodes: [path: node])
        var options = V4L2CaptureOptions(request: NegotiationRequest(size: qvga, framesPerSecond: 30))
        options.frameTimeout = .seconds(30)
        configure(&options)
        let capture = V4L2VideoCapture(device: path, options: options, kernel: kernel, logger: testLogger)
        let consumer = CollectingConsumer()
        capture.setConsumer(consumer)
        return (capture, kernel, consumer)
    }

    func frame(_ seq: UInt32, y: UInt8 = 100, flags: UInt32 = 0, used: Int? = nil,
               timestamp: MonotonicTimestamp? = nil) -> FakeV4L2Kernel.Step {
        .frame(bytes: yuyvFrame(width: 320, height: 240, y: y, u: 90, v: 200), bytesUsed: used,
               sequence: seq, flags: flags, timestamp: timestamp)
    }

    @Test func yuyvFramesArriveAsNV12WithKernelTimestamps() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        let t0 = MonotonicTimestamp.now() + .milliseconds(-50)
        kernel.script([frame(0, y: 100, timestamp: t0), frame(1, y: 120, timestamp: t0 + .milliseconds(33))])
        try capture.start()
        #expect(eventually { consumer.frames.count == 2 })
        capture.stop()
        let frames = consumer.frames
        #expect(frames.map(\.firstLuma) == [100, 120])
        #expect(frames[0].firstChroma == (90, 200))
        #expect(frames.map(\.timestamp) == [t0, t0 + .milliseconds(33)])
        #expect(frames.map(\.sequence) == [0, 1])
        #expect(frames.allSatisfy { $0.width == 320 && $0.height == 240 && $0.deliveredAt >= $0.timestamp })
        #expect(capture.statistics.framesDelivered == 2)
        #expect(capture.statistics.timestampsRejected == 0)
    }

    @Test func futureAndBackwardTimestampsAreReplaced() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        let now = MonotonicTimestamp.now()
        kernel.script([frame(0, timestamp: now + .milliseconds(-300)),
                       frame(1, timestamp: now + .milliseconds(-100)),
                       frame(2, timestamp: now + .milliseconds(-200)),    // backwards
                       frame(3, timestamp: now + .seconds(60))])          // far in the future
        try capture.start()
        #expect(eventually { consumer.frames.count == 4 })
        capture.stop()
        #expect(capture.statistics.timestampsRejected == 2)
        let ts = consumer.frames.map(\.timestamp)
        #expect(ts[0] == now + .milliseconds(-300) && ts[1] == now + .milliseconds(-100))
        #expect(ts[3] < now + .seconds(10))
        #expect(ts[2] >= ts[1] && ts[3] >= ts[2])
    }

    @Test func spuriousWakesProduceNothing() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        kernel.script([.spuriousWake, .spuriousWake, frame(0), .spuriousWake, frame(1)])
        try capture.start()
        #expect(eventually { consumer.frames.count == 2 && kernel.remainingSteps == 0 })
        capture.stop()
        #expect(consumer.frames.count == 2)
        #expect(consumer.events.isEmpty)
        #expect(capture.failure == nil)
    }

    @Test func sequenceGapsCorruptAndShortBuffersAreCounted() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        kernel.script([frame(0), frame(3),                  // gap: 1 and 2 dropped by the driver
                       frame(4, flags: 0x40),               // V4L2_BUF_FLAG_ERROR
                       frame(5, used: 1000),                // far too short for 320x240 YUYV
                       frame(6)])
        try capture.start()
        #expect(eventually { kernel.remainingSteps == 0 && consumer.frames.count == 3 })
        capture.stop()
        let s = capture.statistics
        #expect(s.framesDroppedByDriver == 2)
        #expect(s.framesCorrupt == 1)
        #expect(s.framesTooShort == 1)
        #expect(consumer.frames.map(\.sequence) == [0, 3, 6])
    }

    @Test func onlyTheNewestOfABurstIsDeliveredAndAllAreRequeued() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        kernel.script([.burst(sequences: [0, 1, 2])])
        try capture.start()
        #expect(eventually { consumer.frames.count == 1 && kernel.calls.queued.count == 4 + 3 })
        capture.stop()
        #expect(consumer.frames.map(\.sequence) == [2])
        #expect(capture.statistics.framesSkippedForNewer == 2)
    }

    @Test func deviceLostMidStreamFailsCleanly() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        kernel.script([frame(0), .dequeueError(.noDevice)])
        try capture.start()
        #expect(eventually { capture.failure != nil })
        #expect(capture.failure == .deviceLost(device: path))
        #expect(eventually { consumer.events.contains { $0.failure == .deviceLost(device: path) } })
        #expect(eventually { !capture.isCaptureStarted })
        capture.release()
    }

    @Test func pollErrorWithNothingToDequeueIsDeviceLost() throws {
        let (capture, kernel, _) = makeCapture()
        try capture.initialize()
        kernel.script([frame(0), .pollError])
        try capture.start()
        #expect(eventually { capture.failure != nil })
        #expect(capture.failure == .deviceLost(device: path))
        capture.release()
    }

    @Test func reconnectsToTheSameDeviceAndFeedsTheSameConsumer() throws {
        let node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        let (capture, kernel, consumer) = makeCapture(node) { $0.reconnect = true; $0.reconnectInterval = .milliseconds(10) }
        try capture.initialize()
        kernel.script([frame(0), .removeNode(path), .dequeueError(.noDevice)])
        try capture.start()
        #expect(eventually { consumer.events.contains { $0.isDeviceLost } })
        kernel.script([.restoreNode(path, node)])
        // While the node is gone nobody polls it, so restore it directly too.
        kernel.withLockRestore(path, node)
        #expect(eventually { consumer.events.contains { $0.isReconnected } })
        kernel.script([frame(0, y: 77), frame(1, y: 78)])
        #expect(eventually { consumer.frames.count >= 3 })
        capture.stop()
        #expect(capture.statistics.reconnects == 1)
        #expect(consumer.frames.last?.firstLuma == 78)
        #expect(capture.failure == nil)
    }

    @Test func noFrameWithinTheTimeoutIsATimeout() throws {
        let (capture, kernel, consumer) = makeCapture { $0.frameTimeout = .milliseconds(200) }
        try capture.initialize()
        kernel.script([frame(0)])
        try capture.start()
        #expect(eventually { capture.failure != nil })
        #expect(capture.failure == .timeout(device: path, seconds: 0.2))
        #expect(consumer.frames.count == 1)
        capture.release()
    }

    @Test func stopHandsEveryBufferBackAndRestartWorks() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        try capture.start()
        kernel.script([frame(0)])
        #expect(eventually { consumer.frames.count == 1 })
        capture.stop()
        #expect(!capture.isCaptureStarted)
        #expect(kernel.calls.streamOff == 1)
        #expect(kernel.calls.requestedBuffers == [4, 0])
        try capture.start()
        kernel.script([frame(1)])
        #expect(eventually { consumer.frames.count == 2 })
        capture.release()
        #expect(kernel.calls.streamOn == 2 && kernel.calls.streamOff == 2)
        #expect(kernel.calls.requestedBuffers == [4, 0, 4, 0])
    }

    @Test func poolFramesAreReusedNotAllocated() throws {
        let (capture, kernel, consumer) = makeCapture()
        try capture.initialize()
        let steps = (0..<200).map { frame(UInt32($0)) }
        kernel.script(steps)
        try capture.start()
        #expect(eventually(30) { consumer.frames.count == 200 })
        capture.stop()
        let identities = Set(consumer.frames.map(\.identity))
        #expect(identities.count <= 4)  // the pool's four frames, over and over
        #expect(capture.statistics.framesDroppedConsumerBusy == 0)
    }

    @Test func aConsumerHoldingEveryFrameCausesDropsNotAllocation() throws {
        let (capture, kernel, consumer) = makeCapture()
        consumer.holdFrames = true
        try capture.initialize()
        kernel.script((0..<8).map { frame(UInt32($0)) })
        try capture.start()
        #expect(eventually { kernel.remainingSteps == 0 && capture.statistics.framesDroppedConsumerBusy == 4 })
        capture.stop()
        #expect(consumer.frames.count == 4)
        #expect(Set(consumer.frames.map(\.identity)).count == 4)
    }

    @Test func driverAdjustedSizeAndRateAreReported() throws {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.adjustFormat = { f in var g = f; g.width = 320; g.height = 180; return g }
        node.adjustInterval = { _ in FrameInterval(numerator: 1, denominator: 25) }
        let (capture, _, _) = makeCapture(node)
        try capture.initialize()
        let settings = try #require(capture.captureSettings)
        #expect(settings.deviceFormat.size == FrameSize(width: 320, height: 180))
        #expect(settings.outputFormat.size == FrameSize(width: 320, height: 180))
        #expect(settings.grantedFramesPerSecond == 25)
        #expect(settings.requestedFramesPerSecond == 30)
        capture.release()
    }

    @Test func driverSwappingThePixelFormatIsAnError() {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.adjustFormat = { f in var g = f; g.pixelFormat = PixelFormat("RGB3"); return g }
        let (capture, _, _) = makeCapture(node)
        #expect(throws: CaptureError.formatNotSupported(device: path, requested: "YUYV", available: ["RGB3"])) {
            try capture.initialize()
        }
    }

    @Test func streamOnFailureIsReported() throws {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.streamOnError = .ioError
        let (capture, kernel, _) = makeCapture(node)
        try capture.initialize()
        #expect(throws: CaptureError.self) { try capture.start() }
        #expect(!capture.isCaptureStarted)
        #expect(kernel.calls.requestedBuffers.last == 0)  // buffers handed back
    }

    @Test func busyAtSetFormat() {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.setFormatError = .busy
        let (capture, _, _) = makeCapture(node)
        #expect(throws: CaptureError.busy(device: path)) { try capture.initialize() }
    }

    @Test func exposurePriorityIsTurnedOffByTheGovernor() throws {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.controls[exposureAutoPriorityControl] = (
            V4L2ControlInfo(id: exposureAutoPriorityControl, name: "Exposure, Dynamic Framerate",
                            minimum: 0, maximum: 1, defaultValue: 1, isDisabled: false), 1)
        let (capture, kernel, consumer) = makeCapture(node) {
            $0.adapt = true
            $0.governor.window = .milliseconds(1)
        }
        try capture.initialize()
        try capture.start()
        // No frames at all at 30 fps granted: after a second the governor judges the rate.
        #expect(eventually { consumer.events.contains { if case .adapted = $0 { return true }; return false } })
        capture.stop()
        #expect(kernel.calls.setControls.first?.0 == exposureAutoPriorityControl)
        #expect(kernel.calls.setControls.first?.1 == 0)
    }
}


@Suite("Frame timeout counts usable frames")
struct UsableFrameTimeoutTests {
    @Test func onlyCorruptFramesEndInATimeout() throws {
        let kernel = FakeV4L2Kernel(nodes: ["/dev/video0": .camera([.yuyv], sizes: [qvga])])
        var options = V4L2CaptureOptions(request: NegotiationRequest(size: qvga, framesPerSecond: 30))
        options.frameTimeout = .milliseconds(300)
        let capture = V4L2VideoCapture(device: "/dev/video0", options: options, kernel: kernel, logger: testLogger)
        try capture.initialize()
        // A stream of nothing but buffers flagged as errors, for longer than the timeout.
        kernel.script((0..<300_000).map { .frame(bytes: nil, bytesUsed: nil, sequence: UInt32($0), flags: 0x40, timestamp: nil) })
        try capture.start()
        #expect(eventually(30) { capture.failure != nil })
        #expect(kernel.remainingSteps > 0)  // it timed out while broken buffers were still arriving
        #expect(capture.failure == .timeout(device: "/dev/video0", seconds: 0.3))
        #expect(capture.statistics.framesCorrupt > 0)
        capture.release()
    }
}
