/// Where each section header and key sits in the file's text.
///
/// TOMLKit (toml++) reports lines for syntax errors only, not for the keys of a
/// parsed document, so this reads the lines once more: `[name]` starts a
/// section and `key =` (bare or quoted) is a key of the current section.
/// Multi-line strings are skipped, so their content is never taken for a key.
struct SourceLines {
    private(set) var sectionLines: [String: Int] = [:]
    private(set) var keyLines: [String: [String: Int]] = [:]

    init(text: String) {
        var section = ""
        var openQuote: Substring?
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let lineNumber = index + 1
            if let quote = openQuote {
                if rawLine.contains(quote) { openQuote = nil }
                continue
            }
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("[") {
                let name = line.dropFirst(line.hasPrefix("[[") ? 2 : 1).prefix { $0 != "]" }
                section = Self.unquoted(name.trimmingSpaces)
                if sectionLines[section] == nil { sectionLines[section] = lineNumber }
                continue
            }
            guard let equals = line.firstIndex(of: "="), !line.hasPrefix("#") else { continue }
            let key = Self.unquoted(line[..<equals].trimmingSpaces)
            if keyLines[section, default: [:]][key] == nil { keyLines[section, default: [:]][key] = lineNumber }
            // A value that opens a multi-line string and does not close it on this line.
            let value = line[line.index(after: equals)...]
            for quote in ["\"\"\"", "'''"] where value.components(separatedBy: quote).count == 2 {
                openQuote = Substring(quote)
            }
        }
    }

    func line(ofSection section: String) -> Int? { sectionLines[section] }

    func line(ofKey key: String, in section: String) -> Int? { keyLines[section]?[key] }

    private static func unquoted(_ text: Substring) -> String {
        if text.count >= 2, let first = text.first, first == "\"" || first == "'", text.last == first {
            return String(text.dropFirst().dropLast())
        }
        return String(text)
    }
}

private extension Substring {
    /// Without the spaces and tabs around it (and a CRLF file's carriage return).
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" || last == "\r" { text.removeLast() }
        return text
    }
}
