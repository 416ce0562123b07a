/// `a=name` or `a=name:value`.
public struct SDPAttribute: Hashable, Sendable {
    public var name: String
    public var value: String?

    public init(_ name: String, _ value: String? = nil) {
        self.name = name
        self.value = value
    }
}

extension SDPAttribute {
    var line: String { value.map { "a=\(name):\($0)" } ?? "a=\(name)" }
}
