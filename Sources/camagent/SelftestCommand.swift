import ArgumentParser
import MediaTypes
import VideoSources

/// `camagent selftest --loopback /dev/videoN`: a round trip through v4l2loopback.
struct SelftestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "selftest",
        abstract: "Write counted frames into a v4l2loopback device, capture them back, and check them.",
        discussion: "Exits 0 when every frame came back in order with a readable counter and few enough were lost, 1 otherwise.")

    @Option(help: "The v4l2loopback device node (its writer side must be free).")
    var loopback: String

    @Option(help: "Frame size WxH.", transform: { text in
        guard let size = FrameSize(parsing: text) else { throw ValidationError("--size takes WxH") }
        return size
    })
    var size = FrameSize(width: 640, height: 480)

    @Option(help: "Frames per second to write.")
    var fps: Double = 30

    @Option(help: "Frames to write.")
    var frames = 150

    @Option(help: "Fail when more than this percentage of frames is missing.")
    var maxMissingPercent: Double = 10

    @Flag(help: "Print the report as one JSON object on the last line.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard fps > 0, fps <= 240 else { throw ValidationError("--fps must be between 0 and 240") }
        guard frames >= 2 else { throw ValidationError("--frames must be at least 2") }
    }

    func run() throws {
        let test = LoopbackSelftest(device: loopback, size: size, framesPerSecond: fps, frames: frames,
                                    maxMissingPercent: maxMissingPercent, logger: global.makeLogger())
        printError("camagent: selftest on \(loopback): writing \(frames) frames at \(size) \(fps.formatted(decimals: 1)) fps and capturing them back…")
        let report: LoopbackSelftestReport
        do throws(CaptureError) {
            report = try test.run()
        } catch {
            throw fail(error)
        }
        print("""
        written:   \(report.framesWritten), captured \(report.framesCaptured) (first counter \(report.firstCounter.map(String.init) ?? "-"))
        missing:   \(report.missing), duplicates \(report.duplicates), out of order \(report.outOfOrder), unreadable \(report.undecodable)
        latency:   writer → consumer p50 \(report.latencyP50Ms.formatted(decimals: 2)) ms, p99 \(report.latencyP99Ms.formatted(decimals: 2)) ms
        result:    \(report.passed ? "PASS" : "FAIL: " + report.problems.joined(separator: "; "))
        """)
        if json { print(JSONOutput.line(report)) }
        if !report.passed { throw ExitCode(ExitCodes.selftestFailed) }
    }
}
