import AudioDevices
import Encoders
import Logging
import MediaTypes
import RTP
import Synchronization

/// Encodes captured video once for every connection, on the capture thread
/// (a capturer delivers its newest frame, so a slow encoder skips frames
/// instead of queueing them), and only while someone receives video. The
/// encoder is made on the first frame, at the size the camera really
/// delivers, for the codec in use.
final class VideoPipeline: VideoCaptureConsumer, @unchecked Sendable {   // encoder state: capture thread only
    private let hub: MediaHub
    private let logger: Logger
    private let onError: @Sendable (PublisherError) -> Void
    /// What the answer sets; read on every frame.
    private let control = Mutex<(codec: VideoCodec, framesPerSecond: Double)>((.vp8, 30))
    private let counters = Mutex<(encoded: UInt64, skipped: UInt64)>((0, 0))

    private var vp8: VP8Encoder?
    private var h264: H264Encoder?
    private var vp8Payloader = VP8Payloader(firstPictureID: .random(in: 0...0x7fff))
    private var h264Payloader = H264Payloader()
    private var batch = PayloadBatch()
    private var failed = false

    init(hub: MediaHub, codec: VideoCodec, framesPerSecond: Double, logger: Logger,
         onError: @escaping @Sendable (PublisherError) -> Void) {
        self.hub = hub
        self.logger = logger
        self.onError = onError
        control.withLock { $0 = (codec, framesPerSecond) }
    }

    func configure(codec: VideoCodec) { control.withLock { $0.codec = codec } }
    var codec: VideoCodec { control.withLock { $0.codec } }
    /// Frames encoded, and frames captured while nobody received video.
    var frameCounts: (encoded: UInt64, skipped: UInt64) { counters.withLock { $0 } }

    func consume(_ frame: VideoFrame) {
        guard !failed else { return }
        guard hub.wants(.video) else {
            counters.withLock { $0.skipped += 1 }
            return
        }
        let (codec, fps) = control.withLock { ($0.codec, $0.framesPerSecond) }
        let keyframe = hub.takeKeyframeRequest(now: .now())
        let target = hub.videoBitrateTarget()
        let size = FrameSize(width: frame.width, height: frame.height)
        let timestamp = hub.rtpTimestamp(.video, at: frame.timestamp)
        do throws(CodecError) {
            switch codec {
            case .vp8:
                try encode(frame, with: &vp8, payloader: &vp8Payloader, size: size, target: target, keyframe: keyframe,
                           timestamp: timestamp) { () throws(CodecError) in
                    try VP8Encoder(size: size, framesPerSecond: fps, bitrateKbps: target / 1000)
                }
            case .h264:
                try encode(frame, with: &h264, payloader: &h264Payloader, size: size, target: target, keyframe: keyframe,
                           timestamp: timestamp) { () throws(CodecError) in
                    try H264Encoder(size: size, framesPerSecond: fps, bitrateKbps: target / 1000)
                }
            }
            counters.withLock { $0.encoded += 1 }
        } catch {
            failed = true
            onError(.encoder(error))
        }
    }

    /// One frame through one codec: the encoder is (re)made when the frame
    /// size changes, follows the bitrate target when it moves by over 5 %,
    /// and each encoded frame is cut once and handed to every connection.
    private func encode<E: VideoFrameEncoder, P: RTPPayloader>(
        _ frame: VideoFrame, with encoder: inout E?, payloader: inout P, size: FrameSize, target: Int, keyframe: Bool,
        timestamp: UInt32, make: () throws(CodecError) -> E
    ) throws(CodecError) {
        if encoder?.size != size {
            encoder = try make()
            logger.info("\(E.codecName) encoder: \(size) at \(target / 1000) kbps")
        }
        guard let encoder else { return }
        if abs(encoder.bitrateKbps - target / 1000) * 20 > encoder.bitrateKbps { try encoder.setBitrate(kbps: target / 1000) }
        try encoder.encode(frame, forceKeyframe: keyframe) { encoded in
            batch.fill(encoded.bytes, payloader: &payloader, maxPayloadSize: MediaSenders.maxPayloadSize)
            hub.send(batch, kind: .video, rtpTimestamp: timestamp, isKeyframe: encoded.isKeyframe)
        }
    }

    func captureEvent(_ event: CaptureEvent) {
        switch event {
        case .failed(let e), .deviceLost(let e): onError(.video(e))
        default: logger.notice("video: \(event)")
        }
    }
}

/// What `VideoPipeline` needs of a video encoder; VP8Encoder and
/// H264Encoder have this shape already.
protocol VideoFrameEncoder: AnyObject {
    static var codecName: String { get }
    var size: FrameSize { get }
    var bitrateKbps: Int { get }
    func setBitrate(kbps: Int) throws(CodecError)
    func encode(_ frame: VideoFrame, forceKeyframe: Bool, _ output: (EncodedVideoFrame) -> Void) throws(CodecError)
}

extension VP8Encoder: VideoFrameEncoder { static var codecName: String { "VP8" } }
extension H264Encoder: VideoFrameEncoder { static var codecName: String { "H.264" } }

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
    private let failed = Mutex(false)
    private var payloader = OpusPayloader()
    private var batch = PayloadBatch()
    private let frame: UnsafeMutableBufferPointer<Int16>
    private var filled = 0
    private var frameStart = MonotonicTimestamp.zero
    private var nextTimestamp: UInt32?
    private(set) var framesEncoded: UInt64 = 0

    init(hub: MediaHub, format: AudioFormat, bitrate: Int, logger: Logger,
         onError: @escaping @Sendable (PublisherError) -> Void) throws(CodecError) {
        self.hub = hub
        self.logger = logger
        self.onError = onError
        encoder = try OpusEncoder(channels: format.channels, bitrate: bitrate)
        frame = .allocate(capacity: encoder.frameSamples * format.channels)
        frame.initialize(repeating: 0)
    }

    deinit { frame.deallocate() }

    func consume(_ chunk: AudioChunk) {
        guard !failed.withLock({ $0 }), hub.wants(.audio) else {
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
            try encoder.encode(UnsafeBufferPointer(frame)) { packet in
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
        }
    }
}
