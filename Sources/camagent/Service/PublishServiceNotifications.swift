import Foundation
import Logging
import MediaTypes
import Synchronization
import SystemdSupport

/// What `camagent publish` tells systemd when it runs as a Type=notify
/// service (packaging/camagent.service): READY=1 once capture and the server
/// (or the WHIP session) run, STATUS= lines, WATCHDOG=1 pings earned by frames
/// reaching the encoder, STOPPING=1 on the way out. Outside systemd (no
/// NOTIFY_SOCKET) every call does nothing.
final class PublishServiceNotifications: Sendable {
    private let notifier: ServiceNotifier?
    private let watchdogSettings: WatchdogSettings?
    private let logger: Logger
    /// Frames each camera handed to its publisher: what earns a watchdog ping.
    private let cameras = PThreadLocked<[FrameCounter]>([])

    private final class FrameCounter: Sendable {
        let frames = Atomic<UInt64>(0)
    }
    /// Turns of the command's main loop: the ping's earner when there is no camera (audio only).
    private let loopTurns = Atomic<UInt64>(0)
    private let watchdog = PThreadLocked<ProgressWatchdog?>(nil)
    /// What READY=1 said, for the status when frames come back after a stall.
    private let runningStatus = PThreadLocked<String?>(nil)

    init(environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) {
        self.logger = logger
        var notifier: ServiceNotifier?
        do throws(ServiceNotifyError) {
            notifier = try ServiceNotifier.fromEnvironment(environment)
        } catch {
            // Not fatal: systemd will say the start timed out, and this line says why.
            logger.error("cannot notify systemd: \(error)")
        }
        self.notifier = notifier
        watchdogSettings = notifier == nil ? nil : WatchdogSettings.fromEnvironment(environment, pid: getpid())
        if let notifier {
            logger.debug("systemd notification socket \(notifier.socketPath)",
                         metadata: ["watchdogSeconds": "\(watchdogSettings?.timeout.secondsDouble ?? 0)"])
        }
    }

    /// The capture, with every frame it delivers counted for the watchdog (a count per camera).
    func counting(_ capture: any VideoCapture) -> any VideoCapture {
        guard notifier != nil else { return capture }
        let counter = FrameCounter()
        cameras.withLock { $0.append(counter) }
        return FrameCountingCapture(wrapping: capture) { counter.frames.add(1, ordering: .relaxed) }
    }

    /// Starts pinging at half of WATCHDOG_USEC while frames (or, without a
    /// camera, the main loop) keep moving. Call before `publish()`: the camera
    /// starts there and a WHIP connection may take a while.
    func startWatchdog(hasCamera: Bool) {
        guard let notifier, let settings = watchdogSettings else { return }
        let progress: @Sendable () -> UInt64
        if hasCamera {
            // The slowest camera's count: with several, one that stalls stops the pings too.
            progress = { [self] in
                cameras.withLock { $0.reduce(UInt64.max) { Swift.min($0, $1.frames.load(ordering: .relaxed)) } }
            }
        } else {
            progress = { [self] in loopTurns.load(ordering: .relaxed) }
        }
        watchdog.withLock {
            $0 = ProgressWatchdog(notifier: notifier, interval: settings.pingInterval, logger: logger,
                                  runningStatus: { [self] in runningStatus.withLock { $0 } }, progress: progress)
        }
    }

    /// One turn of `publish`'s main loop.
    func loopTurned() { loopTurns.add(1, ordering: .relaxed) }

    func ready(status: String) {
        runningStatus.withLock { $0 = status }
        // What was printed before (the "serving" line with the viewer URL) is out before systemd says
        // the service is up: stdout goes through the output thread, READY=1 does not. Bounded, so a
        // stalled reader of stdout delays READY=1 by a second at most.
        if notifier != nil { OutputQueue.standard.flush(seconds: 1) }
        send([.ready, .status(status)])
    }

    func status(_ text: String) { send([.status(text)]) }

    /// Pings end first: nothing may follow STOPPING=1 that says "healthy".
    func stopping(status: String) {
        let running = watchdog.withLock { w in defer { w = nil }; return w }
        running?.stop()
        send([.stopping, .status(status)])
    }

    private func send(_ states: [ServiceState]) {
        guard let notifier else { return }
        do throws(ServiceNotifyError) {
            try notifier.notify(states)
        } catch {
            logger.warning("systemd notification failed: \(error)")
        }
    }
}

/// A capturer that counts the frames it hands on, for the watchdog; all else
/// passes through to the capturer it wraps.
final class FrameCountingCapture: VideoCapture {
    private let inner: any VideoCapture
    private let onFrame: @Sendable () -> Void

    init(wrapping inner: any VideoCapture, onFrame: @escaping @Sendable () -> Void) {
        self.inner = inner
        self.onFrame = onFrame
    }

    var name: String { inner.name }
    func initialize() throws(CaptureError) { try inner.initialize() }
    func start() throws(CaptureError) { try inner.start() }
    func stop() { inner.stop() }
    func release() { inner.release() }
    var isCaptureStarted: Bool { inner.isCaptureStarted }
    var captureSettings: CaptureSettings? { inner.captureSettings }
    var statistics: CaptureStatistics { inner.statistics }

    func setConsumer(_ consumer: (any VideoCaptureConsumer)?) {
        inner.setConsumer(consumer.map { CountingConsumer(inner: $0, onFrame: onFrame) })
    }

    private final class CountingConsumer: VideoCaptureConsumer {
        let inner: any VideoCaptureConsumer
        let onFrame: @Sendable () -> Void
        init(inner: any VideoCaptureConsumer, onFrame: @escaping @Sendable () -> Void) {
            self.inner = inner
            self.onFrame = onFrame
        }
        func consume(_ frame: VideoFrame) {
            onFrame()
            inner.consume(frame)
        }
        func captureEvent(_ event: CaptureEvent) { inner.captureEvent(event) }
    }
}
