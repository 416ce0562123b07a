import Encoders
import Logging
import MediaTypes
import RTP
import Synchronization

/// A subscriber's video decoding and rendering, on a thread of its own. The
/// connection's thread hands over each whole frame (copied into one of a few
/// slots, made once and grown only for a bigger frame) and goes back to its
/// packets, so a slow decoder or renderer (a Y4M file on a busy disk, a
/// v4l2loopback node whose reader stalls) never holds up receiving, NACKs or
/// keyframe requests. When every slot is taken the frame is dropped; the
/// frames after it would not decode without it, so the connection thread
/// then waits for a keyframe and asks for one.
///
/// Lip sync: the slots are also the video's delay queue. Audio reaches its
/// listener later than a frame reaches the screen (the sound card's buffer
/// comes on top of the network); given the audio's delay, each frame waits
/// in its slot until it is as late, by the sender's clock, as the audio
/// captured with it, at most `maxSyncHold`.
final class VideoDecoding: @unchecked Sendable {   // a slot belongs to one side at a time, handed over under `ring`'s lock
    /// What decoding did: the connection's stats take these from here.
    struct Decoded: Sendable, Equatable {
        var framesDecoded: UInt64 = 0
        var keyframesDecoded: UInt64 = 0
        var decodeErrors: UInt64 = 0
        var width = 0
        var height = 0
        var senderToRenderDelay: Double?
        /// Frames skipped after one that did not decode, until a keyframe (they would not decode either).
        var framesSkipped: UInt64 = 0
        /// How long frames waited for their audio (moving average, seconds; nil: no audio to wait for).
        var lipSyncHold: Double?
    }

    /// What `decodeNext` did.
    private enum Step: Equatable {
        case decoded
        case empty
        /// The oldest frame is due in this many seconds (lip sync).
        case due(in: Double)
    }

    /// 16 frames: a renderer's hiccup, and `maxSyncHold` of video at 30 fps with room to spare.
    static let slotCount = 16
    /// The longest a frame waits for its audio (a longer audio delay is not met in full:
    /// holding more frames would fill the slots).
    static let maxSyncHold = 0.3

    private final class Slot {
        var bytes: [UInt8] = []
        var timestamp: UInt32 = 0
        var isKeyframe = false
        var codec: VideoJitterBuffer.Codec = .vp8
        /// The stream's last sender report when the frame was handed over.
        var clock: (ntp: Double, rtp: UInt32)?
        /// When it was handed over (monotonic seconds).
        var handedOver = 0.0
    }

    private struct Ring {
        var head = 0
        var count = 0
        var decoded = Decoded()
        var vp8: VP8Decoder?
        var h264: H264Decoder?
    }

    private let slots = (0..<slotCount).map { _ in Slot() }
    private let ring = PThreadLocked(Ring())
    /// Set by the decode thread when a frame did not decode: 1 << 32 | its RTP
    /// timestamp (0: none). The connection thread takes it.
    private let failedFrame = Atomic<UInt64>(0)
    /// The audio's sender-to-render delay (a Double's bits; NaN: no audio to
    /// wait for), and when it was last said (monotonic seconds, a Double's bits).
    private let audioDelayBits = Atomic<UInt64>(Double.nan.bitPattern)
    private let audioDelayAtBits = Atomic<UInt64>(0)
    /// An audio delay older than this is not waited for (the audio stopped).
    static let audioDelayLifetime = 1.0
    private let renderer: (any VideoRenderer)?
    private let logger: Logger
    private let onEvent: @Sendable (SubscriberEvent) -> Void
    private let onRenderFailure: @Sendable (RenderError) -> Void
    /// The decode thread's wake-up (its owner starts it with `run`); set once, before the first frame.
    nonisolated(unsafe) var wake: StopSignal?

    // The decode thread's state.
    private var picture = VideoFrame(maxWidth: 1920, maxHeight: 1088)
    /// A frame did not decode: the ones after it are skipped until a keyframe.
    private var awaitingKeyframe = false
    /// The RTP time of the last frame decoded, and the smoothed time between
    /// frames (seconds, 0 until two frames came): the picture's frame rate,
    /// which a Y4M file's header needs.
    private var lastDecodedTimestamp: UInt32?
    private var frameInterval = 0.0

    init(renderer: (any VideoRenderer)?, logger: Logger, onEvent: @escaping @Sendable (SubscriberEvent) -> Void,
         onRenderFailure: @escaping @Sendable (RenderError) -> Void) {
        self.renderer = renderer
        self.logger = logger
        self.onEvent = onEvent
        self.onRenderFailure = onRenderFailure
    }

    /// Makes the decoder for `codec` if there is none yet (decoders carry on across connections).
    func prepare(_ codec: VideoJitterBuffer.Codec) throws(CodecError) {
        let have = ring.withLock { r in codec == .vp8 ? r.vp8 != nil : r.h264 != nil }
        guard !have else { return }
        switch codec {
        case .vp8:
            let decoder = try VP8Decoder()
            ring.withLock { $0.vp8 = decoder }
        case .h264:
            let decoder = try H264Decoder()
            ring.withLock { $0.h264 = decoder }
        }
    }

    // MARK: The connection thread

    /// Hands over one frame (its bytes are copied); false when every slot is taken.
    func submit(_ frame: VideoJitterBuffer.Frame, bytes: [UInt8], codec: VideoJitterBuffer.Codec,
                clock: (ntp: Double, rtp: UInt32)?) -> Bool {
        guard let index = ring.withLock({ r -> Int? in
            r.count < Self.slotCount ? (r.head + r.count) % Self.slotCount : nil
        }) else { return false }
        // Not counted yet: the decode thread does not look at this slot.
        let slot = slots[index]
        slot.bytes.removeAll(keepingCapacity: true)
        slot.bytes.append(contentsOf: bytes)
        slot.timestamp = frame.timestamp
        slot.isKeyframe = frame.isKeyframe
        slot.codec = codec
        slot.clock = clock
        slot.handedOver = MonotonicTimestamp.now().seconds
        ring.withLock { $0.count += 1 }
        wake?.wakeUp()
        return true
    }

    /// The audio played with this video is `seconds` behind its sender (nil: no
    /// audio is played, frames go as soon as they are decoded).
    func setAudioDelay(_ seconds: Double?) {
        audioDelayAtBits.store(MonotonicTimestamp.now().seconds.bitPattern, ordering: .relaxed)
        audioDelayBits.store((seconds ?? .nan).bitPattern, ordering: .relaxed)
    }

    /// The RTP timestamp of a frame that did not decode, once: what follows it needs a keyframe.
    func takeDecodeFailure() -> UInt32? {
        let taken = failedFrame.exchange(0, ordering: .relaxed)
        return taken == 0 ? nil : UInt32(truncatingIfNeeded: taken)
    }

    var decoded: Decoded { ring.withLock { $0.decoded } }

    /// Once the decode thread has stopped: decodes what it had not yet (the
    /// stream ended; nothing handed over is lost).
    func drain() {
        while decodeNext(waiting: false) == .decoded {}
    }

    // MARK: The decode thread

    func run(_ stop: StopSignal) {
        while !stop.isStopRequested {
            switch decodeNext(waiting: true) {
            case .decoded: continue
            case .empty: _ = stop.wait(milliseconds: 200)
            case .due(let seconds): _ = stop.wait(milliseconds: Int32(min(200, max(1, seconds * 1000))))
            }
        }
    }

    /// Decodes and renders the oldest frame handed over, unless (`waiting`) it
    /// should wait for its audio.
    private func decodeNext(waiting: Bool) -> Step {
        guard let (index, queued, vp8, h264) = ring.withLock({ r -> (Int, Int, VP8Decoder?, H264Decoder?)? in
            r.count > 0 ? (r.head, r.count, r.vp8, r.h264) : nil
        }) else { return .empty }
        let slot = slots[index]
        // Half the slots taken: the frames go, whatever the audio (holding more would
        // fill them, and a full ring drops frames).
        let hold = queued < Self.slotCount / 2 ? syncHold(slot) : (remaining: 0, held: nil)
        if waiting, hold.remaining > 0.001 { return .due(in: hold.remaining) }
        let skipped = awaitingKeyframe && !slot.isKeyframe
        var result = skipped ? Outcome() : decode(slot, vp8: vp8, h264: h264)
        if result.errors > 0 { awaitingKeyframe = true } else if result.decoded && slot.isKeyframe { awaitingKeyframe = false }
        ring.withLock { r in
            r.head = (r.head + 1) % Self.slotCount
            r.count -= 1
            r.decoded.framesSkipped += skipped ? 1 : 0
            let previous = (r.decoded.width, r.decoded.height)
            r.decoded.decodeErrors += result.errors
            r.decoded.framesDecoded += result.decoded ? 1 : 0
            r.decoded.keyframesDecoded += result.decoded && slot.isKeyframe ? 1 : 0
            if let delay = result.delay {
                r.decoded.senderToRenderDelay = SenderClock.smoothed(r.decoded.senderToRenderDelay, delay)
            }
            if let held = hold.held { r.decoded.lipSyncHold = SenderClock.smoothed(r.decoded.lipSyncHold, held) }
            if let size = result.size, (size.width, size.height) != previous {
                r.decoded.width = size.width
                r.decoded.height = size.height
            } else {
                result.size = nil
            }
        }
        if let size = result.size { onEvent(.videoDimensions(width: size.width, height: size.height)) }
        if result.errors > 0 { failedFrame.store(1 << 32 | UInt64(slot.timestamp), ordering: .relaxed) }
        if result.decoded, let renderer {
            do { try renderer.render(picture) } catch { onRenderFailure(error) }
        }
        return .decoded
    }

    /// How much longer `slot`'s frame should wait for its audio, and how long it
    /// will have waited when it goes now (nil: no audio, or no sender report yet).
    private func syncHold(_ slot: Slot) -> (remaining: Double, held: Double?) {
        let audioDelay = Double(bitPattern: audioDelayBits.load(ordering: .relaxed))
        let now = MonotonicTimestamp.now().seconds
        // NaN: no audio; a delay may be negative (the sender's clock ahead of ours): only the difference counts.
        guard !audioDelay.isNaN, now - Double(bitPattern: audioDelayAtBits.load(ordering: .relaxed)) < Self.audioDelayLifetime,
              let delay = SenderClock.delay(since: slot.timestamp, clock: slot.clock, rate: 90_000) else {
            return (0, nil)
        }
        let latest = slot.handedOver + Self.maxSyncHold
        return (max(0, min(audioDelay - delay, latest - now)), now - slot.handedOver)
    }

    private struct Outcome {
        var decoded = false
        var errors: UInt64 = 0
        var size: FrameSize?
        var delay: Double?
    }

    private func decode(_ slot: Slot, vp8: VP8Decoder?, h264: H264Decoder?) -> Outcome {
        var outcome = Outcome()
        if slot.isKeyframe, slot.codec == .vp8,
           let (width, height) = KeyframeInspection.vp8KeyframeSize(slot.bytes[...]),
           VideoFrame.byteCount(of: .nv12(width: width, height: height, framesPerSecond: 0)) > picture.capacity {
            picture = VideoFrame(maxWidth: width, maxHeight: height)   // a bigger stream: once per size
        }
        // Without a renderer the picture stays in the decoder: no NV12 conversion.
        let target = renderer == nil ? nil : picture
        do {
            outcome.size = try slot.bytes.withUnsafeBytes { bytes in
                switch slot.codec {
                case .vp8:
                    guard let vp8 else { throw CodecError.decodeFailed(codec: "VP8", reason: "no decoder") }
                    return try vp8.decode(bytes, into: target)
                case .h264:
                    guard let h264 else { throw CodecError.decodeFailed(codec: "H.264", reason: "no decoder") }
                    return try h264.decode(bytes, into: target)
                }
            }
        } catch {
            outcome.errors = 1
            logger.debug("video frame \(slot.timestamp) not decoded: \(error)")
            return outcome
        }
        outcome.decoded = true
        outcome.delay = SenderClock.delay(since: slot.timestamp, clock: slot.clock, rate: 90_000)
        noteFrameRate(slot.timestamp, into: target)
        return outcome
    }

    /// Frame rates cameras and encoders run at: a measured rate within 10 % of one
    /// is taken as it (a capture 4 ms late makes 30 fps measure 29).
    static let nominalFrameRates: [Double] = [5, 7.5, 10, 12, 12.5, 15, 20, 24, 25, 30, 48, 50, 60]

    /// The nominal rate near `measured`, else `measured` in whole frames a second.
    static func nominalFrameRate(_ measured: Double) -> Double {
        if let near = nominalFrameRates.min(by: { abs($0 - measured) < abs($1 - measured) }),
           abs(near - measured) <= near * 0.1 {
            return near
        }
        return max(1, measured.rounded())
    }

    /// The stream's frame rate from the frames' RTP times (90 kHz), smoothed and
    /// taken to the nominal rate near it, on the picture's format (0 until known).
    private func noteFrameRate(_ timestamp: UInt32, into target: VideoFrame?) {
        if let last = lastDecodedTimestamp {
            let seconds = Double(timestamp &- last) / 90_000
            if seconds > 0, seconds <= 2 {   // not a reordering, a wrap or a restart
                frameInterval = frameInterval == 0 ? seconds : frameInterval * 0.9 + seconds * 0.1
            }
        }
        lastDecodedTimestamp = timestamp
        guard let target, frameInterval > 0 else { return }
        let rate = Self.nominalFrameRate(1 / frameInterval)
        target.setEstimatedFramesPerSecond(rate)
    }
}
