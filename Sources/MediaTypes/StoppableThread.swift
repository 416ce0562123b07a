import Synchronization

/// What a ``StoppableThread``'s body looks at: whether it should stop, and
/// an eventfd to wait on (in poll() beside its own descriptors, or through
/// `wait`) that wakes it when it should stop or has work.
public final class StopSignal: Sendable {
    /// Signalled on `stop()` and on `wakeUp()`; drain it after waking.
    public let event = WakeEvent()
    private let requested = Atomic<Bool>(false)

    /// A signal made before its thread, for an owner that must hand out its
    /// wake-up (`wakeUp`) from a `let`. A signal serves one thread: once
    /// stopped, it stays stopped.
    public init() {}

    /// True once `stop()` was called: the body should return soon.
    public var isStopRequested: Bool { requested.load(ordering: .acquiring) }

    /// Wakes the thread without asking it to stop (new work, new settings).
    public func wakeUp() { event.signal() }

    /// Waits until woken or `milliseconds` pass; true if woken.
    @discardableResult
    public func wait(milliseconds: Int32) -> Bool { event.wait(milliseconds: milliseconds) }

    /// Asks the loop to stop, without waiting (its thread may not run yet:
    /// one that starts later with this signal stops at once).
    public func requestStop() {
        requested.store(true, ordering: .releasing)
        event.signal()
    }
}

/// A ``DeviceThread`` that can be asked to stop: it owns the stop flag and
/// the wake-up event its loop waits on, and `stop()` sets the one, signals
/// the other and joins, once, from any thread. Called on the thread itself
/// (a callback that stops its own source) it only asks: the loop ends on its
/// own. Every long-running loop of the agent (capture, encode, transport,
/// control) is one of these.
public final class StoppableThread: Sendable {
    public let signal: StopSignal
    private let thread: DeviceThread
    private let joined = Atomic<Bool>(false)

    /// Starts `body` on a new thread named `name`; it should return once
    /// `signal.isStopRequested` is true.
    public init(name: String, signal: StopSignal = StopSignal(), body: @escaping @Sendable (StopSignal) -> Void) {
        self.signal = signal
        thread = DeviceThread(name: name) { body(signal) }
    }

    /// True when called on this thread.
    public var isCurrent: Bool { thread.isCurrent }

    /// Asks the loop to stop and waits for it (at most once; from the thread
    /// itself it does not wait).
    public func stop() {
        signal.requestStop()
        guard !thread.isCurrent else { return }
        if joined.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            thread.join()
        }
    }

    /// Waits for a loop that ends on its own (without asking it to stop).
    public func join() {
        guard !thread.isCurrent else { return }
        if joined.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            thread.join()
        }
    }
}
