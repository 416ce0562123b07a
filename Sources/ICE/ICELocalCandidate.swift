import Networking

/// One of our candidates as it is signalled (RFC 8839 `a=candidate`): component 1, UDP.
public struct ICELocalCandidate: Hashable, Sendable {
    public var foundation: String
    public var component: Int
    public var transport: String
    public var priority: UInt32
    public var ip: String
    public var port: UInt16
    /// "host" or "srflx".
    public var type: String
    /// For a server-reflexive candidate, the host address it was learned from (`raddr`/`rport`).
    public var relatedAddress: TransportAddress?
    /// The caller's index of the local socket this candidate sends from.
    public var socket: Int

    public var address: TransportAddress { TransportAddress(ip: ip, port: port) }

    /// RFC 8445 §5.1.2.1: (2^24)·type preference + (2^8)·local preference + (256 − component).
    /// Type preferences: host 126, peer-reflexive 110, server-reflexive 100, relayed 0.
    public static func priority(type: String, localPreference: UInt32, component: Int = 1) -> UInt32 {
        let typePreference: UInt32 = switch type {
        case "host": 126
        case "prflx": 110
        case "srflx": 100
        default: 0
        }
        return typePreference << 24 | (localPreference & 0xffff) << 8 | UInt32(256 - min(max(component, 1), 256))
    }
}
