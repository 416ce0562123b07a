#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex, with `Mutex`'s `withLock`: the project's lock.
///
/// Why not `Synchronization.Mutex`: under contention it waits on a futex
/// inside the Swift runtime, which ThreadSanitizer cannot see, so it reports
/// the data the lock guards as racing (shown with a 20-line program that only
/// touches a Mutex's value inside `withLock`, and seen in CI on three locks).
/// ThreadSanitizer intercepts pthread's lock and unlock, so with this lock its
/// reports stay true and the sanitizer stage can fail on them. `Atomic` is
/// still used for single values.
package final class PThreadLocked<Value>: @unchecked Sendable {   // `value` only under `mutex`
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
