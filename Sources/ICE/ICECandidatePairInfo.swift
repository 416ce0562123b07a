import Networking

/// A snapshot of one candidate pair, for stats and logs.
public struct ICECandidatePairInfo: Hashable, Sendable {
    public enum State: String, Sendable { case frozen, waiting, inProgress = "in-progress", succeeded, failed }
    public var socket: Int
    public var local: TransportAddress
    public var remote: TransportAddress
    public var priority: UInt64
    public var state: State
    public var nominated: Bool
}
