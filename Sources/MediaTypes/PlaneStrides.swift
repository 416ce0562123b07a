/// Bytes per row of each plane of a picture, at most three planes, stored
/// inline: formats are built on the per-frame path, and an `[Int]` here would
/// cost a heap allocation for every frame.
public struct PlaneStrides: Hashable, Sendable, RandomAccessCollection, ExpressibleByArrayLiteral {
    public static let maximumPlanes = 3
    private var first = 0, second = 0, third = 0
    public private(set) var count = 0

    public init(_ strides: some Sequence<Int>) {
        for stride in strides { append(stride) }
    }

    public init(arrayLiteral strides: Int...) {
        self.init(strides)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(plane: Int) -> Int {
        precondition(plane >= 0 && plane < count, "no plane \(plane) in \(count) planes")
        switch plane {
        case 0: return first
        case 1: return second
        default: return third
        }
    }

    public mutating func append(_ stride: Int) {
        precondition(count < Self.maximumPlanes, "at most \(Self.maximumPlanes) planes")
        switch count {
        case 0: first = stride
        case 1: second = stride
        default: third = stride
        }
        count += 1
    }
}
