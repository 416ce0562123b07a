/// What one wait on the PCM and the wake-up descriptor saw.
enum PCMWaitResult: Hashable, Sendable {
    case ready
    case timedOut
    case woken
    /// The PCM's poll reported an error state (xrun, suspend, unplug): the next read or write says which.
    case error
}
