#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex, with `Mutex`'s `withLock`.
///
/// `Synchronization.Mutex` is what the project uses; this is for state that
/// threads really contend for. Under contention Mutex waits on a futex inside
/// the Swift runtime, which ThreadSanitizer cannot see, so it reports the
/// data the lock guards as racing (shown with a 20-line program that only
/// touches a Mutex's value inside `withLock`). ThreadSanitizer intercepts
/// pthread's lock and unlock, so a pthread mutex keeps its reports true.
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
