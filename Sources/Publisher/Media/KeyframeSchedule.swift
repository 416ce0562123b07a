import MediaTypes

/// Which simulcast layers a keyframe is wanted of, one bit each (bit N:
/// layer N; a stream without layers is all layer 0), and when each layer
/// last had one. A request is served at most once per spacing per layer, and
/// kept until it can be. Per layer, so that a receiver moving to the small
/// layer (or a decode failure on it) costs a keyframe of that layer only,
/// not one of every layer for every other receiver.
struct KeyframeSchedule: Sendable {
    /// Every layer a stream can have (`SimulcastLayers.maxCount`).
    static let allLayers: UInt8 = (1 << SimulcastLayers.maxCount) - 1

    /// The layers asked for and not yet served.
    private(set) var pending: UInt8 = allLayers
    /// When each layer's last keyframe was planned (nil: none yet). A tuple,
    /// not an array: the encoder thread reads and writes it every frame.
    private var last: (MonotonicTimestamp?, MonotonicTimestamp?, MonotonicTimestamp?, MonotonicTimestamp?)
        = (nil, nil, nil, nil)

    /// The bit of one layer.
    static func bit(_ layer: UInt8) -> UInt8 { layer < SimulcastLayers.maxCount ? 1 << layer : 0 }

    mutating func ask(_ layers: UInt8) { pending |= layers & Self.allLayers }

    /// Every layer at once, and the spacing forgotten: video starts (again).
    mutating func restart() {
        pending = Self.allLayers
        last = (nil, nil, nil, nil)
    }

    /// The layers whose keyframe is due now (asked for, and the layer's last
    /// one at least `spacing` ago), taken off the pending ones.
    mutating func due(now: MonotonicTimestamp, spacing: Duration) -> UInt8 {
        var due: UInt8 = 0
        for layer in 0..<SimulcastLayers.maxCount where pending & Self.bit(layer) != 0 {
            if let previous = lastKeyframe(layer), now - previous < spacing { continue }
            due |= Self.bit(layer)
            setLastKeyframe(layer, now)
        }
        pending &= ~due
        return due
    }

    private func lastKeyframe(_ layer: UInt8) -> MonotonicTimestamp? {
        switch layer {
        case 0: last.0
        case 1: last.1
        case 2: last.2
        default: last.3
        }
    }

    private mutating func setLastKeyframe(_ layer: UInt8, _ time: MonotonicTimestamp) {
        switch layer {
        case 0: last.0 = time
        case 1: last.1 = time
        case 2: last.2 = time
        default: last.3 = time
        }
    }
}
