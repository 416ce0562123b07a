
/// Where audio meets the rest of the agent (OpenTok's audio bus): the capture
/// side writes 10 ms chunks to the consumer; the render side reads 10 ms
/// chunks that were queued for playing. The render queue is a fixed ring:
/// when it is full the oldest chunk is dropped (newest wins), when it is
/// empty the card gets silence; both are counted. Nothing is allocated per chunk.
public final class AudioBus: Sendable {
    /// The render queue: `capacity` chunks of `chunkSamples` samples.
    private final class Ring: @unchecked Sendable {  // every field below is guarded by `lock`
        let lock = PThreadLocked(())
        let storage: UnsafeMutableBufferPointer<Int16>
        let chunkSamples: Int
        let capacity: Int
        var head = 0   // next chunk to read
        var count = 0
        var overflows: UInt64 = 0

        init(chunkSamples: Int, capacity: Int) {
            self.chunkSamples = chunkSamples
            self.capacity = capacity
            storage = .allocate(capacity: chunkSamples * capacity)
            storage.initialize(repeating: 0)
        }

        deinit { storage.deallocate() }
    }

    private let consumer = PThreadLocked<(any AudioCaptureConsumer)?>(nil)
    private let render: Ring

    /// A bus whose render queue holds up to `renderChunks` chunks of `renderFormat`.
    public init(renderFormat: AudioFormat = .voice, renderChunks: Int = 50) {
        render = Ring(chunkSamples: renderFormat.samplesPerChunk, capacity: max(renderChunks, 2))
    }

    public func setCaptureConsumer(_ c: (any AudioCaptureConsumer)?) { consumer.withLock { $0 = c } }

    /// Capture side: hands a chunk to the consumer.
    package func deliverCaptured(_ chunk: AudioChunk) {
        consumer.withLock { $0 }?.consume(chunk)
    }

    package func captureEvent(_ event: AudioEvent) {
        consumer.withLock { $0 }?.audioEvent(event)
    }

    /// Queues samples to play; whole chunks only (samples beyond the last whole chunk are ignored).
    /// Returns the number of chunks queued.
    @discardableResult
    public func queueForRender(_ samples: UnsafeBufferPointer<Int16>) -> Int {
        let ring = render
        return ring.lock.withLock { _ in
            let n = ring.chunkSamples
            var queued = 0
            var offset = 0
            while offset + n <= samples.count {
                if ring.count == ring.capacity {  // full: drop the oldest
                    ring.head = (ring.head + 1) % ring.capacity
                    ring.count -= 1
                    ring.overflows += 1
                }
                let slot = (ring.head + ring.count) % ring.capacity
                (ring.storage.baseAddress! + slot * n).update(from: samples.baseAddress! + offset, count: n)
                ring.count += 1
                offset += n
                queued += 1
            }
            return queued
        }
    }

    /// Render side: the next chunk into `destination`; silence when none is queued (returns false).
    package func readRenderChunk(into destination: UnsafeMutableBufferPointer<Int16>) -> Bool {
        let ring = render
        return ring.lock.withLock { _ in
            guard ring.count > 0 else {
                destination.update(repeating: 0)
                return false
            }
            let n = min(ring.chunkSamples, destination.count)
            destination.baseAddress!.update(from: ring.storage.baseAddress! + ring.head * ring.chunkSamples, count: n)
            ring.head = (ring.head + 1) % ring.capacity
            ring.count -= 1
            return true
        }
    }

    /// Chunks waiting to be played.
    public var queuedRenderChunks: Int { render.lock.withLock { _ in render.count } }
    /// Chunks dropped because the render queue was full.
    public var renderOverflows: UInt64 { render.lock.withLock { _ in render.overflows } }
}
