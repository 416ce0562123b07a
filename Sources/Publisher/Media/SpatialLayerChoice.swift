import MediaTypes

/// The simulcast layers a hub's frames come in: how many, each one's size
/// as its latest keyframe said, and when each last sent a frame (the hub
/// keeps this, so a receiver that joins late knows the sizes before the next
/// keyframes). Fixed storage: a copy per frame allocates nothing.
struct SimulcastLayers: Sendable, Equatable {
    /// Layers told apart; a higher layer number counts as the highest.
    static let maxCount: UInt8 = 4
    /// A layer silent this long while another sends counts as stopped: a
    /// browser pauses its layers when its bandwidth estimate drops, and a
    /// publisher may announce more layers than it sends. Long enough that a
    /// layer waiting for a keyframe after a loss (the router asks every
    /// 0.5 s) is not left, short enough that a receiver's picture is not
    /// frozen for long.
    static let silenceBeforeStopped: Int64 = 2_000_000_000

    /// What is known of one layer.
    private struct Layer: Sendable, Equatable {
        /// Its size, as its latest keyframe said.
        var size: FrameSize?
        /// When its latest frame came, monotonic nanoseconds (0: none yet).
        var heardAt: Int64 = 0
    }

    /// How many layers the source sends (1: no simulcast).
    let count: UInt8
    private var layer0 = Layer(), layer1 = Layer(), layer2 = Layer(), layer3 = Layer()
    /// When the first frame of any layer came (0: none yet).
    private var firstHeard: Int64 = 0

    init(count: Int = 1) {
        self.count = UInt8(min(max(count, 1), Int(Self.maxCount)))
    }

    /// The largest layer: a source lists its layers from small to large.
    var top: UInt8 { count - 1 }

    /// A layer's number as kept here (numbers past the last count as the last).
    func clamped(_ layer: UInt8) -> UInt8 { min(layer, top) }

    subscript(layer: UInt8) -> FrameSize? {
        get { self[state: layer].size }
        set { self[state: layer].size = newValue }
    }

    /// Notes a frame of `layer` that came at `time` (the hub does, for every frame).
    mutating func heard(_ layer: UInt8, at time: MonotonicTimestamp) {
        let nanoseconds = max(time.nanoseconds, 1)
        // After the whole stream paused (video off, an outage) its layers start again one
        // after the other: as at its start, none is taken for stopped before the silence.
        if nanoseconds - newestHeard > Self.silenceBeforeStopped {
            (layer0.heardAt, layer1.heardAt, layer2.heardAt, layer3.heardAt, firstHeard) = (0, 0, 0, 0, 0)
        }
        if firstHeard == 0 { firstHeard = nanoseconds }
        self[state: layer].heardAt = nanoseconds
    }

    /// Whether `layer` is sending, judged by the newest frame of any layer:
    /// it sent within `silenceBeforeStopped` of it, or it has not sent yet
    /// but the stream is younger than that (its layers may start one after
    /// the other). Every layer counts as sending before any frame came.
    func isSending(_ layer: UInt8) -> Bool {
        let newest = newestHeard
        guard newest != 0 else { return true }
        let heard = self[state: layer].heardAt
        return newest - (heard == 0 ? firstHeard : heard) <= Self.silenceBeforeStopped
    }

    /// When the latest frame of any layer came (0: none yet).
    private var newestHeard: Int64 { max(layer0.heardAt, layer1.heardAt, layer2.heardAt, layer3.heardAt) }

    /// What is known of `layer` (a number past the last is the last).
    private subscript(state layer: UInt8) -> Layer {
        get {
            switch clamped(layer) {
            case 0: layer0
            case 1: layer1
            case 2: layer2
            default: layer3
            }
        }
        set {
            switch clamped(layer) {
            case 0: layer0 = newValue
            case 1: layer1 = newValue
            case 2: layer2 = newValue
            default: layer3 = newValue
            }
        }
    }
}

/// Which simulcast layer one receiver gets (OpenTok's preferredResolution).
/// A simulcasting publisher encodes each frame more than once, at more than
/// one size, and sends each size on an SSRC of its own: its spatial layers,
/// 0 the smallest. A receiver has one video stream and gets one layer on it:
/// the largest whose size fits within what it prefers, the smallest when
/// none fits, and the largest when it prefers nothing. Sizes are learnt from
/// keyframes, so at a stream's start some may not be known: a layer whose
/// size is not known yet is taken to be smaller than the ones above it (a
/// source lists its layers from small to large), so a receiver that
/// prefers a small picture does not start on a large one. Only layers that
/// are sending count (`SimulcastLayers.isSending`): a receiver of a layer
/// that stops moves to the nearest one still sending, and back when it
/// comes back, so it never waits for a layer that is not there.
///
/// A receiver moves to another layer only at a keyframe of that layer: the
/// other layer's frames do not follow on from the ones it had. Until that
/// keyframe the old layer keeps coming, so the picture never stops. A
/// stream without layers is all layer 0, and this only holds video back
/// until its first keyframe after (re)connecting.
struct SpatialLayerChoice: Sendable {
    /// The size the receiver would like (nil: the largest layer).
    var preferred: FrameSize?
    /// The layer being sent; nil until the first keyframe after (re)connecting.
    private(set) var current: UInt8?
    /// The layers as the last frame offered found them.
    private var layers = SimulcastLayers()
    /// The RTP time of the last frame let through, as sent.
    private var lastSent: UInt32?
    /// Added to the RTP time of the layer being sent, so that time never
    /// goes back for the receiver at a switch: the new layer's keyframe may
    /// be the same picture as the old layer's last frame (a source sends a
    /// frame's layers one after the other), or older (each layer has its own
    /// jitter buffer at the router). 0 unless that happened. The shift holds
    /// until the next switch: while it does, the receiver's lip sync (from
    /// sender reports on the wall clock) is off by it, a tick in the usual
    /// case, at most the router's jitter-buffer wait (0.2 s).
    private var shift: UInt32 = 0
    /// 10 s of the 90 kHz clock: far more than any layer's jitter-buffer wait.
    static let longestStepBack: UInt32 = 900_000

    /// `layers`: as the hub knows them when the receiver joins, so that its
    /// first keyframe request names the layer it will get.
    init(layers: SimulcastLayers = SimulcastLayers()) { self.layers = layers }

    /// Video starts again at a keyframe: the receiver (re)connected, or
    /// what it is sent changed. Its stream goes on, so time still must not go back.
    mutating func restart() { current = nil }

    /// The layer this receiver should get now.
    var target: UInt8 {
        // The sending layers, lowest and highest (no array: this runs for every frame).
        var lowest: UInt8?, highest: UInt8?
        for layer in 0...layers.top where layers.isSending(layer) {
            if lowest == nil { lowest = layer }
            highest = layer
        }
        // No layer sending: cannot be (the newest frame's layer sends), but then any may come back.
        guard let lowest, let highest else { return preferred == nil ? layers.top : 0 }
        guard let preferred else { return largest(lowest...highest) ?? highest }
        var fitting: (layer: UInt8, area: Int)?
        var smallest: (layer: UInt8, area: Int)?
        for layer in lowest...highest where layers.isSending(layer) {
            guard let size = layers[layer] else { continue }
            if size.width <= preferred.width, size.height <= preferred.height, size.pixelCount > (fitting?.area ?? -1) {
                fitting = (layer, size.pixelCount)
            }
            if size.pixelCount < (smallest?.area ?? .max) { smallest = (layer, size.pixelCount) }
        }
        if let fitting { return fitting.layer }
        // Nothing known fits: the smallest, which is the lowest sending layer while its size is not known.
        if layers[lowest] == nil { return lowest }
        return smallest?.layer ?? lowest
    }

    /// The largest of the sending layers in `range` once every one's size is
    /// known (a source that lists its layers large first), else nil: the
    /// highest then, as a source lists its layers from small to large.
    private func largest(_ range: ClosedRange<UInt8>) -> UInt8? {
        var best: (layer: UInt8, area: Int)?
        for layer in range where layers.isSending(layer) {
            guard let size = layers[layer] else { return nil }
            if size.pixelCount > (best?.area ?? -1) { best = (layer, size.pixelCount) }
        }
        return best?.layer
    }

    /// The layer whose keyframe the receiver waits for: its first one after
    /// (re)connecting, or the one it moves to; nil while it has what it wants.
    var awaitedLayer: UInt8? { current == target ? nil : target }

    /// The layer the receiver gets, or waits for: where its decoding failed.
    var received: UInt8 { current ?? target }

    /// Whether the receiver gets a layer below the largest: its room says
    /// nothing of what the largest layer may take.
    var receivesLowerLayer: Bool { current.map { $0 < layers.top } ?? false }

    /// The RTP time to send a frame of `layer` at `rtpTimestamp` under, or
    /// nil when it does not go to this receiver; `layers` as the hub knows
    /// them, this frame's keyframe size included.
    mutating func admit(layer: UInt8, isKeyframe: Bool, rtpTimestamp: UInt32, layers: SimulcastLayers) -> UInt32? {
        self.layers = layers
        let layer = layers.clamped(layer)
        if isKeyframe, layer == target, layer != current {
            current = layer
            shift = 0
            // Only a short step back is one: after hours without video (the 90 kHz
            // clock wraps in 13 hours) an older-looking time is a new start.
            if let lastSent, Int32(bitPattern: rtpTimestamp &- lastSent) <= 0, lastSent &- rtpTimestamp < Self.longestStepBack {
                shift = lastSent &- rtpTimestamp &+ 1
            }
        }
        guard layer == current else { return nil }
        let sent = rtpTimestamp &+ shift
        lastSent = sent
        return sent
    }
}
