#if canImport(Glibc)
import Glibc
#endif

/// An errno value returned by a system call, typed so that callers switch on
/// named cases instead of comparing integers.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Int32
    public init(_ code: Int32) { self.code = code }

    public static let interrupted = Errno(EINTR)
    public static let wouldBlock = Errno(EAGAIN)
    public static let noDevice = Errno(ENODEV)
    public static let noSuchFile = Errno(ENOENT)
    public static let busy = Errno(EBUSY)
    public static let invalidArgument = Errno(EINVAL)
    public static let accessDenied = Errno(EACCES)
    public static let notPermitted = Errno(EPERM)
    public static let notATypewriter = Errno(ENOTTY)
    public static let ioError = Errno(EIO)
    public static let noDeviceOrAddress = Errno(ENXIO)
    public static let badFile = Errno(EBADF)
    public static let notSupported = Errno(EOPNOTSUPP)
    /// At STREAMON, UVC's way of saying the USB bus has no bandwidth left for the format.
    public static let noSpace = Errno(ENOSPC)

    /// The current thread's errno.
    static var current: Errno { Errno(errno) }

    public var description: String { SystemErrorText.describe(code) }

    /// True for errors that mean the device itself is gone (unplug, driver unloaded).
    var meansDeviceGone: Bool { self == .noDevice || self == .noDeviceOrAddress || self == .ioError }
}

import MediaTypes

/// Runs a system call, retrying while it is interrupted by a signal (EINTR),
/// as every caller would otherwise have to. EAGAIN and the rest are returned
/// to the caller, who knows what they mean in context.
@inline(__always)
func retryingOnInterrupt<T>(_ call: () -> T, failed: (T) -> Bool) -> Result<T, Errno> {
    while true {
        let result = call()
        if !failed(result) { return .success(result) }
        let error = Errno.current
        if error != .interrupted { return .failure(error) }
    }
}
