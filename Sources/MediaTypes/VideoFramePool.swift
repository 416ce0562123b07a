/// A fixed set of frames reused for the life of a capture session, so that the
/// capture path allocates nothing per frame in steady state.
///
/// A frame is free when the pool holds its only reference: the consumer gave it
/// back simply by letting go of it. `acquire()` is called from one thread only
/// (the capture thread); consumers on other threads release frames through ARC,
/// whose reference counting is atomic, so a frame being released concurrently
/// is at worst seen as busy one more time.
public final class VideoFramePool: @unchecked Sendable {
    private var frames: [VideoFrame]
    private var next = 0

    /// Frames able to hold pictures up to `maxWidth` x `maxHeight`.
    public init(count: Int, maxWidth: Int, maxHeight: Int) {
        precondition(count > 0, "a pool needs at least one frame")
        frames = (0..<count).map { _ in VideoFrame(maxWidth: maxWidth, maxHeight: maxHeight) }
    }

    public var count: Int { frames.count }

    /// Bytes each frame can hold.
    public var frameCapacity: Int { frames[0].capacity }

    /// A frame nobody else holds, or nil when consumers hold them all.
    /// Round-robin, so a frame just released is not the first one refilled.
    public func acquire() -> VideoFrame? {
        for step in 0..<frames.count {
            let i = (next + step) % frames.count
            if isKnownUniquelyReferenced(&frames[i]) {
                next = (i + 1) % frames.count
                return frames[i]
            }
        }
        return nil
    }

    /// How many frames are out with consumers right now (approximate while they are released).
    public var framesInUse: Int {
        var busy = 0
        for i in frames.indices where !isKnownUniquelyReferenced(&frames[i]) { busy += 1 }
        return busy
    }

    /// Identities of the frames, for tests that check reuse.
    public var frameIdentities: [ObjectIdentifier] { frames.map(ObjectIdentifier.init) }
}
