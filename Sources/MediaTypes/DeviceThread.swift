#if canImport(Glibc)
import Glibc
#endif

/// A dedicated, named OS thread that can be joined: device I/O blocks in
/// poll(), which must not happen on Swift's cooperative thread pool. Used by
/// every capture and render side (video and audio), one thread per device.
public final class DeviceThread: Sendable {
    private let handle: pthread_t

    private final class Start: @unchecked Sendable {  // handed over once, at creation
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new thread named `name` (at most 15 characters are kept).
    public init(name: String, body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(name: name, body: body))
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
            _ = CLinux_set_thread_name(String(start.name.prefix(15)))
            start.body()
            return nil
        }, start.toOpaque())
        precondition(result == 0, "pthread_create failed: \(SystemErrorText.describe(result))")
        handle = thread
    }

    /// Waits for the thread to finish. Call exactly once.
    public func join() {
        pthread_join(handle, nil)
    }
}

/// The processors this process may run on: its CPU affinity (a kiosk may pin
/// the agent to some cores, a container may be given fewer), else every
/// online one. Work that spreads over threads (an encoder's) sizes itself by it.
public enum Processors {
    public static var usable: Int {
        let pinned = Int(CLinux_affinity_cpu_count())
        return pinned > 0 ? pinned : max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}

/// An eventfd that wakes a thread blocked in poll() (to stop, or to look at
/// new settings) without signals or timeouts.
public final class WakeEvent: Sendable {
    public let fd: Int32

    public init() {
        fd = CLinux_eventfd(0, CLinux_EFD_NONBLOCK | CLinux_EFD_CLOEXEC)
        precondition(fd >= 0, "eventfd failed: \(SystemErrorText.describe(errno))")
    }

    deinit { close(fd) }

    public func signal() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { Glibc.write(fd, $0.baseAddress, 8) }
    }

    /// Clears pending wake-ups (the descriptor is non-blocking).
    public func drain() {
        var value: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &value) { Glibc.read(fd, $0.baseAddress, 8) }
    }

    /// Waits until signalled or `milliseconds` pass; true if signalled.
    public func wait(milliseconds: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let n = Glibc.poll(&p, 1, milliseconds)
        if n > 0 { drain(); return true }
        return false
    }
}

internal import CLinux

extension DeviceThread {
    /// True when called on this thread (stopping from inside a callback must not join).
    public var isCurrent: Bool { pthread_equal(handle, pthread_self()) != 0 }
}
