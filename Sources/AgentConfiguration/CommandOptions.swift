import Foundation

/// The long options one command takes, which are the keys its configuration
/// section may hold.
///
/// They are read from the command's own definition (ArgumentParser's JSON
/// description of it, see `init(dumpHelpJSON:)`), so a new option is a new key
/// with nothing else to keep in step.
public struct CommandOptions: Sendable {
    public struct Option: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// `--name`; `invertible` when `--no-name` exists too (a switch whose default may be on).
            case flag(invertible: Bool)
            /// `--name VALUE`; `repeating` when it may be given more than once (a list in the file).
            case option(repeating: Bool)
        }

        public let name: String
        public let shortNames: [String]
        public let kind: Kind
        /// The default as the command's help shows it, if it has one.
        public let defaultValue: String?
        public let help: String

        public init(name: String, shortNames: [String] = [], kind: Kind, defaultValue: String? = nil, help: String = "") {
            self.name = name
            self.shortNames = shortNames
            self.kind = kind
            self.defaultValue = defaultValue
            self.help = help
        }
    }

    /// The command's name, which is its section's name ("publish").
    public let command: String
    public let options: [Option]

    /// Long names that are never configuration keys: help, and the option that names the file.
    public static let excludedNames: Set<String> = ["help", "config"]

    public init(command: String, options: [Option]) {
        self.command = command
        self.options = options
    }

    public func option(named name: String) -> Option? { options.first { $0.name == name } }
}

extension CommandOptions {
    /// Reads ArgumentParser's `_dumpHelp()` JSON of one command (the same JSON
    /// `camagent publish --experimental-dump-help` prints). `--no-x` is folded
    /// into `x` as an invertible switch; positional arguments are not keys.
    public init(dumpHelpJSON: String) throws {
        let info = try JSONDecoder().decode(DumpedTool.self, from: Data(dumpHelpJSON.utf8))
        let arguments = info.command.arguments ?? []
        let longNames = Set(arguments.flatMap { $0.longNames })
        var options: [Option] = []
        for argument in arguments where argument.kind != "positional" {
            guard let name = argument.longNames.first, !Self.excludedNames.contains(name) else { continue }
            // `--no-x` beside `--x` is the off position of x's switch.
            if name.hasPrefix("no-"), longNames.contains(String(name.dropFirst(3))) { continue }
            let kind: Option.Kind = argument.kind == "flag"
                ? .flag(invertible: longNames.contains("no-" + name))
                : .option(repeating: argument.isRepeating ?? false)
            options.append(Option(
                name: name, shortNames: argument.shortNames, kind: kind,
                defaultValue: argument.defaultValue, help: argument.abstract ?? ""))
        }
        self.init(command: info.command.commandName, options: options)
    }
}

/// The part of ArgumentParser's ToolInfo JSON (serializationVersion 0) read here.
private struct DumpedTool: Decodable {
    struct Command: Decodable {
        var commandName: String
        var arguments: [Argument]?
    }
    struct Argument: Decodable {
        struct Name: Decodable {
            var kind: String
            var name: String
        }
        var kind: String
        var names: [Name]?
        var isRepeating: Bool?
        var defaultValue: String?
        var abstract: String?

        var longNames: [String] { (names ?? []).filter { $0.kind == "long" }.map(\.name) }
        var shortNames: [String] { (names ?? []).filter { $0.kind == "short" }.map(\.name) }
    }
    var command: Command
}
