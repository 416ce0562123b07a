import ArgumentParser

/// `camagent selftest --loopback /dev/videoN` (filled in below).
struct SelftestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "selftest",
        abstract: "Write counted frames into a v4l2loopback device, capture them back, and check them.")
}
