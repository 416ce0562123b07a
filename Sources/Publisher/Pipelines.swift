import AudioDevices
import Encoders
import Logging
import MediaTypes
import RTP
import Synchronization

/// Encodes captured video and hands it to the RTP sender, on the capture
/// thread (a capturer delivers its newest frame, so a slow encoder skips
/// frames instead of queueing them). The encoder is made on the first frame,
/// at the size the camera really delivers, for the codec the answer chose.
final class VideoPipeline: VideoCaptureConsumer, @unchecked Sendable {   // encoder state: capture thread only
    private let media: MediaSenders
    private let stream: Int
    private let logger: Logger
    private let onError: @Sendable (PublisherError) -> Void
    /// What the transport and the answer set; read on every frame.
    private let control = Mutex<(sending: Bool, codec: VideoCodec, framesPerSecond: Double)>((false, .vp8, 30))

    private var vp8: VP8Encoder?
    private var h264: H264Encoder?
    private var vp8Payloader = VP8Payloader(firstPictureID: .random(in: 0...0x7fff))
    private var h264Payloader = H264Payloader()
    private var failed = false

    init(media: MediaSenders, stream: Int, framesPerSecond: Double, logger: Logger,
         onError: @escaping @Sendable (PublisherError) -> Void) {
        self.media = media
        self.stream = stream
        self.logger = logger
        self.onError = onError
        control.withLock { $0.framesPerSecond = framesPerSecond }
    }

    func configure(codec: VideoCodec) { control.withLock { $0.codec = codec } }
    func setSending(_ on: Bool) { control.withLock { $0.sending = on } }

    func consume(_ frame: VideoFrame) {
        let (sending, codec, fps) = control.withLock { ($0.sending, $0.codec, $0.framesPerSecond) }
        guard sending, !failed else { return }
        let (keyframe, target) = media.state.withLock { s in
            defer { s.keyframeRequested = false }
            return (s.keyframeRequested, s.bitrate.target)
        }
        let size = FrameSize(width: frame.width, height: frame.height)
        let timestamp = media.rtpTimestamp(stream: stream, at: frame.timestamp)
        do throws(CodecError) {
            switch codec {
            case .vp8:
                if vp8?.size != size {
                    vp8 = try VP8Encoder(size: size, framesPerSecond: fps, bitrateKbps: target / 1000)
                    logger.info("VP8 encoder: \(size) at \(target / 1000) kbps")
                }
                guard let encoder = vp8 else { return }
                if abs(encoder.bitrateKbps - target / 1000) * 20 > encoder.bitrateKbps { try encoder.setBitrate(kbps: target / 1000) }
                try encoder.encode(frame, forceKeyframe: keyframe) { encoded in
                    media.send(encoded.bytes, stream: stream, rtpTimestamp: timestamp, isKeyframe: encoded.isKeyframe,
                               payloader: &vp8Payloader)
                }
            case .h264:
                if h264?.size != size {
                    h264 = try H264Encoder(size: size, framesPerSecond: fps, bitrateKbps: target / 1000)
                    logger.info("H.264 encoder: \(size) at \(target / 1000) kbps")
                }
                guard let encoder = h264 else { return }
                if abs(encoder.bitrateKbps - target / 1000) * 20 > encoder.bitrateKbps { try encoder.setBitrate(kbps: target / 1000) }
                try encoder.encode(frame, forceKeyframe: keyframe) { encoded in
                    media.send(encoded.bytes, stream: stream, rtpTimestamp: timestamp, isKeyframe: encoded.isKeyframe,
                               payloader: &h264Payloader)
                }
            }
        } catch {
            failed = true
            onError(.encoder(error))
        }
    }

    func captureEvent(_ event: CaptureEvent) {
        switch event {
        case .failed(let e), .deviceLost(let e): onError(.video(e))
        default: logger.notice("video: \(event)")
        }
    }
}

/// Encodes captured audio into 20 ms Opus packets on the audio thread. RTP
/// time counts samples from the first packet's capture time, so packets are
/// exactly 960 ticks apart; it is re-anchored to the capture clock only when
/// the two drift apart by more than a packet (an overrun lost samples).
final class AudioPipeline: AudioCaptureConsumer, @unchecked Sendable {   // encoder state: audio thread only
    private let media: MediaSenders
    private let stream: Int
    private let encoder: OpusEncoder
    private let logger: Logger
    private let onError: @Sendable (PublisherError) -> Void
    private let sending = Mutex(false)
    private var payloader = OpusPayloader()
    private let frame: UnsafeMutableBufferPointer<Int16>
    private var filled = 0
    private var frameStart = MonotonicTimestamp.zero
    private var nextTimestamp: UInt32?
    private(set) var framesEncoded: UInt64 = 0

    init(media: MediaSenders, stream: Int, format: AudioFormat, bitrate: Int, logger: Logger,
         onError: @escaping @Sendable (PublisherError) -> Void) throws(CodecError) {
        self.media = media
        self.stream = stream
        self.logger = logger
        self.onError = onError
        encoder = try OpusEncoder(channels: format.channels, bitrate: bitrate)
        frame = .allocate(capacity: encoder.frameSamples * format.channels)
        frame.initialize(repeating: 0)
    }

    deinit { frame.deallocate() }

    func setSending(_ on: Bool) { sending.withLock { $0 = on } }

    func consume(_ chunk: AudioChunk) {
        guard sending.withLock({ $0 }) else {
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
        let fromClock = media.rtpTimestamp(stream: stream, at: frameStart)
        var timestamp = nextTimestamp ?? fromClock
        let drift = Int32(bitPattern: fromClock &- timestamp)
        if abs(drift) > Int32(encoder.frameSamples) { timestamp = fromClock }
        nextTimestamp = timestamp &+ UInt32(encoder.frameSamples)
        do {
            try encoder.encode(UnsafeBufferPointer(frame)) { packet in
                media.send(packet, stream: stream, rtpTimestamp: timestamp, isKeyframe: false, payloader: &payloader)
            }
            framesEncoded += 1
        } catch {
            sending.withLock { $0 = false }
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
