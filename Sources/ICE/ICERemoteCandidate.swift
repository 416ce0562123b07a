import Networking

/// A peer's candidate: signalled, or learned from a check (type "prflx").
public struct ICERemoteCandidate: Hashable, Sendable {
    public var foundation: String
    public var priority: UInt32
    public var address: TransportAddress
    /// "host", "srflx", "prflx" or "relay".
    public var type: String
}
