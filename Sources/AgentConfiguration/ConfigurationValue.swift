/// A value written in the configuration file, in the few shapes a command-line
/// option can take. TOML's other types (dates, times, nested tables) are kept as
/// `unsupported` so the error can name them and their line.
public enum ConfigurationValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case integer(Int)
    case float(Double)
    case boolean(Bool)
    case list([ConfigurationValue])
    /// A TOML type no option takes; the associated text names it ("date", "table").
    case unsupported(String)

    /// The value as it would be written in TOML.
    public var description: String {
        switch self {
        case .string(let text): return quoted(text)
        case .integer(let number): return String(number)
        case .float(let number): return String(number)
        case .boolean(let flag): return flag ? "true" : "false"
        case .list(let items): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .unsupported(let type): return "<\(type)>"
        }
    }

    /// The value as one command-line argument, when it is a scalar.
    var argument: String? {
        switch self {
        case .string(let text): return text
        case .integer(let number): return String(number)
        case .float(let number): return String(number)
        case .boolean(let flag): return flag ? "true" : "false"
        case .list, .unsupported: return nil
        }
    }

    private func quoted(_ text: String) -> String {
        var out = "\""
        for character in text.unicodeScalars {
            switch character {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            default: out.unicodeScalars.append(character)
            }
        }
        return out + "\""
    }
}
