import Foundation

/// One command's section of the configuration file, turned into the command-line
/// arguments it stands for.
///
/// The file's arguments go before the command line's, and a key whose option is
/// also given on the command line is left out: command-line flags override the
/// file, for switches (`--no-reconnect` over `reconnect = true`) and lists alike.
public struct ConfigurationArguments: Sendable {
    public let path: String
    /// The arguments the file contributes, each as `--name` or `--name=value`.
    public let arguments: [String]
    /// The entries that contributed, in file order.
    public let used: [ConfigurationEntry]
    /// The entries the command line overrode.
    public let overridden: [ConfigurationEntry]

    /// Checks every key of `entries` against `options` and translates them.
    /// `commandLine` is what the user typed after the command's name.
    public init(
        entries: [ConfigurationEntry], path: String, options: CommandOptions, commandLine: [String]
    ) throws(ConfigurationError) {
        let given = Self.optionNames(in: commandLine, options: options)
        var arguments: [String] = []
        var used: [ConfigurationEntry] = []
        var overridden: [ConfigurationEntry] = []
        for entry in entries {
            guard let option = options.option(named: entry.key) else {
                throw ConfigurationError(
                    path: path, line: entry.line, section: entry.section, key: entry.key,
                    problem: .unknownKey(known: options.options.map(\.name), hint: Self.hint(for: entry.key, options: options)))
            }
            let translated = try Self.arguments(for: entry, option: option, path: path)
            if given.contains(option.name) {
                overridden.append(entry)
            } else {
                arguments += translated
                used.append(entry)
            }
        }
        self.path = path
        self.arguments = arguments
        self.used = used
        self.overridden = overridden
    }

    /// A message of the command's argument parser (an invalid value, a failed
    /// validation), given back as a configuration error when the first option it
    /// names came from the file; nil when the message is about the command line.
    public func attribute(parserMessage message: String, options: CommandOptions) -> ConfigurationError? {
        for name in Self.mentionedOptions(in: message) {
            let base = name.hasPrefix("no-") && options.option(named: String(name.dropFirst(3))) != nil ? String(name.dropFirst(3)) : name
            if let entry = used.first(where: { $0.key == base }) {
                let reason = message.split(separator: "\n").first.map(String.init) ?? message
                return ConfigurationError(
                    path: path, line: entry.line, section: entry.section, key: entry.key, problem: .badValue(entry.value, reason: reason))
            }
            if options.option(named: base) != nil { return nil }  // a command-line option: the parser's own message says it
        }
        return nil
    }

    private static func arguments(for entry: ConfigurationEntry, option: CommandOptions.Option, path: String) throws(ConfigurationError) -> [String] {
        func failure(_ problem: ConfigurationError.Problem) -> ConfigurationError {
            ConfigurationError(path: path, line: entry.line, section: entry.section, key: entry.key, problem: problem)
        }
        switch (option.kind, entry.value) {
        case (.flag(let invertible), .boolean(let on)):
            if on { return ["--\(option.name)"] }
            return invertible ? ["--no-\(option.name)"] : []
        case (.flag, let value):
            throw failure(.notASwitch(value))
        case (.option(repeating: true), .list(let items)):
            var arguments: [String] = []
            for item in items {
                guard let text = item.argument else { throw failure(.unsupportedValue(item)) }
                arguments.append("--\(option.name)=\(text)")
            }
            return arguments
        case (.option, .list(let items)):
            throw failure(.notAList(.list(items)))
        case (.option, let value):
            guard let text = value.argument else { throw failure(.unsupportedValue(value)) }
            return ["--\(option.name)=\(text)"]
        }
    }

    /// The long names of the options on a command line (`--no-x` counts as x;
    /// short names are mapped to their long ones), up to a `--` terminator.
    static func optionNames(in commandLine: [String], options: CommandOptions) -> Set<String> {
        var names: Set<String> = []
        for token in commandLine {
            if token == "--" { break }
            if token.hasPrefix("--") {
                let name = String(token.dropFirst(2).prefix { $0 != "=" })
                let base = String(name.dropFirst(3))
                if name.hasPrefix("no-"), case .flag(invertible: true)? = options.option(named: base)?.kind {
                    names.insert(base)
                } else {
                    names.insert(name)
                }
            } else if token.hasPrefix("-"), token.count > 1 {
                for short in token.dropFirst() {
                    if let option = options.options.first(where: { $0.shortNames.contains(String(short)) }) { names.insert(option.name) }
                }
            }
        }
        return names
    }

    /// `--name` mentions in a parser message, in order.
    static func mentionedOptions(in message: String) -> [String] {
        var names: [String] = []
        var rest = Substring(message)
        while let range = rest.range(of: "--") {
            let name = rest[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if !name.isEmpty { names.append(String(name)) }
            rest = rest[range.upperBound...].dropFirst(name.count)
        }
        return names
    }

    /// A likely intended key: `no-x` for a switch x, or underscores for dashes.
    private static func hint(for key: String, options: CommandOptions) -> String? {
        if key.hasPrefix("no-"), options.option(named: String(key.dropFirst(3))) != nil {
            return "write \(key.dropFirst(3)) = false"
        }
        let dashed = key.replacingOccurrences(of: "_", with: "-")
        if dashed != key, options.option(named: dashed) != nil { return "did you mean '\(dashed)'?" }
        return nil
    }
}
