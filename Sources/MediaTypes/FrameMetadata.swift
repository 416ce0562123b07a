/// A few bytes a capturer attaches to a frame (OpenTok frames carry up to 32).
/// Stored inline so setting it never allocates.
public struct FrameMetadata: Hashable, Sendable {
    public static let capacity = 32
    private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    public private(set) var count: Int = 0

    public init() {}

    /// Copies up to `capacity` bytes; longer input is an error the caller must avoid.
    public init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        precondition(bytes.count <= Self.capacity, "frame metadata holds at most \(Self.capacity) bytes")
        count = bytes.count
        withUnsafeMutableBytes(of: &storage) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: storage) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }

    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    public static func == (a: Self, b: Self) -> Bool { a.bytes == b.bytes }
    public func hash(into h: inout Hasher) { h.combine(bytes) }
}
