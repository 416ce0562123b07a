public enum SDPError: Error, Hashable, Sendable, CustomStringConvertible {
    case badLine(number: Int, text: String)
    case missing(String)

    public var description: String {
        switch self {
        case .badLine(let n, let text): "SDP line \(n) is malformed: \(text.prefix(80))"
        case .missing(let what): "SDP has no \(what)"
        }
    }
}
