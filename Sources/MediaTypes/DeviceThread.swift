#if canImport(Glibc)
import Glibc
#endif
internal import CLinux

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

extension DeviceThread {
    /// True when called on this thread (stopping from inside a callback must not join).
    public var isCurrent: Bool { pthread_equal(handle, pthread_self()) != 0 }
}
