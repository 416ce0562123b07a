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
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "not readable as UTF-8 text (\(error.localizedDescription))" : "no such file"
            throw ConfigurationError(path: path, line: nil, section: nil, key: nil, problem: .unreadable(reason: reason))
        }
        return try ConfigurationFile(text: text, path: path)
    }

    /// Parses `text`; `path` is only used in errors.
    public init(text: String, path: String) throws(ConfigurationError) {
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
