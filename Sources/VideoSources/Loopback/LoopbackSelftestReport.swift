/// What the loopback self-test found.
public struct LoopbackSelftestReport: Codable, Hashable, Sendable {
    public var device: String
    public var width: Int
    public var height: Int
    public var framesPerSecond: Double
    public var framesWritten: Int
    public var framesCaptured: Int
    /// The first counter seen: frames written before capture started are not losses.
    public var firstCounter: Int?
    public var lastCounter: Int?
    /// Counters skipped between the first and the last one written.
    public var missing: Int
    public var duplicates: Int
    public var outOfOrder: Int
    /// Captured frames whose counter could not be read.
    public var undecodable: Int
    /// Writer (just before write()) to consumer callback.
    public var latencyP50Ms: Double
    public var latencyP99Ms: Double
    public var maxMissingPercent: Double
    public var passed: Bool
    public var problems: [String]
}
