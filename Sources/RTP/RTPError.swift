public enum RTPError: Error, Hashable, Sendable, CustomStringConvertible {
    case tooShort(needed: Int, got: Int)
    case badVersion(UInt8)
    case badPadding

    public var description: String {
        switch self {
        case .tooShort(let needed, let got): "RTP packet too short: needs \(needed) bytes, has \(got)"
        case .badVersion(let v): "not RTP version 2 (version \(v))"
        case .badPadding: "RTP padding longer than the packet"
        }
    }
}
