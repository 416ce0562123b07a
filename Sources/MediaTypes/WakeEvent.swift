#if canImport(Glibc)
import Glibc
#endif
internal import CLinux

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
