import Logging
import MediaTypes

/// The watchdog systemd armed for this process (WatchdogSec= in the unit):
/// $WATCHDOG_USEC, and $WATCHDOG_PID when systemd says whom it is meant for.
public struct WatchdogSettings: Hashable, Sendable {
    /// Without a ping for this long, systemd kills and restarts the service.
    public var timeout: Duration

    public init(timeout: Duration) { self.timeout = timeout }

    /// How often to ping: half the timeout, as systemd recommends, so one late ping is no restart.
    public var pingInterval: Duration { timeout / 2 }

    /// nil when there is no watchdog, or when it is meant for another process
    /// (WATCHDOG_PID names another pid: a child inherited the environment).
    public static func fromEnvironment(_ environment: [String: String], pid: Int32) -> WatchdogSettings? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = environment["WATCHDOG_PID"], !owner.isEmpty, Int32(owner) != pid { return nil }
        return WatchdogSettings(timeout: .microseconds(Int64(clamping: usec)))
    }
}

/// Decides, at each ping time, whether the service earned its ping: only when
/// the work it is there for (frames) moved on since the last one. A stalled
/// camera therefore withholds pings, and systemd restarts the service.
public struct WatchdogGate: Sendable {
    private var lastProgress: UInt64
    private var stalledTicks = 0

    /// `progress` is the counter's value when watching starts.
    public init(progress: UInt64) { lastProgress = progress }

    /// True while pings are withheld.
    public var isStalled: Bool { stalledTicks > 0 }

    /// What to send for the counter's value now: a ping when it moved, a
    /// status line once when it stops moving and once when it moves again
    /// (then with `runningStatus`, what the status said before the stall).
    public mutating func tick(progress: UInt64, interval: Duration, runningStatus: String? = nil) -> [ServiceState] {
        defer { lastProgress = progress }
        if progress != lastProgress {
            let wasStalled = stalledTicks > 0
            stalledTicks = 0
            guard wasStalled else { return [.watchdog] }
            return [.watchdog, .status("Frames flowing again" + (runningStatus.map { ": \($0)" } ?? "; watchdog pings resumed"))]
        }
        stalledTicks += 1
        guard stalledTicks == 1 else { return [] }
        let seconds = interval.secondsDouble.formatted(decimals: 1)
        return [.status("No frame for \(seconds) s: watchdog pings withheld (systemd restarts the service when its WatchdogSec= runs out)")]
    }
}

/// A thread that pings systemd's watchdog every `interval` while `progress`
/// (a frame counter) keeps moving. Failures to send are logged once each.
public final class ProgressWatchdog: Sendable {
    private let thread: StoppableThread

    /// `runningStatus` gives the status to restore when frames come back after a stall.
    public init(notifier: ServiceNotifier, interval: Duration, logger: Logger,
                runningStatus: @escaping @Sendable () -> String? = { nil },
                progress: @escaping @Sendable () -> UInt64) {
        thread = StoppableThread(name: "camagent-wdog") { signal in
            var gate = WatchdogGate(progress: progress())
            var lastError: ServiceNotifyError?
            let milliseconds = Int32(clamping: max(1, Int64(interval.milliseconds)))
            while !signal.isStopRequested {
                if signal.wait(milliseconds: milliseconds) { continue }  // woken to stop
                let states = gate.tick(progress: progress(), interval: interval, runningStatus: runningStatus())
                guard !states.isEmpty else { continue }
                do throws(ServiceNotifyError) {
                    try notifier.notify(states)
                    lastError = nil
                } catch {
                    if error != lastError { logger.warning("systemd notification failed: \(error)") }
                    lastError = error
                }
            }
        }
    }

    /// Stops pinging (before STOPPING=1, so no ping follows it).
    public func stop() { thread.stop() }
}
