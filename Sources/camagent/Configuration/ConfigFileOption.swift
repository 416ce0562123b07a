import AgentConfiguration
import ArgumentParser

/// `--config`, on the commands whose options the configuration file holds
/// (publish, subscribe, router). `Camagent.main` reads it before parsing, since
/// the file's options become arguments; the parsed value is only for `--help`.
struct ConfigFileOption: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Configuration file: TOML with [publish], [subscribe] and [router] sections whose keys are the long option names (size = \"1280x720\", reconnect = true). Options on the command line override it. Default: \(ConfigurationFile.defaultPath) when it exists; `camagent check-config` checks it.",
        valueName: "file"))
    var config: String?
}
