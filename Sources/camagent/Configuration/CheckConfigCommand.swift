import AgentConfiguration
import ArgumentParser

/// `camagent check-config`: validates the configuration file as `publish`,
/// `subscribe` and `router` would read it, and prints the settings each of them
/// gets: from the file (with its line), by default, or not set.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check the configuration file and print the effective settings of publish, subscribe and router.",
        discussion: """
        Every section and key is checked, and each section the file has is parsed as its command \
        would parse it, so a bad value, or options that contradict each other, fail here as they \
        would at start. Exit codes: 0 valid (or no file at \
        the default path: every option has its default), 65 the file is missing, not TOML, or has \
        an unknown section or key or a bad value; the message names the key and its line.
        """
    )

    @OptionGroup var configFile: ConfigFileOption

    @Flag(help: "Print the settings as one JSON object.")
    var json = false

    /// One option's effective setting.
    struct Setting: Encodable {
        var key: String
        /// As TOML would write it; nil when not set.
        var value: String?
        /// "file", "default" or "unset".
        var source: String
        var line: Int?
    }

    struct Report: Encodable {
        var path: String?
        var sections: [String: [Setting]]
        /// What the command line must add (a section that needs an option it does not set).
        var notes: [String]
    }

    func run() throws {
        let report: Report
        do {
            report = try check()
        } catch {
            printFailure(error.description)
            throw ExitCode(ExitCodes.configurationError)
        }
        if json {
            printLine(JSONOutput.line(report))
            return
        }
        printLine(report.path.map { "\($0): valid" }
            ?? "no configuration file at \(ConfigurationFile.defaultPath): every option has its default")
        for note in report.notes { printLine("note: \(note)") }
        for (section, _) in ConfiguredCommandLine.configurableCommands {
            printLine("")
            printLine("[\(section)]")
            for setting in report.sections[section] ?? [] {
                switch (setting.source, setting.value) {
                case ("file", let value?): printLine("\(setting.key) = \(value)  # \(report.path ?? ""):\(setting.line ?? 0)")
                case (_, let value?): printLine("\(setting.key) = \(value)  # default")
                default: printLine("# \(setting.key): not set")
                }
            }
        }
    }

    private func check() throws(ConfigurationError) -> Report {
        let file = try ConfiguredCommandLine.file(named: configFile.config)
        try file?.checkSections(known: ConfiguredCommandLine.sectionNames)
        var sections: [String: [Setting]] = [:]
        var notes: [String] = []
        for (section, command) in ConfiguredCommandLine.configurableCommands {
            let options = ConfiguredCommandLine.options(of: command)
            let translated = try ConfigurationArguments(
                entries: file?.sections[section] ?? [], path: file?.path ?? ConfigurationFile.defaultPath, options: options,
                commandLine: [])
            // A section with keys is parsed as its command line would be. A complaint
            // about the file's keys is an error; one about options the file does not
            // set (subscribe's --session or --whep) is left to the command line.
            do {
                if !translated.used.isEmpty { _ = try command.parseAsRoot(translated.arguments) }
            } catch {
                let message = command.message(for: error)
                if let fileError = translated.attribute(parserMessage: message, options: options) { throw fileError }
                notes.append("[\(section)] is not a whole command line by itself: \(message)")
            }
            sections[section] = options.options.map { option in
                if let entry = translated.used.first(where: { $0.key == option.name }) {
                    return Setting(key: option.name, value: entry.value.description, source: "file", line: entry.line)
                }
                let fallback = Self.defaultSetting(of: option)
                return Setting(key: option.name, value: fallback, source: fallback == nil ? "unset" : "default")
            }
        }
        return Report(path: file?.path, sections: sections, notes: notes)
    }

    /// An option's default as TOML: switches as true/false, numbers bare, text quoted.
    static func defaultSetting(of option: CommandOptions.Option) -> String? {
        switch option.kind {
        case .flag(invertible: true):
            return option.defaultValue.map { $0 == "--\(option.name)" ? "true" : "false" } ?? "false"
        case .flag(invertible: false):
            return "false"
        case .option:
            guard let text = option.defaultValue else { return nil }
            if Int(text) != nil || Double(text) != nil { return text }
            return ConfigurationValue.string(text).description
        }
    }
}
