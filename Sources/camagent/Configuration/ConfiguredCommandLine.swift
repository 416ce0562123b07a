import AgentConfiguration
import ArgumentParser
import Foundation

/// The command line with the configuration file's options in front of the
/// user's, for the commands that read the file.
///
/// `camagent publish --fps 15` with a file holding `[publish] size = "1280x720"`
/// and `fps = 30` runs `camagent publish --size=1280x720 --fps 15`: a key whose
/// option is on the command line is left out, so the command line wins.
struct ConfiguredCommandLine {
    /// The commands a configuration file has a section for, by section name.
    static let configurableCommands: [(section: String, command: any ParsableCommand.Type)] = [
        ("publish", PublishCommand.self), ("subscribe", SubscribeCommand.self), ("router", RouterCommand.self),
    ]
    static var sectionNames: [String] { configurableCommands.map(\.section) }

    /// What to hand to the argument parser.
    let arguments: [String]
    /// The file's part, when a file was read: for naming its key in an error.
    private let fromFile: (arguments: ConfigurationArguments, options: CommandOptions)?

    /// `commandLine` is what follows `camagent`.
    init(commandLine: [String]) throws(ConfigurationError) {
        guard let name = commandLine.first,
            let command = Self.configurableCommands.first(where: { $0.section == name })?.command
        else {
            self.init(arguments: commandLine, fromFile: nil)
            return
        }
        let rest = Array(commandLine.dropFirst())
        // Help is shown whatever the file holds.
        let wantsHelp = rest.prefix { $0 != "--" }.contains { ["-h", "--help", "--experimental-dump-help"].contains($0) }
        guard !wantsHelp, let file = try Self.file(named: Self.configPath(in: rest)) else {
            self.init(arguments: commandLine, fromFile: nil)
            return
        }
        try file.checkSections(known: Self.sectionNames)
        let options = Self.options(of: command)
        let translated = try ConfigurationArguments(
            entries: file.sections[name] ?? [], path: file.path, options: options, commandLine: rest)
        self.init(arguments: [name] + translated.arguments + rest, fromFile: (translated, options))
    }

    private init(arguments: [String], fromFile: (arguments: ConfigurationArguments, options: CommandOptions)?) {
        self.arguments = arguments
        self.fromFile = fromFile
    }

    /// A parser error that is about one of the file's keys, as a configuration
    /// error naming that key and its line; nil for any other error.
    func attribute(parserError error: any Error) -> ConfigurationError? {
        guard let fromFile, Camagent.exitCode(for: error) == .validationFailure else { return nil }
        return fromFile.arguments.attribute(parserMessage: Camagent.message(for: error), options: fromFile.options)
    }

    /// The command's options, as its own definition describes them.
    static func options(of command: any ParsableCommand.Type) -> CommandOptions {
        do {
            return try CommandOptions(dumpHelpJSON: command._dumpHelp())
        } catch {
            // The description is ArgumentParser's own output: failing to read it is a bug here.
            fatalError("cannot read the options of \(command): \(error)")
        }
    }

    /// The value of `--config` (either spelling), before any `--`.
    static func configPath(in arguments: [String]) -> String? {
        var iterator = arguments.prefix { $0 != "--" }.makeIterator()
        var path: String?
        while let token = iterator.next() {
            if token == "--config" {
                path = iterator.next()
            } else if token.hasPrefix("--config=") {
                path = String(token.dropFirst("--config=".count))
            }
        }
        return path
    }

    /// The file at an explicit path (which must exist), or the default one when it exists.
    static func file(named explicit: String?) throws(ConfigurationError) -> ConfigurationFile? {
        if let explicit { return try ConfigurationFile.load(path: explicit) }
        guard FileManager.default.fileExists(atPath: ConfigurationFile.defaultPath) else { return nil }
        return try ConfigurationFile.load(path: ConfigurationFile.defaultPath)
    }
}
