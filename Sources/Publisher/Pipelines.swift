import Encoders
import Logging
import MediaTypes
import PixelConversion
import RTP

/// Encodes captured video once for every connection, on an encoder thread
/// of its own, and only while someone receives video. The capture thread
/// only converts: `consume` drops the frame into a one-frame slot (the
/// newest wins; a frame replaced before it was encoded is counted) and the
/// capturer requeues its driver buffer at once. The encoder is made on the
/// first frame, at the size the camera really delivers, and made again when
/// the size changes (another camera, a camera that came back in another
/// mode), which also makes the next frame a keyframe.
///
/// Orientation and colour range reach the receiver: a rotation travels as
/// the urn:3gpp:video-orientation header extension when every receiver took
/// it, otherwise (or for a mirror, which browsers ignore in CVO) the pixels
/// are turned before encoding; full-range frames (MJPEG) are brought to the
/// limited range the encoders signal.
///
/// With simulcast on, each frame is also scaled to half its width and
/// height and encoded again: layer 0, sent on an SSRC of its own, for
/// receivers that prefer a smaller picture (a router picks per subscriber).
final class VideoPipeline: VideoCaptureConsumer, @unchecked Sendable {   // encoder state: encoder thread only
    struct Counts: Sendable, Equatable {
        /// Frames encoded (once for every receiver).
        var encoded: UInt64 = 0
        /// Frames captured while nobody received video, or video was not published (not encoded).
        var notWatched: UInt64 = 0
        /// Frames replaced by a newer one before the encoder took them.
        var droppedEncoderBusy: UInt64 = 0
    }

    private let hub: MediaHub
    /// VP8's temporal layers (1 or 2).
    private let temporalLayers: Int
    private let logger: Logger
    private let onError: @Sendable (PublisherError) -> Void
    private let onCaptureEvent: @Sendable (CaptureEvent) -> Void
    /// The encoded picture's size, each time it changes (the first encoder, a new mode, another camera).
    private let onEncodedSize: @Sendable (FrameSize) -> Void
    /// What the answer sets; read on every frame.
    private let control = PThreadLocked<(codec: VideoCodec, framesPerSecond: Double)>((.vp8, 30))
    private let counters = PThreadLocked(Counts())
    /// The capture thread's newest frame, waiting for the encoder.
    private let slot = PThreadLocked<VideoFrame?>(nil)
    private let signal = StopSignal()
    private let thread = PThreadLocked<StoppableThread?>(nil)

    /// One encoded size's encoders and payloaders (a simulcast layer).
    private struct LayerEncoders {
        var vp8: VP8Encoder?
        var h264: H264Encoder?
        var vp8Payloader = VP8Payloader(firstPictureID: .random(in: 0...0x7fff))
        var h264Payloader = H264Payloader()
    }

    /// Whether each frame is encoded a second time at half size (layer 0).
    private let simulcast: Bool

    // Encoder-thread state.
    /// The captured size (the only one without simulcast; layer 1 with it).
    private var full = LayerEncoders()
    /// Half the size, with simulcast.
    private var small = LayerEncoders()
    /// The half-size picture, reused; made again when the size changes.
    private var smallPicture: VideoFrame?
    private var batch = PayloadBatch()
    private var failed = false
    /// Where pixels are turned or their range converted; made on first need.
    private var prepared: VideoFrame?
    private var rotator: PixelRotator?
    private var reportedSize: FrameSize?

    init(hub: MediaHub, codec: VideoCodec, framesPerSecond: Double, temporalLayers: Int = 1, simulcast: Bool = false,
         logger: Logger,
         onError: @escaping @Sendable (PublisherError) -> Void,
         onEncodedSize: @escaping @Sendable (FrameSize) -> Void = { _ in },
         onCaptureEvent: @escaping @Sendable (CaptureEvent) -> Void = { _ in }) {
        self.hub = hub
        self.temporalLayers = temporalLayers
        self.simulcast = simulcast
        self.logger = logger
        self.onError = onError
        self.onEncodedSize = onEncodedSize
        self.onCaptureEvent = onCaptureEvent
        control.withLock { $0 = (codec, framesPerSecond) }
    }

    func configure(codec: VideoCodec) { control.withLock { $0.codec = codec } }
    var codec: VideoCodec { control.withLock { $0.codec } }
    var frameCounts: Counts { counters.withLock { $0 } }

    /// Starts the encoder thread.
    func start() {
        thread.withLock { t in
            guard t == nil else { return }
            t = StoppableThread(name: "camagent-encode", signal: signal) { [self] signal in runEncoder(signal) }
        }
    }

    /// Stops the encoder thread (a frame being encoded is finished first).
    func stop() {
        thread.withLock { $0 }?.stop()
        slot.withLock { $0 = nil }
    }

    // MARK: The capture thread's side

    func consume(_ frame: VideoFrame) {
        let replaced = slot.withLock { s -> Bool in
            defer { s = frame }
            return s != nil
        }
        if replaced { counters.withLock { $0.droppedEncoderBusy += 1 } }
        signal.wakeUp()
    }

    func captureEvent(_ event: CaptureEvent) {
        onCaptureEvent(event)
    }

    // MARK: The encoder thread

    private func runEncoder(_ signal: StopSignal) {
        while !signal.isStopRequested {
            signal.wait(milliseconds: 500)
            while !signal.isStopRequested, let frame = slot.withLock({ s in defer { s = nil }; return s }) {
                encode(frame)
            }
        }
    }

    private func encode(_ frame: VideoFrame) {
        guard !failed else { return }
        guard let plan = hub.planVideoFrame(now: .now()) else {
            counters.withLock { $0.notWatched += 1 }
            return
        }
        let (codec, fps) = control.withLock { ($0.codec, $0.framesPerSecond) }
        // Mirroring has no CVO bit that browsers honour: it is always done in pixels.
        let turnPixels = !frame.orientation.isUpright && (!plan.orientationAsMetadata || frame.orientation.mirrored)
        let orientationByte = turnPixels ? 0 : Self.cvoByte(frame.orientation.rotation)
        let picture = prepare(frame, turnPixels: turnPixels)
        let timestamp = hub.rtpTimestamp(.video, at: frame.timestamp)
        do throws(CodecError) {
            guard simulcast else {
                try encode(picture, layer: nil, with: &full, codec: codec, fps: fps, bitrate: plan.bitrate,
                           keyframe: plan.keyframe, timestamp: timestamp, orientation: orientationByte)
                counters.withLock { $0.encoded += 1 }
                return
            }
            // The small layer takes a fifth of the room, the captured size the rest. Each
            // makes a keyframe only when one of its own is asked for.
            let smallBitrate = max(plan.bitrate / 5, 60_000)
            try encode(picture, layer: 1, with: &full, codec: codec, fps: fps,
                       bitrate: max(plan.bitrate - smallBitrate, 100_000), keyframe: plan.keyframe(layer: 1),
                       timestamp: timestamp, orientation: orientationByte)
            let half = halfSize(of: picture)
            NV12Conversion.halve(picture, into: half)
            half.timestamp = picture.timestamp
            half.sequence = picture.sequence
            try encode(half, layer: 0, with: &small, codec: codec, fps: fps, bitrate: smallBitrate,
                       keyframe: plan.keyframe(layer: 0), timestamp: timestamp, orientation: orientationByte)
            counters.withLock { $0.encoded += 1 }
        } catch {
            failed = true
            onError(.encoder(error))
        }
    }

    /// The picture to encode: the frame itself, or the frame turned and/or
    /// brought to limited range in the pipeline's own frame (reused; made
    /// again only for a larger picture).
    private func prepare(_ frame: VideoFrame, turnPixels: Bool) -> VideoFrame {
        guard turnPixels || frame.isFullRange else { return frame }
        let side = max(frame.width, frame.height)
        if prepared.map({ $0.capacity < VideoFrame.byteCount(of: .nv12(width: side, height: side, framesPerSecond: 0)) }) ?? true {
            prepared = VideoFrame(maxWidth: side, maxHeight: side)
            rotator = PixelRotator(maxWidth: side, maxHeight: side)
        }
        guard let prepared, let rotator else { return frame }
        var source = frame
        if turnPixels {
            rotator.apply(frame.orientation, from: frame, into: prepared)
            source = prepared
        }
        if frame.isFullRange { RangeConversion.fullToLimited(source, into: prepared) }
        prepared.timestamp = frame.timestamp
        prepared.sequence = frame.sequence
        return prepared
    }

    /// The pipeline's half-size picture for `picture`, made again only when the size changes.
    private func halfSize(of picture: VideoFrame) -> VideoFrame {
        let size = PublisherSettings.simulcastSmallSize(of: FrameSize(width: picture.width, height: picture.height))
        let (width, height) = (size.width, size.height)
        if let smallPicture, smallPicture.width == width, smallPicture.height == height { return smallPicture }
        let made = VideoFrame(maxWidth: width, maxHeight: height)
        made.setFormat(.nv12(width: width, height: height, framesPerSecond: 0))
        smallPicture = made
        return made
    }

    /// One frame through the answer's codec, for one layer (nil: no simulcast).
    private func encode(_ picture: VideoFrame, layer: UInt8?, with encoders: inout LayerEncoders, codec: VideoCodec,
                        fps: Double, bitrate: Int, keyframe: Bool, timestamp: UInt32, orientation: UInt8) throws(CodecError) {
        let size = FrameSize(width: picture.width, height: picture.height)
        let layers = temporalLayers
        switch codec {
        case .vp8:
            try encode(picture, with: &encoders.vp8, payloader: &encoders.vp8Payloader, size: size, layer: layer,
                       target: bitrate, keyframe: keyframe, timestamp: timestamp, orientation: orientation) { () throws(CodecError) in
                try VP8Encoder(size: size, framesPerSecond: fps, bitrateKbps: bitrate / 1000, temporalLayers: layers)
            }
        case .h264:
            try encode(picture, with: &encoders.h264, payloader: &encoders.h264Payloader, size: size, layer: layer,
                       target: bitrate, keyframe: keyframe, timestamp: timestamp, orientation: orientation) { () throws(CodecError) in
                try H264Encoder(size: size, framesPerSecond: fps, bitrateKbps: bitrate / 1000)
            }
        }
    }

    /// The CVO byte's rotation bits (3GPP TS 26.114 as WebRTC reads them):
    /// how far to turn the picture clockwise to show it upright.
    static func cvoByte(_ rotation: VideoOrientation.Rotation) -> UInt8 {
        switch rotation {
        case .none: 0
        case .clockwise90: 1
        case .upsideDown: 2
        case .clockwise270: 3
        }
    }

    /// One frame through one codec: the encoder is (re)made when the frame
    /// size changes, follows the bitrate target when it moves by over 5 %,
    /// and each encoded frame is cut once and handed to every connection.
    private func encode<E: VideoFrameEncoder, P: RTPPayloader>(
        _ frame: VideoFrame, with encoder: inout E?, payloader: inout P, size: FrameSize, layer: UInt8?, target: Int,
        keyframe: Bool, timestamp: UInt32, orientation: UInt8, make: () throws(CodecError) -> E
    ) throws(CodecError) {
        if encoder?.size != size {
            encoder = try make()
            logger.info("\(E.codecName) encoder: \(size) at \(target / 1000) kbps\(layer.map { " (simulcast layer \($0))" } ?? "")")
            // A codec switch remakes the encoder at the same size: not news. The small layer is not the stream's size.
            if layer != 0, reportedSize != size {
                reportedSize = size
                onEncodedSize(size)
            }
        }
        guard let encoder else { return }
        let spatialLayer = layer ?? 0
        if abs(encoder.bitrateKbps - target / 1000) * 20 > encoder.bitrateKbps { try encoder.setBitrate(kbps: target / 1000) }
        try encoder.encode(frame, forceKeyframe: keyframe) { encoded in
            let temporal = encoder.temporalLayers > 1 ? encoded.temporalLayer : nil
            batch.fill(encoded.bytes, payloader: &payloader, maxPayloadSize: MediaSenders.maxPayloadSize, temporalLayer: temporal)
            hub.send(batch, kind: .video, rtpTimestamp: timestamp, isKeyframe: encoded.isKeyframe, orientation: orientation,
                     temporalLayer: temporal ?? 0, spatialLayer: spatialLayer,
                     keyframeSize: encoded.isKeyframe ? size : nil)
        }
    }
}

/// What `VideoPipeline` needs of a video encoder; VP8Encoder and
/// H264Encoder have this shape already.
protocol VideoFrameEncoder: AnyObject {
    static var codecName: String { get }
    var size: FrameSize { get }
    var bitrateKbps: Int { get }
    /// 1, or 2 when every other frame may be left out (VP8 only).
    var temporalLayers: Int { get }
    func setBitrate(kbps: Int) throws(CodecError)
    func encode(_ frame: VideoFrame, forceKeyframe: Bool, _ output: (EncodedVideoFrame) -> Void) throws(CodecError)
}

extension VP8Encoder: VideoFrameEncoder { static var codecName: String { "VP8" } }
extension H264Encoder: VideoFrameEncoder {
    static var codecName: String { "H.264" }
    /// RFC 6184 has no place for a frame's layer: one layer.
    var temporalLayers: Int { 1 }
}

/// Encodes captured audio into 20 ms Opus packets on the audio thread, once
/// for every connection and only while someone receives audio. RTP
/// time counts samples from the first packet's capture time, so packets are
/// exactly 960 ticks apart; it is re-anchored to the capture clock only when
/// the two drift apart by more than a packet (an overrun lost samples).
final class AudioPipeline: AudioCaptureConsumer, @unchecked Sendable {   // encoder state: audio thread only
    private let hub: MediaHub
    private let encoder: OpusEncoder
    private let logger: Logger
    private let onError: @Sendable (PublisherError) -> Void
    /// The microphone's loss and return (with reconnection on), as publisher events.
    private let onDeviceEvent: @Sendable (PublisherEvent) -> Void
    private let failed = PThreadLocked(false)
    private var payloader = OpusPayloader()
    private var batch = PayloadBatch()
    private let frame: UnsafeMutableBufferPointer<Int16>
    private var filled = 0
    private var frameStart = MonotonicTimestamp.zero
    private var nextTimestamp: UInt32?
    private(set) var framesEncoded: UInt64 = 0
    /// Takes every Opus packet besides the connections (captions of the publisher's own stream).
    let tap = PThreadLocked<(any EncodedAudioTap)?>(nil)

    init(hub: MediaHub, format: AudioFormat, bitrate: Int, logger: Logger,
         onError: @escaping @Sendable (PublisherError) -> Void,
         onDeviceEvent: @escaping @Sendable (PublisherEvent) -> Void = { _ in }) throws(CodecError) {
        self.hub = hub
        self.logger = logger
        self.onError = onError
        self.onDeviceEvent = onDeviceEvent
        encoder = try OpusEncoder(channels: format.channels, bitrate: bitrate)
        frame = .allocate(capacity: encoder.frameSamples * format.channels)
        frame.initialize(repeating: 0)
    }

    deinit { frame.deallocate() }

    func consume(_ chunk: AudioChunk) {
        // Encoded for the connections, or for the tap alone when nobody watches; not at all
        // while audio is not published (a muted microphone is not captioned either).
        guard !failed.withLock({ $0 }), hub.isPublishing(.audio), hub.wants(.audio) || tap.withLock({ $0 != nil }) else {
            filled = 0
            nextTimestamp = nil
            return
        }
        var offset = 0
        while offset < chunk.samples.count {
            if filled == 0 { frameStart = chunk.timestamp }
            let n = min(frame.count - filled, chunk.samples.count - offset)
            _ = UnsafeMutableBufferPointer(rebasing: frame[filled..<(filled + n)])
                .initialize(from: UnsafeBufferPointer(rebasing: chunk.samples[offset..<(offset + n)]))
            filled += n
            offset += n
            if filled == frame.count { encodeFrame() }
        }
    }

    private func encodeFrame() {
        filled = 0
        let fromClock = hub.rtpTimestamp(.audio, at: frameStart)
        var timestamp = nextTimestamp ?? fromClock
        let drift = Int32(bitPattern: fromClock &- timestamp)
        if abs(drift) > Int32(encoder.frameSamples) { timestamp = fromClock }
        nextTimestamp = timestamp &+ UInt32(encoder.frameSamples)
        do {
            let tap = tap.withLock { $0 }
            try encoder.encode(UnsafeBufferPointer(frame)) { packet in
                tap?.received(opusPayload: packet)
                batch.fill(packet, payloader: &payloader, maxPayloadSize: MediaSenders.maxPayloadSize)
                hub.send(batch, kind: .audio, rtpTimestamp: timestamp, isKeyframe: false)
            }
            framesEncoded += 1
        } catch {
            failed.withLock { $0 = true }
            onError(.encoder(error))
        }
    }

    func audioEvent(_ event: AudioEvent) {
        switch event {
        case .failed(let e): onError(.audio(e))
        case .xrunRecovered: logger.info("audio: \(event)")
        case .deviceLost(_, let reason): onDeviceEvent(.deviceLost(kind: .audio, reason: reason))
        case .deviceRestored(_, let description):
            // Samples were missing: RTP time is taken from the capture clock again.
            nextTimestamp = nil
            onDeviceEvent(.deviceRestored(kind: .audio, description: description))
        }
    }
}
