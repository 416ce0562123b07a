import Foundation
import Glibc
import Logging
import MediaTypes
import SystemdSupport
import Testing

@Suite("Log lines for a terminal, a pipe and journald")
struct ConsoleLogHandlerTests {
    /// Lines a handler wrote, collected.
    final class Lines: Sendable {
        let lines = PThreadLocked<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    func logger(style: LogStyle) -> (Logger, Lines) {
        let lines = Lines()
        var logger = Logger(label: "camagent") { ConsoleLogHandler(label: $0, style: style, output: lines.append) }
        logger.logLevel = .debug
        return (logger, lines)
    }

    @Test func notATerminalMeansNoEscapeSequences() {
        let (log, lines) = logger(style: .plain)
        log.error("camera lost", metadata: ["device": "/dev/video0"])
        log.warning("slow")
        log.debug("details")
        #expect(lines.all.count == 3)
        for line in lines.all {
            #expect(!line.contains("\u{1B}"), "escape sequence in \(line.debugDescription)")
            #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { !$0.isNewline })
        }
        #expect(lines.all[0].contains("error camagent: camera lost [device=/dev/video0]"))
    }

    @Test func aTerminalGetsTheLevelInColour() {
        let (log, lines) = logger(style: .terminal)
        log.error("camera lost")
        log.info("hello")
        #expect(lines.all[0].contains("\u{1B}[31merror\u{1B}[0m camagent: camera lost"))
        #expect(!lines.all[1].contains("\u{1B}"))
    }

    @Test func journalLinesCarryTheSyslogPriorityAndNoTimestamp() {
        let (log, lines) = logger(style: .journal)
        log.critical("c")
        log.error("e")
        log.warning("w")
        log.notice("n")
        log.info("i")
        log.debug("d")
        #expect(lines.all == ["<2>camagent: c\n", "<3>camagent: e\n", "<4>camagent: w\n",
                              "<5>camagent: n\n", "<6>camagent: i\n", "<7>camagent: d\n"])
    }

    @Test func aMultiLineMessageStaysOneJournalEntry() {
        let line = ConsoleLogHandler.format(level: .warning, label: "camagent", message: "one\ntwo", metadata: [:],
                                            style: .journal, timestamp: "")
        #expect(line == "<4>camagent: one two\n")
    }

    @Test func theJournalIsChosenOnlyWhenJournalStreamNamesStderrItself() throws {
        // A pipe stands in for the stream systemd connects: stat it for its device and inode.
        var fds: [Int32] = [-1, -1]
        // Required: on failure the defer would otherwise close fd 0 twice.
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        var info = stat()
        #expect(fstat(fds[1], &info) == 0)
        let matching = "\(info.st_dev):\(info.st_ino)"
        #expect(LogStyle.detect(environment: ["JOURNAL_STREAM": matching], fd: fds[1]) == .journal)
        // Inherited by a process whose stderr goes elsewhere: not the journal.
        #expect(LogStyle.detect(environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino + 1)"], fd: fds[1]) == .plain)
        #expect(LogStyle.detect(environment: ["JOURNAL_STREAM": "garbage"], fd: fds[1]) == .plain)
        // A pipe is no terminal: plain lines.
        #expect(LogStyle.detect(environment: [:], fd: fds[1]) == .plain)
        #expect(LogStyle.journal.errorLinePrefix == "<3>" && LogStyle.plain.errorLinePrefix.isEmpty)
    }
}
