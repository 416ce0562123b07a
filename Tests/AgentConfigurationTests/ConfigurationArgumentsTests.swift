import Testing

@testable import AgentConfiguration

/// A command's options as ArgumentParser describes them (the shape of
/// `camagent publish --experimental-dump-help`, trimmed to a few options).
let publishDump = """
    {"serializationVersion":0,"command":{"commandName":"publish","superCommands":["camagent"],"shouldDisplay":true,
     "arguments":[
      {"kind":"option","names":[{"kind":"long","name":"device"}],"preferredName":{"kind":"long","name":"device"},
       "valueName":"device","isOptional":true,"isRepeating":true,"shouldDisplay":true,"abstract":"Camera."},
      {"kind":"option","names":[{"kind":"long","name":"size"}],"preferredName":{"kind":"long","name":"size"},
       "valueName":"size","isOptional":true,"isRepeating":false,"shouldDisplay":true,"abstract":"Frame size WxH."},
      {"kind":"option","names":[{"kind":"long","name":"fps"}],"preferredName":{"kind":"long","name":"fps"},
       "valueName":"fps","defaultValue":"30.0","isOptional":true,"isRepeating":false,"shouldDisplay":true},
      {"kind":"flag","names":[{"kind":"long","name":"reconnect"}],"preferredName":{"kind":"long","name":"reconnect"},
       "valueName":"reconnect","defaultValue":"--no-reconnect","isOptional":true,"isRepeating":false,"shouldDisplay":true},
      {"kind":"flag","names":[{"kind":"long","name":"no-reconnect"}],"preferredName":{"kind":"long","name":"no-reconnect"},
       "valueName":"no-reconnect","isOptional":true,"isRepeating":false,"shouldDisplay":true},
      {"kind":"flag","names":[{"kind":"long","name":"mirror"}],"preferredName":{"kind":"long","name":"mirror"},
       "valueName":"mirror","isOptional":true,"isRepeating":false,"shouldDisplay":true},
      {"kind":"option","names":[{"kind":"long","name":"config"}],"preferredName":{"kind":"long","name":"config"},
       "valueName":"config","isOptional":true,"isRepeating":false,"shouldDisplay":true},
      {"kind":"flag","names":[{"kind":"long","name":"verbose"},{"kind":"short","name":"v"}],
       "preferredName":{"kind":"long","name":"verbose"},"valueName":"verbose","isOptional":true,"isRepeating":false,"shouldDisplay":true},
      {"kind":"flag","names":[{"kind":"short","name":"h"},{"kind":"long","name":"help"}],
       "preferredName":{"kind":"long","name":"help"},"valueName":"help","isOptional":true,"isRepeating":false,"shouldDisplay":true}
     ]}}
    """

@Suite struct ConfigurationArgumentsTests {
    let options: CommandOptions

    init() throws { options = try CommandOptions(dumpHelpJSON: publishDump) }

    private func translate(_ text: String, commandLine: [String] = []) throws(ConfigurationError) -> ConfigurationArguments {
        let file = try ConfigurationFile(text: "[publish]\n" + text, path: "c.toml")
        return try ConfigurationArguments(entries: file.sections["publish"] ?? [], path: "c.toml", options: options, commandLine: commandLine)
    }

    @Test func theCommandsOptionsAreItsKeys() {
        #expect(options.command == "publish")
        #expect(options.options.map(\.name) == ["device", "size", "fps", "reconnect", "mirror", "verbose"])
        #expect(options.option(named: "reconnect")?.kind == .flag(invertible: true))
        #expect(options.option(named: "mirror")?.kind == .flag(invertible: false))
        #expect(options.option(named: "device")?.kind == .option(repeating: true))
        #expect(options.option(named: "fps")?.defaultValue == "30.0")
        #expect(options.option(named: "verbose")?.shortNames == ["v"])
    }

    @Test func valuesAndSwitchesBecomeArguments() throws {
        let translated = try translate("""
            size = "1280x720"
            fps = 15
            reconnect = false
            mirror = false
            device = ["/dev/video0", "/dev/video2"]
            verbose = true
            """)
        #expect(translated.arguments == [
            "--size=1280x720", "--fps=15", "--no-reconnect", "--device=/dev/video0", "--device=/dev/video2", "--verbose",
        ])
        #expect(translated.used.count == 6)
    }

    @Test func aValueStartingWithADashStaysAValue() throws {
        #expect(try translate("size = \"-5x3\"").arguments == ["--size=-5x3"])
    }

    @Test func theCommandLineOverridesTheFile() throws {
        let translated = try translate(
            "size = \"1280x720\"\nfps = 15\nreconnect = true\ndevice = [\"/dev/video0\"]\nverbose = false\n",
            commandLine: ["--size", "640x480", "--no-reconnect", "--device=/dev/video4", "-v"])
        #expect(translated.arguments == ["--fps=15"])
        #expect(translated.overridden.map(\.key) == ["size", "reconnect", "device", "verbose"])
    }

    @Test func argumentsAfterTheTerminatorAreNotOptions() throws {
        #expect(try translate("fps = 15").arguments == ["--fps=15"])
        #expect(try translate("fps = 15", commandLine: ["--", "--fps"]).arguments == ["--fps=15"])
    }

    @Test func anUnknownKeyIsNamedWithItsLineAndTheKnownKeys() {
        do {
            _ = try translate("fps = 15\nframe_rate = 10\n")
            Issue.record("an unknown key was accepted")
        } catch {
            #expect(error.line == 3)
            #expect(error.key == "frame_rate")
            #expect(error.description == "c.toml:3: unknown key [publish] frame_rate (keys of [publish]: device, size, fps, reconnect, mirror, verbose)")
        }
    }

    @Test func likelyMistakesGetAHint() {
        do {
            _ = try translate("no-reconnect = true")
            Issue.record("no-reconnect was accepted as a key")
        } catch {
            #expect(error.description.contains("write reconnect = false"))
        }
        do {
            _ = try translate("help = true")
            Issue.record("help was accepted as a key")
        } catch {
            #expect(error.key == "help")
        }
    }

    @Test func aSwitchTakesOnlyABoolean() {
        do {
            _ = try translate("fps = 15\nreconnect = \"yes\"\n")
            Issue.record("a string was accepted for a switch")
        } catch {
            #expect(error.line == 3)
            #expect(error.description == "c.toml:3: [publish] reconnect is a switch: write true or false, not \"yes\"")
        }
    }

    @Test func aSingleValueOptionRefusesAList() {
        do {
            _ = try translate("size = [\"1x1\", \"2x2\"]")
            Issue.record("a list was accepted for a single-value option")
        } catch {
            #expect(error.problem == .notAList(.list([.string("1x1"), .string("2x2")])))
            #expect(error.line == 2)
        }
    }

    @Test func aDateIsNotAnOptionValue() {
        do {
            _ = try translate("size = 1979-05-27")
            Issue.record("a date was accepted")
        } catch {
            #expect(error.problem == .unsupportedValue(.unsupported("date")))
        }
    }

    @Test func aParserMessageAboutAFileOptionNamesTheKeyAndLine() throws {
        let translated = try translate("fps = 15\nsize = \"12x\"\n")
        let error = try #require(translated.attribute(
            parserMessage: "The value '12x' is invalid for '--size <size>': not WxH", options: options))
        #expect(error.line == 3)
        #expect(error.key == "size")
        #expect(error.description == "c.toml:3: [publish] size = \"12x\": The value '12x' is invalid for '--size <size>': not WxH")
        // About a command-line option: the parser's own message stands.
        let fromCommandLine = try translate("fps = 15", commandLine: ["--size", "12x"])
        #expect(fromCommandLine.attribute(parserMessage: "The value '12x' is invalid for '--size <size>'", options: options) == nil)
        // A switch's off position names the switch.
        let switched = try translate("reconnect = false")
        #expect(switched.attribute(parserMessage: "--no-reconnect cannot be used here", options: options)?.key == "reconnect")
    }
}
