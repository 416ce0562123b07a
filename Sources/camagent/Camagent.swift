import Foundation
import ArgumentParser
import Logging
import SystemdSupport

/// The camagent command line: capture, inspect and (later) publish.
@main
struct Camagent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "camagent",
        abstract: "Camera capture and publishing agent for Linux.",
        discussion: "Exit codes are listed in README.md (\"Exit codes\").",
        subcommands: [
            DevicesCommand.self, CaptureCommand.self, PlayCommand.self, SelftestCommand.self, PublishCommand.self, BenchCommand.self,
            RouterCommand.self, TokenCommand.self, SessionCommand.self, SubscribeCommand.self, StatusCommand.self,
            CheckConfigCommand.self,
        ]
    )

    /// ArgumentParser's own main, with the configuration file's options put in
    /// front of the command line's first (`ConfiguredCommandLine`), and its
    /// errors naming the file's key and line.
    static func main() {
        // First, before any thread exists: SIGINT and SIGTERM are never lost, however early they come.
        TerminationSignals.takeOver()
        // Every way out (a return, exit(), ArgumentParser's exit) gives queued output a few seconds to be written.
        atexit { OutputQueue.standard.flush(seconds: 5) }
        // A reader that goes away is an EPIPE the output thread handles (OutputQueue), not a
        // SIGPIPE that kills camagent mid-session without a WHIP DELETE or a goodbye to the router.
        signal(SIGPIPE, SIG_IGN)
        let configured: ConfiguredCommandLine
        do {
            configured = try ConfiguredCommandLine(commandLine: Array(CommandLine.arguments.dropFirst()))
        } catch {
            printFailure(error.description)
            Foundation.exit(ExitCodes.configurationError)
        }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(configured.arguments)
        } catch {
            if let fileError = configured.attribute(parserError: error) {
                printFailure(fileError.description)
                Foundation.exit(ExitCodes.configurationError)
            }
            exit(withError: error)
        }
        do {
            try command.run()
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every command shares.
struct GlobalOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Log debug details to stderr.")
    var verbose = false

    /// A logger writing to stderr (colour on a terminal, syslog priorities in
    /// the journal: `stderrLogStyle`); libraries get it passed in.
    func makeLogger(label: String = "camagent") -> Logger {
        var logger = Logger(label: label) { ConsoleLogHandler(label: $0, style: stderrLogStyle) }
        logger.logLevel = verbose ? .debug : .notice
        return logger
    }
}
