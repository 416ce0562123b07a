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
///
/// Public, not `package`, for one reason: Swift 6.3 inlines and specialises
/// an `@inlinable` function in other modules only when it is public (a
/// `package` one is always called, shown with a two-module test case, with
/// and without cross-module optimisation). Called generically, every packet
/// the router forwards went through value-witness calls and type-metadata
/// lookups, several locks a packet.
public final class PThreadLocked<Value>: @unchecked Sendable {   // `value` only under `mutex`
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
