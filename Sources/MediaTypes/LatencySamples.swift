/// Keeps the last `capacity` latency samples in preallocated storage, so
/// recording one costs no allocation; percentiles are computed on request.
public struct LatencySamples: Sendable {
    private var samples: [Int64]
    /// Where percentiles are selected, allocated once: statistics are read
    /// while capture runs, and reading them must not allocate either.
    private var scratch: [Int64]
    private var nextIndex = 0
    public private(set) var recorded = 0

    public init(capacity: Int = 4096) {
        samples = [Int64](repeating: 0, count: capacity)
        scratch = samples
    }

    public mutating func record(_ nanoseconds: Int64) {
        samples[nextIndex] = nanoseconds
        nextIndex = (nextIndex + 1) % samples.count
        recorded += 1
    }

    /// The p-th percentile (0...100) of the samples kept, 0 when there are none.
    public mutating func percentile(_ p: Double) -> Int64 {
        let n = min(recorded, samples.count)
        guard n > 0 else { return 0 }
        let rank = min(max(Int((p / 100 * Double(n - 1)).rounded()), 0), n - 1)
        return samples.withUnsafeBufferPointer { kept in
            scratch.withUnsafeMutableBufferPointer { work in
                _ = work.update(fromContentsOf: kept[0..<n])
                return Self.select(rank, in: UnsafeMutableBufferPointer(rebasing: work[0..<n]))
            }
        }
    }

    public var maximum: Int64 { samples[0..<min(recorded, samples.count)].max() ?? 0 }

    /// Quickselect (Hoare partition, middle pivot): the value that would sit
    /// at `rank` if `values` were sorted. Reorders `values`; never allocates,
    /// unlike `sorted()`, whose merge sort takes scratch memory.
    private static func select(_ rank: Int, in values: UnsafeMutableBufferPointer<Int64>) -> Int64 {
        var low = 0, high = values.count - 1
        while low < high {
            let pivot = values[low + (high - low) / 2]
            var i = low, j = high
            while i <= j {
                while values[i] < pivot { i += 1 }
                while values[j] > pivot { j -= 1 }
                if i <= j {
                    values.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if rank <= j { high = j } else if rank >= i { low = i } else { break }
        }
        return values[rank]
    }
}
