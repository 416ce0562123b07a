/// What is wrong with a configuration file. Every case names the file, and the
/// key and line where there is one, so `camagent check-config` and a failing
/// start say exactly what to edit.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Problem: Sendable, Equatable {
        case unreadable(reason: String)
        case syntax(reason: String)
        case keyOutsideSection
        case unknownSection(known: [String])
        case unknownKey(known: [String], hint: String?)
        case notASwitch(ConfigurationValue)
        case notAList(ConfigurationValue)
        case unsupportedValue(ConfigurationValue)
        /// The command rejected the value (its own message, e.g. an invalid size).
        case badValue(ConfigurationValue, reason: String)
        /// The command rejected the section as a whole (options that do not go together).
        case rejected(reason: String)
    }

    public let path: String
    public let line: Int?
    /// The section ("publish") and key ("size") the problem is in, when it is in one.
    public let section: String?
    public let key: String?
    public let problem: Problem

    public init(path: String, line: Int?, section: String?, key: String?, problem: Problem) {
        self.path = path
        self.line = line
        self.section = section
        self.key = key
        self.problem = problem
    }

    public var description: String {
        let place = line.map { "\(path):\($0)" } ?? path
        let name = key.map { key in section.map { "[\($0)] \(key)" } ?? key } ?? ""
        switch problem {
        case .unreadable(let reason):
            return "\(place): cannot read the configuration file: \(reason)"
        case .syntax(let reason):
            return "\(place): not valid TOML: \(reason)"
        case .keyOutsideSection:
            return "\(place): '\(key ?? "")' is outside a section; put it under [publish], [subscribe] or [router]"
        case .unknownSection(let known):
            return "\(place): unknown section [\(section ?? "")]; the sections are " + known.map { "[\($0)]" }.joined(separator: ", ")
        case .unknownKey(let known, let hint):
            let suggestion = hint.map { "; \($0)" } ?? ""
            return "\(place): unknown key \(name)\(suggestion) (keys of [\(section ?? "")]: \(known.joined(separator: ", ")))"
        case .notASwitch(let value):
            return "\(place): \(name) is a switch: write true or false, not \(value)"
        case .notAList(let value):
            return "\(place): \(name) takes one value, not a list (\(value))"
        case .unsupportedValue(let value):
            return "\(place): \(name) takes a string or a number, not a \(value)"
        case .badValue(let value, let reason):
            return "\(place): \(name) = \(value): \(reason)"
        case .rejected(let reason):
            return "\(place): [\(section ?? "")]: \(reason)"
        }
    }
}
