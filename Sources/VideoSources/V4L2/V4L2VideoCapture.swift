import Logging
import MediaTypes

/// A V4L2 camera as an OpenTok-style video capturer.
///
/// `initialize` opens, validates and negotiates the device; `start` maps the
/// driver's buffers and starts one dedicated thread that waits in poll() on the
/// device and a wake-up eventfd, dequeues without blocking, keeps the newest
/// picture (requeueing older ones), converts it once into a pooled NV12 frame,
/// requeues the driver buffer at once and hands the frame to the consumer.
/// Nothing is allocated per frame in steady state.
public final class V4L2VideoCapture: VideoCapture {
    /// The device as the user named it (a path, a card name, a USB id).
    public let name: String
    /// That name, resolved to a node at `initialize` and again at every reconnect.
    let deviceName: DeviceName
    private let resolver: DeviceNameResolver
    /// Whether a reconnect resolves the name again (links, card names, USB ids), decided
    /// while the link still exists: udev removes /dev/v4l links on unplug.
    private let followsName: Bool
    let options: V4L2CaptureOptions
    private let kernel: any V4L2Kernel
    private let logger: Logger
    private let recorder = CaptureStatisticsRecorder()

    private struct Control: @unchecked Sendable {  // StreamSession: see its ownership note
        var consumer: (any VideoCaptureConsumer)?
        var settings: CaptureSettings?
        var session: StreamSession?
        var thread: StoppableThread?
        var started = false
        var failure: CaptureError?
    }
    private let control = PThreadLocked(Control())

    /// A capturer for the device `name` names: a node or link path, a card
    /// name or `usb:VID:PID[:SERIAL]` (see `DeviceName`). Nothing is opened until `initialize`.
    public convenience init(device name: String, options: V4L2CaptureOptions, logger: Logger) {
        self.init(device: name, options: options, kernel: LibV4L2Kernel(), logger: logger)
    }

    init(device name: String, options: V4L2CaptureOptions, kernel: any V4L2Kernel, tree: DeviceTree = .system,
         logger: Logger) {
        self.name = name
        // A text the CLI did not validate (a malformed usb: id) is taken as a path: opening it says what is wrong.
        deviceName = (try? DeviceName(parsing: name)) ?? .path(name)
        resolver = DeviceNameResolver(tree: tree, kernel: kernel)
        followsName = resolver.followsName(deviceName)
        self.options = options
        self.kernel = kernel
        var logger = logger
        logger[metadataKey: "device"] = "\(name)"
        self.logger = logger
    }

    deinit {
        release()
    }

    // MARK: VideoCapture

    public func initialize() throws(CaptureError) {
        let alreadyOpen = control.withLock { $0.session != nil || $0.started }
        if alreadyOpen { return }
        let path = try resolver.resolve(deviceName)
        if path != name { logger.info("\(name) is \(path)") }
        let session = try StreamSession(path: path, kernel: kernel, options: options, logger: logger)
        let settings = session.settings
        control.withLock {
            $0.session = session
            $0.settings = settings
            $0.failure = nil
        }
        logger.debug("negotiated", metadata: ["format": "\(settings.deviceFormat)"])
    }

    public func start() throws(CaptureError) {
        let result: Result<Void, CaptureError> = control.withLock { c in
            if c.started { return .success(()) }
            guard let session = c.session else {
                return .failure(.driverError(device: name, operation: "start before initialize", errno: 0))
            }
            do throws(CaptureError) {
                try session.startStreaming()
            } catch {
                return .failure(error)
            }
            c.session = nil  // the capture thread owns it now
            c.settings = session.settings
            c.started = true
            c.failure = nil
            let handoff = SessionHandoff(session)
            c.thread = StoppableThread(name: "camagent-v4l2") { [self] signal in
                let kept = captureLoop(handoff, signal)
                control.withLock { c in
                    c.session = kept
                    c.started = false
                }
            }
            return .success(())
        }
        try result.get()
    }

    public func stop() {
        let thread: StoppableThread? = control.withLock { c in
            defer { c.thread = nil }
            return c.thread
        }
        // From the consumer callback (the capture thread itself) this only asks:
        // the loop ends on its own.
        thread?.stop()
    }

    public func release() {
        stop()
        control.withLock { c in
            c.session?.stopStreaming()
            c.session = nil
        }
    }

    public var isCaptureStarted: Bool { control.withLock { $0.started } }
    public var captureSettings: CaptureSettings? { control.withLock { $0.settings } }
    public var statistics: CaptureStatistics { recorder.snapshot }
    /// The error that ended capture, if it ended on its own.
    public var failure: CaptureError? { control.withLock { $0.failure } }

    public func setConsumer(_ consumer: (any VideoCaptureConsumer)?) {
        control.withLock { $0.consumer = consumer }
    }

    private var consumer: (any VideoCaptureConsumer)? { control.withLock { $0.consumer } }

    private func emit(_ event: CaptureEvent) {
        logger.info("\(event)")
        consumer?.captureEvent(event)
    }

    // MARK: the capture thread

    /// Per-stream bookkeeping kept on the capture thread's stack.
    private struct LoopState {
        var lastFrameAt: MonotonicTimestamp
        var lastRawSequence: UInt32?
        var sequenceHigh: UInt64 = 0
        var lastTimestamp: MonotonicTimestamp = .zero
        var loggedTimestampRejection = false
        var governor: FrameRateGovernor
    }

    /// Runs until stopped or failed; returns the session if it can be reused.
    private func captureLoop(_ handoff: SessionHandoff, _ signal: StopSignal) -> StreamSession? {
        var current = handoff.take()
        var lost: (identity: V4L2Capabilities, at: MonotonicTimestamp)?
        var state = LoopState(lastFrameAt: .now(), governor: newGovernor(granted: current?.grantedRate ?? 0))
        while !signal.isStopRequested {
            if let gone = lost {
                guard let reopened = waitForDevice(like: gone.identity, signal) else { return nil }  // stopped while waiting
                current = reopened
                lost = nil
                recorder.update { $0.reconnects += 1 }
                control.withLock { $0.settings = reopened.settings }
                state = LoopState(lastFrameAt: .now(), governor: newGovernor(granted: reopened.grantedRate))
                emit(.reconnected(reopened.settings, gap: MonotonicTimestamp.now() - gone.at))
                continue
            }
            guard let session = current else { return nil }
            let outcome = captureStep(session, &state, signal)
            guard case .failure(let error) = outcome else { continue }

            session.stopStreaming()
            let recoverable: Bool
            switch error {
            case .deviceLost, .timeout: recoverable = options.reconnect
            default: recoverable = false
            }
            guard recoverable else {
                control.withLock { $0.failure = error }
                emit(.failed(error))
                return error.isDeviceGone ? nil : session
            }
            emit(.deviceLost(error))
            // Drop the session (closing the dead descriptor) before waiting: an
            // open node keeps the driver module busy, so it could not be reloaded.
            lost = (session.device.capabilities, .now())
            current = nil
        }
        current?.stopStreaming()
        return current
    }

    private func newGovernor(granted: Double) -> FrameRateGovernor {
        FrameRateGovernor(granted: granted, adapt: options.adapt, configuration: options.governor)
    }

    /// One wait and whatever it brought. `.success` to go on.
    private func captureStep(_ session: StreamSession, _ state: inout LoopState,
                             _ signal: StopSignal) -> Result<Void, CaptureError> {
        let fd = session.device.fd
        let now = MonotonicTimestamp.now()
        let silentFor = now - state.lastFrameAt
        if silentFor >= options.frameTimeout {
            return .failure(.timeout(device: name, seconds: options.frameTimeout.secondsDouble))
        }
        let untilTimeout = (options.frameTimeout - silentFor).milliseconds
        let waitMs = Int32(max(1, min(500, untilTimeout.rounded(.up))))

        let polled: V4L2PollResult
        do {
            polled = try kernel.poll(fd, wakeFD: signal.event.fd, timeoutMilliseconds: waitMs)
        } catch {
            return .failure(session.device.error(error, during: "poll"))
        }
        if polled.woken { signal.event.drain() }
        guard polled.deviceReadable || polled.deviceError else {
            return governorTick(session, &state, delivered: false)
        }

        // Drain everything ready; keep the newest good picture.
        var newest: V4L2DequeuedBuffer?
        var dequeuedAny = false
        while true {
            let buffer: V4L2DequeuedBuffer
            do {
                buffer = try kernel.dequeueBuffer(fd)
            } catch {
                if error == .wouldBlock { break }
                return .failure(session.device.error(error, during: "VIDIOC_DQBUF"))
            }
            dequeuedAny = true
            trackSequence(buffer.sequence, &state)
            if let rejected = rejection(of: buffer, in: session) {
                recorder.update { rejected.count(in: &$0) }
                if let failure = requeue(buffer.index, session) { return .failure(failure) }
                continue
            }
            if let older = newest {
                recorder.update { $0.framesSkippedForNewer += 1 }
                if let failure = requeue(older.index, session) { return .failure(failure) }
            }
            newest = buffer
        }
        if polled.deviceError && !dequeuedAny {
            // POLLERR with nothing to dequeue: the driver stopped the stream (unplug, fatal error).
            return .failure(.deviceLost(device: name))
        }
        guard let newest else { return governorTick(session, &state, delivered: false) }

        let delivered = deliver(newest, session, &state)
        if let failure = requeue(newest.index, session) { return .failure(failure) }
        return governorTick(session, &state, delivered: delivered)
    }

    /// Why a buffer must be dropped before conversion, if it must.
    private enum Rejection {
        case corrupt, tooShort
        func count(in stats: inout CaptureStatistics) {
            switch self {
            case .corrupt: stats.framesCorrupt += 1
            case .tooShort: stats.framesTooShort += 1
            }
        }
    }

    private func rejection(of buffer: V4L2DequeuedBuffer, in session: StreamSession) -> Rejection? {
        if buffer.isFlaggedError { return .corrupt }
        guard let bytes = session.bytes(of: buffer), bytes.count >= session.converter.minimumBytes else { return .tooShort }
        return nil
    }

    /// Counts driver drops from gaps in the sequence numbers. v4l2loopback can
    /// leave them at 0, so a number that does not advance counts nothing.
    private func trackSequence(_ raw: UInt32, _ state: inout LoopState) {
        if let last = state.lastRawSequence {
            if raw < last && last - raw > UInt32.max / 2 { state.sequenceHigh += 1 << 32 }  // wrapped
            let gap = raw &- last &- 1
            if raw != last, gap > 0, gap < UInt32.max / 2 {
                recorder.update { $0.framesDroppedByDriver += UInt64(gap) }
            }
        }
        state.lastRawSequence = raw
    }

    /// Converts into a pooled frame and calls the consumer. False if dropped.
    private func deliver(_ buffer: V4L2DequeuedBuffer, _ session: StreamSession, _ state: inout LoopState) -> Bool {
        guard let frame = session.pool.acquire() else {
            // The device is fine; the consumer is slow. Not a reason to time out.
            state.lastFrameAt = .now()
            recorder.update { $0.framesDroppedConsumerBusy += 1 }
            return false
        }
        guard let bytes = session.bytes(of: buffer) else { return false }
        frame.setFormat(session.outputFormat)
        do {
            if let scratch = session.rotationScratch {
                scratch.setFormat(.nv12(width: session.deviceFormat.width, height: session.deviceFormat.height,
                                        framesPerSecond: session.grantedRate))
                try session.converter.convert(bytes, into: scratch)
                session.rotator?.apply(options.orientation, from: scratch, into: frame)
            } else {
                try session.converter.convert(bytes, into: frame)
            }
        } catch {
            recorder.update { s in
                if error == .tooShort { s.framesTooShort += 1 } else { s.framesBadJPEG += 1 }
            }
            return false
        }

        // The kernel's timestamp, unless it is not monotonic, in the future or
        // going backwards. Drivers that stamp the nominal end of a frame (vivid
        // does) can be up to a frame interval ahead of now: that is tolerated.
        let now = MonotonicTimestamp.now()
        var timestamp = buffer.timestamp
        let latestAcceptable = now + session.estimatedCaptureDelay
        if !buffer.hasMonotonicTimestamp || timestamp > latestAcceptable || timestamp < state.lastTimestamp || timestamp == .zero {
            if !state.loggedTimestampRejection {  // once per stream: it tends to repeat on every frame
                state.loggedTimestampRejection = true
                logger.info("kernel timestamp rejected, using arrival time", metadata: [
                    "monotonic": "\(buffer.hasMonotonicTimestamp)", "flags": "\(buffer.flags)",
                    "aheadOfNowNs": "\(timestamp.nanoseconds - now.nanoseconds)",
                    "sincePreviousNs": "\(timestamp.nanoseconds - state.lastTimestamp.nanoseconds)",
                ])
            }
            recorder.update { $0.timestampsRejected += 1 }
            timestamp = now
        }
        state.lastTimestamp = timestamp
        state.lastFrameAt = now  // a usable picture: the frame timeout counts from here
        frame.timestamp = timestamp
        frame.sequence = state.sequenceHigh | UInt64(buffer.sequence)
        frame.orientation = options.rotatePixels ? .upright : options.orientation
        frame.isFullRange = session.deviceFormat.pixelFormat.isCompressed
        let delivered = MonotonicTimestamp.now()
        frame.deliveredAt = delivered
        consumer?.consume(frame)
        recorder.recordDelivery(captured: timestamp, delivered: delivered)
        return true
    }

    private func requeue(_ index: Int, _ session: StreamSession) -> CaptureError? {
        do {
            try kernel.queueBuffer(session.device.fd, index: index)
            return nil
        } catch {
            return session.device.error(error, during: "VIDIOC_QBUF")
        }
    }

    // MARK: governor

    private func governorTick(_ session: StreamSession, _ state: inout LoopState, delivered: Bool) -> Result<Void, CaptureError> {
        let now = MonotonicTimestamp.now()
        switch state.governor.observe(at: now, delivered: delivered) {
        case .none:
            return .success(())
        case .report(let d, let g, let s):
            emit(.rateBelowGranted(delivered: d, granted: g, seconds: s))
            return .success(())
        case .reportAndAct(let d, let g, let s):
            emit(.rateBelowGranted(delivered: d, granted: g, seconds: s))
            return adapt(session, &state, now: now)
        }
    }

    /// First remedy: turn off auto-exposure priority (UVC cameras halve the
    /// rate in low light with it). Else renegotiate: MJPEG, or a smaller size.
    private func adapt(_ session: StreamSession, _ state: inout LoopState, now: MonotonicTimestamp) -> Result<Void, CaptureError> {
        if let (_, value) = session.device.control(exposureAutoPriorityControl), value != 0,
           (try? kernel.setControl(session.device.fd, id: exposureAutoPriorityControl, value: 0)) != nil {
            emit(.adapted(action: "turned off exposure_auto_priority (was \(value))"))
            state.governor.restart(granted: session.grantedRate, at: now)
            return .success(())
        }
        let before = session.settings.deviceFormat
        guard let plan = session.negotiator.fallback(from: session.plan, desiredRate: options.request.framesPerSecond) else {
            emit(.adapted(action: "nothing left to try: no exposure_auto_priority control, no MJPEG, no smaller size"))
            return .success(())
        }
        do throws(CaptureError) {
            try session.renegotiate(to: plan, logger: logger)
        } catch {
            return .failure(error)
        }
        let after = session.settings
        control.withLock { $0.settings = after }
        state.governor.restart(granted: session.grantedRate, at: .now())
        state.lastFrameAt = .now()
        state.lastRawSequence = nil
        emit(.adapted(action: "renegotiated \(before) -> \(after.deviceFormat)"))
        return .success(())
    }

    // MARK: reconnection

    /// Waits until the device is back, then reopens, renegotiates and restarts
    /// it. nil if stopped first. A stable name (link, card name, USB id) is
    /// resolved again and whatever it names now is the device; a plain node
    /// path is recognised by the lost device's identity (bus info and driver)
    /// on any node.
    private func waitForDevice(like identity: V4L2Capabilities, _ signal: StopSignal) -> StreamSession? {
        var lastError: CaptureError?
        while !signal.isStopRequested {
            let candidates: [String]
            if followsName {
                candidates = (try? resolver.resolve(deviceName)).map { [$0] } ?? []
            } else {
                candidates = [name] + DeviceDiscovery.videoNodes(in: resolver.tree.dev).filter { $0 != name }
            }
            for path in candidates {
                guard let candidate = try? V4L2Device.open(path: path, kernel: kernel) else { continue }
                let caps = candidate.capabilities
                let same = followsName || (identity.busInfo.isEmpty
                    ? (path == name && caps.card == identity.card)
                    : (caps.busInfo == identity.busInfo && caps.driver == identity.driver))
                guard same else { continue }
                _ = candidate  // closed here; the session opens its own
                do throws(CaptureError) {
                    let session = try StreamSession(path: path, kernel: kernel, options: options, logger: logger)
                    try session.startStreaming()
                    return session
                } catch {
                    if error != lastError {  // repeated failures are logged once
                        logger.warning("device is back but cannot be restarted yet: \(error)")
                        lastError = error
                    }
                }
            }
            let ms = Int32(options.reconnectInterval.milliseconds)
            signal.wait(milliseconds: ms)
        }
        return nil
    }
}

/// Carries the session to the capture thread without the thread's closure
/// keeping it alive: the loop takes it out, so dropping it really closes it.
private final class SessionHandoff: @unchecked Sendable {  // taken once, by the capture thread
    private var session: StreamSession?
    init(_ session: StreamSession) { self.session = session }
    func take() -> StreamSession? {
        defer { session = nil }
        return session
    }
}

extension CaptureError {
    /// The device itself is gone: its descriptor and buffers are useless.
    fileprivate var isDeviceGone: Bool {
        if case .deviceLost = self { return true }
        return false
    }
}
