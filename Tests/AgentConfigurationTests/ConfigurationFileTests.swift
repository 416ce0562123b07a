import Testing

@testable import AgentConfiguration

@Suite struct ConfigurationFileTests {
    @Test func sectionsHoldTheirEntriesWithLines() throws {
        let file = try ConfigurationFile(text: """
            # A kiosk.
            [publish]
            device = "/dev/video0"
              fps = 15   # indented, with a comment
            bitrate = 1500
            scale = 0.5
            mirror = true

            [router]
            "listen" = "127.0.0.1:7880"
            """, path: "k.toml")
        let publish = try #require(file.sections["publish"])
        #expect(publish.map(\.key) == ["device", "fps", "bitrate", "scale", "mirror"])
        #expect(publish.map(\.line) == [3, 4, 5, 6, 7])
        #expect(publish[0].value == .string("/dev/video0"))
        #expect(publish[1].value == .integer(15))
        #expect(publish[3].value == .float(0.5))
        #expect(publish[4].value == .boolean(true))
        #expect(file.sections["router"] == [ConfigurationEntry(section: "router", key: "listen", value: .string("127.0.0.1:7880"), line: 10)])
        #expect(file.line(ofSection: "router") == 9)
    }

    @Test func aMultiLineStringIsNotReadAsKeys() throws {
        let file = try ConfigurationFile(text: """
            [publish]
            token = \"\"\"
            fps = 99
            \"\"\"
            fps = 5
            """, path: "m.toml")
        let fps = try #require(file.sections["publish"]?.first { $0.key == "fps" })
        #expect(fps.line == 5)
        #expect(fps.value == .integer(5))
    }

    @Test func aSyntaxErrorNamesItsLine() {
        #expect(throws: ConfigurationError.self) { try ConfigurationFile(text: "[publish]\nsize = \n", path: "s.toml") }
        do {
            _ = try ConfigurationFile(text: "[publish]\nfps = 30\nsize = \n", path: "s.toml")
            Issue.record("a syntax error was accepted")
        } catch {
            #expect(error.line == 3)
            #expect(error.description.hasPrefix("s.toml:3: not valid TOML"))
        }
    }

    @Test func aKeyOutsideASectionIsRefusedWithItsLine() {
        do {
            _ = try ConfigurationFile(text: "# top\n\ndevice = \"/dev/video0\"\n[publish]\nfps = 5\n", path: "o.toml")
            Issue.record("a key before any section was accepted")
        } catch {
            #expect(error.problem == .keyOutsideSection)
            #expect(error.line == 3)
            #expect(error.key == "device")
        }
    }

    @Test func anUnknownSectionIsRefusedWithItsLine() throws {
        let file = try ConfigurationFile(text: "[publish]\nfps = 5\n\n[publsh]\nsize = \"1x1\"\n", path: "u.toml")
        do {
            try file.checkSections(known: ["publish", "subscribe", "router"])
            Issue.record("an unknown section was accepted")
        } catch {
            #expect(error.line == 4)
            #expect(error.section == "publsh")
            #expect(error.description == "u.toml:4: unknown section [publsh]; the sections are [publish], [subscribe], [router]")
        }
    }

    @Test func datesAndTablesAreKeptAsUnsupported() throws {
        let file = try ConfigurationFile(text: "[publish]\nduration = 1979-05-27\n[publish.extra]\na = 1\n", path: "d.toml")
        let entries = try #require(file.sections["publish"])
        #expect(entries.first { $0.key == "duration" }?.value == .unsupported("date"))
        #expect(entries.first { $0.key == "extra" }?.value == .unsupported("table"))
    }

    @Test func aMissingFileIsUnreadable() {
        do {
            _ = try ConfigurationFile.load(path: "/nonexistent/camagent.toml")
            Issue.record("a missing file loaded")
        } catch {
            #expect(error.problem == .unreadable(reason: "no such file"))
        }
    }

    /// toml++ takes "\u0000" in a key; TOMLKit then read the key back cut at the NUL and
    /// trapped looking it up. A raw NUL made TOMLKit drop the rest of the file unsaid.
    @Test(arguments: ["[publish]\n\"a\\u0000\" = 1\n", "[publish]\nfps = 5\n[\"x\\U00000000\"]\n", "[publish]\nfps = 5\u{0}\nsize = \"1x1\"\n"])
    func aNulIsRefusedWithItsLine(text: String) {
        do {
            _ = try ConfigurationFile(text: text, path: "c.toml")
            Issue.record("a NUL was taken")
        } catch {
            #expect(error.line == 2 || error.line == 3)
            #expect(error.description.contains("a NUL character"))
        }
    }

    /// --config /dev/zero read until memory ran out.
    @Test func aFileWithoutEndIsRefusedAtTheBound() {
        do {
            _ = try ConfigurationFile.load(path: "/dev/zero")
            Issue.record("/dev/zero loaded")
        } catch {
            #expect(error.problem == .unreadable(reason: "larger than 1024 KiB"))
        }
    }
}
