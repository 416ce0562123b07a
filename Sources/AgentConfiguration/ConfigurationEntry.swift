/// One `key = value` of a section, with the line it was written on (1-based),
/// so every error can point at it.
public struct ConfigurationEntry: Sendable, Equatable {
    public let section: String
    public let key: String
    public let value: ConfigurationValue
    /// The line of `key =` in the file; nil when it could not be found (a dotted
    /// or quoted key written in an unusual way): errors then name the key alone.
    public let line: Int?

    public init(section: String, key: String, value: ConfigurationValue, line: Int?) {
        self.section = section
        self.key = key
        self.value = value
        self.line = line
    }
}
