import Foundation
import MediaTypes

/// Async work awaited from a synchronous command (the commands are
/// synchronous; jwt-kit's signing is async). Waits at most `timeout`
/// seconds; the work runs on the concurrency pool, not on this thread.
func blockingAwait<T: Sendable>(timeout: Double, _ work: @escaping @Sendable () async -> T) throws(BlockingAwaitTimeout) -> T {
    let result = PThreadLocked<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    let task = Task.detached {
        let value = await work()
        result.withLock { $0 = value }
        done.signal()
    }
    guard done.wait(timeout: .now() + timeout) == .success, let value = result.withLock({ $0 }) else {
        task.cancel()
        throw BlockingAwaitTimeout(seconds: timeout)
    }
    return value
}

struct BlockingAwaitTimeout: Error, CustomStringConvertible {
    var seconds: Double
    var description: String { "gave up after \(Int(seconds)) s" }
}
