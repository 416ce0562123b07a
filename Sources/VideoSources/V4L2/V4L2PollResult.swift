/// What one wait on the device and the wake-up descriptor saw.
struct V4L2PollResult: Hashable, Sendable {
    /// A buffer can be dequeued.
    var deviceReadable: Bool
    /// POLLERR or POLLHUP on the device: it is gone or stopped streaming.
    var deviceError: Bool
    /// Someone asked the capture thread to look at its state (stop, reconfigure).
    var woken: Bool

    static let timedOut = V4L2PollResult(deviceReadable: false, deviceError: false, woken: false)
}
