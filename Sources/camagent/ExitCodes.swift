import ArgumentParser
import MediaTypes

/// camagent's exit codes: one per kind of failure a user or a script must
/// tell apart. Documented in README.md; tests assert them.
enum ExitCodes {
    static let ok: Int32 = 0
    /// Bad command line (ArgumentParser's own validation code).
    static let usage: Int32 = 64
    /// The device path does not exist, or no camera has the name given.
    static let noSuchDevice: Int32 = 66
    /// The node exists but cannot capture video (output node, not V4L2, multi-planar only).
    static let notACaptureDevice: Int32 = 67
    /// The device is busy (another program is streaming from it).
    static let busy: Int32 = 68
    /// The format, size or rate asked for is not offered.
    static let unsupportedFormat: Int32 = 69
    /// Permission denied on the device.
    static let permissionDenied: Int32 = 77
    /// The device went away while capturing.
    static let deviceLost: Int32 = 74
    /// No frame arrived within the frame timeout.
    static let timeout: Int32 = 75
    /// Any other driver or I/O failure.
    static let driverError: Int32 = 70
    /// The USB bus has no bandwidth left for the format (ENOSPC at STREAMON).
    static let bandwidthExceeded: Int32 = 71
    /// A self-test ran but found lost, duplicated or reordered frames.
    static let selftestFailed: Int32 = 1
    /// Writing an output file failed.
    static let outputError: Int32 = 73
    /// The configuration file (`--config`, /etc/camagent/camagent.toml) is missing, not TOML, or has
    /// an unknown section or key or a bad value (sysexits' EX_DATAERR: the input data was incorrect).
    static let configurationError: Int32 = 65

    static func code(for error: CaptureError) -> Int32 {
        switch error {
        case .noSuchDevice, .noMatchingDevice: noSuchDevice
        case .notACaptureDevice, .multiplanarNotSupported: notACaptureDevice
        case .busy: busy
        case .bandwidthExceeded: bandwidthExceeded
        case .formatNotSupported, .sizeNotSupported, .rateNotSupported: unsupportedFormat
        case .permissionDenied: permissionDenied
        case .deviceLost: deviceLost
        case .timeout: timeout
        case .driverError: driverError
        }
    }
}

/// Prints "camagent: <error>" to stderr and exits with the error's code.
func fail(_ error: CaptureError) -> ExitCode {
    printFailure("\(error)")
    return ExitCode(ExitCodes.code(for: error))
}

