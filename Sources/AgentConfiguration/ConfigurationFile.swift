import Foundation
import TOMLKit

/// A camagent configuration file: TOML with one section per command
/// (`[publish]`, `[subscribe]`, `[router]`) whose keys are that command's long
/// option names without the dashes:
///
///     [publish]
///     device = "/dev/v4l/by-id/usb-046d_0825-video-index0"
///     size = "1280x720"
///     reconnect = true
///
/// This type only reads the file and keeps each entry with its line; which keys
/// a section may hold is the command's business (`ConfigurationArguments`).
public struct ConfigurationFile: Sendable {
    /// Where the service and `camagent publish` look when `--config` is not given.
    public static let defaultPath = "/etc/camagent/camagent.toml"

    public let path: String
    /// Each section's entries, in the order of their lines.
    public let sections: [String: [ConfigurationEntry]]
    private let sectionLines: [String: Int]

    /// Reads and parses the file at `path`.
    public static func load(path: String) throws(ConfigurationError) -> ConfigurationFile {
        func unreadable(_ reason: String) -> ConfigurationError {
            ConfigurationError(path: path, line: nil, section: nil, key: nil, problem: .unreadable(reason: reason))
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw unreadable(FileManager.default.fileExists(atPath: path) ? "not readable (permission denied?)" : "no such file")
        }
        defer { try? handle.close() }
        // Read up to a bound: the file was read whole, whatever its size (a FIFO fed forever).
        let data: Data
        do { data = try handle.read(upToCount: maxBytes + 1) ?? Data() } catch {
            throw unreadable("not readable (\(error.localizedDescription))")
        }
        guard data.count <= maxBytes else { throw unreadable("larger than \(maxBytes >> 10) KiB") }
        guard let text = String(data: data, encoding: .utf8) else { throw unreadable("not readable as UTF-8 text") }
        return try ConfigurationFile(text: text, path: path)
    }

    /// The largest configuration file read.
    public static let maxBytes = 1 << 20

    /// A NUL, raw or escaped, is refused before the TOML reader sees it: the reader
    /// (TOMLKit over toml++) cuts text at a raw NUL, dropping the rest of the file
    /// unsaid, and trapped on a key holding an escaped one (`"a\u0000" = 1`).
    /// An escaped backslash before "u0000" is refused too; no setting needs one.
    private static func nulLine(in text: String) -> Int? {
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
        where line.contains("\u{0}") || line.contains("\\u0000") || line.contains("\\U00000000") {
            return number + 1
        }
        return nil
    }

    /// Parses `text`; `path` is only used in errors.
    public init(text: String, path: String) throws(ConfigurationError) {
        if let line = Self.nulLine(in: text) {
            throw ConfigurationError(path: path, line: line, section: nil, key: nil,
                                     problem: .syntax(reason: "a NUL character (raw, \\u0000 or \\U00000000) is not allowed"))
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError(
                path: path, line: error.source.begin.line, section: nil, key: nil, problem: .syntax(reason: error.description))
        } catch {
            throw ConfigurationError(path: path, line: nil, section: nil, key: nil, problem: .syntax(reason: "\(error)"))
        }
        let lines = SourceLines(text: text)
        var sections: [String: [ConfigurationEntry]] = [:]
        // Keys before the first section header are errors; report the earliest.
        let stray = table.compactMap { key, value in value.type == .table ? nil : key }
            .sorted { (lines.line(ofKey: $0, in: "") ?? .max) < (lines.line(ofKey: $1, in: "") ?? .max) }
        if let key = stray.first {
            throw ConfigurationError(path: path, line: lines.line(ofKey: key, in: ""), section: nil, key: key, problem: .keyOutsideSection)
        }
        for (name, value) in table {
            guard let section = value.table else { continue }
            sections[name] = section.map { key, value in
                ConfigurationEntry(section: name, key: key, value: Self.value(of: value), line: lines.line(ofKey: key, in: name))
            }.sorted { ($0.line ?? .max, $0.key) < ($1.line ?? .max, $1.key) }
        }
        self.path = path
        self.sections = sections
        self.sectionLines = lines.sectionLines
    }

    /// The line of a section's `[name]` header.
    public func line(ofSection name: String) -> Int? { sectionLines[name] }

    /// Fails on the first section (by line) that is not one of `known`.
    public func checkSections(known: [String]) throws(ConfigurationError) {
        let unknown = sections.keys.filter { !known.contains($0) }.sorted { (line(ofSection: $0) ?? .max) < (line(ofSection: $1) ?? .max) }
        if let name = unknown.first {
            throw ConfigurationError(path: path, line: line(ofSection: name), section: name, key: nil, problem: .unknownSection(known: known))
        }
    }

    private static func value(of node: any TOMLValueConvertible) -> ConfigurationValue {
        switch node.type {
        case .string: return .string(node.string ?? "")
        case .int: return .integer(node.int ?? 0)
        case .double: return .float(node.double ?? 0)
        case .bool: return .boolean(node.bool ?? false)
        case .array: return .list((node.array ?? TOMLArray()).map { value(of: $0) })
        case .table: return .unsupported("table")
        case .date: return .unsupported("date")
        case .time: return .unsupported("time")
        case .dateTime: return .unsupported("date-time")
        }
    }
}
