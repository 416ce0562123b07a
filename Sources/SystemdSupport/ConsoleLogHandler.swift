#if canImport(Glibc)
import Glibc
#endif
import Logging

/// How log lines on stderr are written, chosen from where stderr goes.
public enum LogStyle: Hashable, Sendable {
    /// A terminal: timestamp, the level in colour.
    case terminal
    /// A file or a pipe: the same line, no escape sequences.
    case plain
    /// systemd's journal: a `<N>` syslog priority prefix per line and no
    /// timestamp (journald stamps each line itself), no escape sequences.
    case journal

    /// The journal when $JOURNAL_STREAM names stderr itself (systemd sets it
    /// to "DEVICE:INODE" of the stream it connected; a child whose stderr was
    /// redirected still inherits the variable, hence the comparison), else a
    /// terminal or plain text.
    public static func detect(environment: [String: String], fd: Int32 = 2) -> LogStyle {
        var info = stat()
        let statOK = fstat(fd, &info) == 0
        if let stream = environment["JOURNAL_STREAM"], statOK, let (device, inode) = parseJournalStream(stream),
           UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode {
            return .journal
        }
        return isatty(fd) != 0 ? .terminal : .plain
    }

    /// "DEVICE:INODE", both decimal.
    static func parseJournalStream(_ text: String) -> (UInt64, UInt64)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        return (device, inode)
    }

    /// The syslog priority journald reads from a line's `<N>` prefix.
    public static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7   // LOG_DEBUG
        case .info: 6            // LOG_INFO
        case .notice: 5          // LOG_NOTICE
        case .warning: 4         // LOG_WARNING
        case .error: 3           // LOG_ERR
        case .critical: 2        // LOG_CRIT
        }
    }

    /// What to put before a line written to stderr outside the logger (the
    /// CLI's error lines), so the journal files it as an error.
    public var errorLinePrefix: String { self == .journal ? "<3>" : "" }
}

/// A swift-log handler for stderr that suits both a person at a terminal and
/// journald: colour only on a terminal, levels as syslog priorities in the journal.
public struct ConsoleLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let style: LogStyle
    private let output: @Sendable (String) -> Void

    /// `output` receives whole lines, newline included (tests collect them).
    public init(label: String, style: LogStyle, output: @escaping @Sendable (String) -> Void = ConsoleLogHandler.writeToStandardError) {
        self.label = label
        self.style = style
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?,
                    source: String, file: String, function: String, line: UInt) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let explicit { all.merge(explicit) { _, new in new } }
        output(Self.format(level: level, label: label, message: "\(message)", metadata: all, style: style,
                           timestamp: style == .journal ? "" : Self.timestamp()))
    }

    /// One line, newline included. Pure, for the tests.
    public static func format(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata,
                              style: LogStyle, timestamp: String) -> String {
        let fields = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = (fields.isEmpty ? message : "\(message) [\(fields)]").map { $0.isNewline ? " " : $0 }
        switch style {
        case .journal:
            return "<\(LogStyle.syslogPriority(level))>\(label): \(String(text))\n"
        case .plain:
            return "\(timestamp) \(level) \(label): \(String(text))\n"
        case .terminal:
            let colour: String? = switch level {
            case .error, .critical: "31"   // red
            case .warning: "33"            // yellow
            case .trace, .debug: "2"       // dim
            case .info, .notice: nil
            }
            let shown = colour.map { "\u{1B}[\($0)m\(level)\u{1B}[0m" } ?? "\(level)"
            return "\(timestamp) \(shown) \(label): \(String(text))\n"
        }
    }

    /// Local time with the offset, to the second ("2026-11-24T02:10:00+0000").
    static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Queued whole for the output thread (`OutputQueue`): lines from several threads do not
    /// interleave, and a stderr nobody reads never holds up the thread that logs.
    @Sendable public static func writeToStandardError(_ line: String) {
        OutputQueue.standard.enqueue(2, line)
    }
}
