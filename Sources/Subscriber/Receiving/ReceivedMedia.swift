import Encoders
import Logging
import MediaTypes
import Publisher
import RTP
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A subscriber's receive path, on the connection's thread: each decrypted
/// RTP packet is told apart by payload type; video goes through the jitter
/// buffer to its decoder, audio through play order to Opus (with loss
/// concealment); decoded media goes to the renderers. NACKs and keyframe
/// requests go back at once, receiver reports and REMB about once a second.
///
/// Decoding runs on the connection's thread: a 720p VP8 frame takes a few
/// milliseconds, well within a frame interval; the buffers (slots, frame
/// bytes, picture, PCM) are allocated once.
final class ReceivedMedia: ReceivedRTPSink, @unchecked Sendable {   // receive state: the connection thread only
    struct Negotiated: Sendable {
        var audioPayloadType: UInt8?
        var audioCodec = ""
        var videoPayloadType: UInt8?
        var videoCodec: VideoJitterBuffer.Codec?
        var videoCodecName = ""
    }

    /// The SSRC this receiver's RTCP goes out under.
    let localSSRC = UInt32.random(in: 1...UInt32.max)
    private let videoRenderer: (any VideoRenderer)?
    private let audioRenderer: (any AudioRenderer)?
    private let maxBitrate: Int
    private let logger: Logger
    private let onEvent: @Sendable (SubscriberEvent) -> Void

    // Shared with the subscriber's other threads.
    private let published = PThreadLocked<(video: VideoReceiveStats?, audio: AudioReceiveStats?, failure: RenderError?, lastPacket: Double)>(
        (nil, nil, nil, 0))
    /// subscribeToVideo / subscribeToAudio: read per packet, set from any thread.
    let decodeVideo = Atomic<Bool>(true)
    let decodeAudio = Atomic<Bool>(true)
    /// Set when video is turned back on: decoding starts again at a keyframe.
    let restartVideo = Atomic<Bool>(false)

    // The connection thread's state.
    private var negotiated = Negotiated()
    private var jitter: VideoJitterBuffer?
    private var vp8: VP8Decoder?
    private var h264: H264Decoder?
    private var picture = VideoFrame(maxWidth: 1920, maxHeight: 1088)
    private var frameBytes: [UInt8] = []
    private var opus: OpusDecoder?
    private let pcm: UnsafeMutableBufferPointer<Int16>
    private var lastPacketSamples = 960
    private var playout = AudioPlayout()
    private var videoReception: ReceptionCounter?
    private var audioReception: ReceptionCounter?
    private var requests = FeedbackRequests()
    private var video = VideoReceiveStats()
    private var audio = AudioReceiveStats()
    /// Each stream's last sender report: its RTP timestamp at an NTP (wall
    /// clock) time, which places every packet on the sender's clock.
    private var videoClock: (ntp: Double, rtp: UInt32)?
    private var audioClock: (ntp: Double, rtp: UInt32)?

    init(video: (any VideoRenderer)?, audio: (any AudioRenderer)?, maxBitrate: Int, logger: Logger,
         onEvent: @escaping @Sendable (SubscriberEvent) -> Void) {
        videoRenderer = video
        audioRenderer = audio
        self.maxBitrate = maxBitrate
        self.logger = logger
        self.onEvent = onEvent
        // 120 ms at 48 kHz, stereo: Opus's longest packet.
        pcm = .allocate(capacity: 5760 * 2)
        pcm.initialize(repeating: 0)
        frameBytes.reserveCapacity(1 << 20)
    }

    deinit { pcm.deallocate() }

    /// A new connection's codecs: the receive state starts over (new SSRCs
    /// and sequence numbers); decoders and renderers carry on.
    func configure(_ negotiated: Negotiated) throws(SubscriberError) {
        self.negotiated = negotiated
        jitter = negotiated.videoCodec.map { VideoJitterBuffer(codec: $0) }
        playout.reset()
        videoReception = nil
        audioReception = nil
        do {
            switch negotiated.videoCodec {
            case .vp8?: if vp8 == nil { vp8 = try VP8Decoder() }
            case .h264?: if h264 == nil { h264 = try H264Decoder() }
            case nil: break
            }
            if negotiated.audioPayloadType != nil, opus == nil {
                opus = try OpusDecoder(channels: audioRenderer?.channels ?? 1)
            }
        } catch {
            throw .badAnswer("decoder: \(error)")
        }
        video.codec = negotiated.videoCodecName
        audio.codec = negotiated.audioCodec
        publish()
    }

    var stats: (video: VideoReceiveStats?, audio: AudioReceiveStats?) {
        published.withLock { ($0.video, $0.audio) }
    }

    /// A renderer's failure: the subscriber stops with it.
    var failure: RenderError? { published.withLock { $0.failure } }

    /// When the last packet arrived (monotonic seconds; 0: none yet).
    var lastPacketAt: Double { published.withLock { $0.lastPacket } }

    func finishRenderers() throws(RenderError) {
        try videoRenderer?.finish()
        try audioRenderer?.finish()
    }

    // MARK: ReceivedRTPSink (the connection thread)

    func receive(rtp packet: ArraySlice<UInt8>, now: Double, feedback: inout [RTCPPacket]) {
        guard let view = try? RTPPacketView(parsing: packet) else { return }
        if view.payloadType == negotiated.videoPayloadType {
            receiveVideo(view, packet, now: now)
        } else if view.payloadType == negotiated.audioPayloadType {
            receiveAudio(view, packet, now: now)
        } else {
            return
        }
        if !requests.isEmpty, let ssrc = videoReception?.ssrc {
            feedback.append(.receiverReport(ssrc: localSSRC, reports: []))
            if !requests.nacks.isEmpty {
                feedback.append(.nack(sender: localSSRC, media: ssrc, lost: requests.nacks))
                video.nacksSent += UInt64(requests.nacks.count)
            }
            if requests.keyframe {
                feedback.append(.pictureLossIndication(sender: localSSRC, media: ssrc))
                video.keyframeRequestsSent += 1
            }
        }
        requests.clear()
        publish(lastPacket: now)
    }

    func receiverReports() -> [RTCPPacket] {
        let now = MonotonicTimestamp.now().seconds
        var blocks: [ReceptionReport] = []
        if let block = audioReception?.report(now: now) { blocks.append(block) }
        if let block = videoReception?.report(now: now) { blocks.append(block) }
        guard !blocks.isEmpty else { return [] }
        var packets: [RTCPPacket] = [.receiverReport(ssrc: localSSRC, reports: blocks)]
        if let ssrc = videoReception?.ssrc {
            packets.append(.estimatedMaximumBitrate(sender: localSSRC, bitsPerSecond: UInt64(maxBitrate), ssrcs: [ssrc]))
        }
        return packets
    }

    func receive(rtcp packets: [RTCPPacket], now: Double) {
        for case .senderReport(let report) in packets {
            // NTP seconds since 1900 → ms since 1970.
            let unixMilliseconds = (Double(report.ntpTimestamp >> 32) - 2_208_988_800
                                    + Double(report.ntpTimestamp & 0xFFFF_FFFF) / 4_294_967_296) * 1000
            let summary = SenderReportSummary(packetsSent: report.packetCount, bytesSent: report.octetCount,
                                              remoteTimestamp: unixMilliseconds)
            let ntp = unixMilliseconds / 1000
            if report.ssrc == videoReception?.ssrc {
                videoReception?.noteSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: now)
                video.sender = summary
                videoClock = (ntp, report.rtpTimestamp)
            } else if report.ssrc == audioReception?.ssrc {
                audioReception?.noteSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: now)
                audio.sender = summary
                audioClock = (ntp, report.rtpTimestamp)
            }
        }
        publish()
    }

    // MARK: Video

    private func receiveVideo(_ view: RTPPacketView, _ packet: ArraySlice<UInt8>, now: Double) {
        if videoReception?.ssrc != view.ssrc {
            videoReception = ReceptionCounter(ssrc: view.ssrc, firstSequence: view.sequenceNumber)
            video.ssrc = view.ssrc
            video.sender = nil
            if let codec = negotiated.videoCodec { jitter = VideoJitterBuffer(codec: codec) }
        }
        videoReception?.count(sequence: view.sequenceNumber)
        videoReception?.noteArrival(timestamp: view.timestamp, arrival: now, clockRate: 90_000)
        video.packetsReceived += 1
        video.bytesReceived += UInt64(view.payload.count)
        guard jitter != nil else { return }
        let decoding = decodeVideo.load(ordering: .relaxed)
        if restartVideo.exchange(false, ordering: .relaxed) {
            jitter?.decodeFailed(now: now, feedback: &requests)   // what follows a gap needs a keyframe
        }
        jitter!.insert(view, bytes: packet, now: now, feedback: &requests)
        while let frame = jitter!.nextFrame(into: &frameBytes, now: now, feedback: &requests) {
            guard decoding else { continue }
            decode(frame, now: now)
        }
        let counters = jitter!.counters
        video.framesDropped = counters.framesDropped
        video.retransmissionsReceived = counters.recovered
    }

    private func decode(_ frame: VideoJitterBuffer.Frame, now: Double) {
        if frame.isKeyframe, negotiated.videoCodec == .vp8,
           let (width, height) = KeyframeInspection.vp8KeyframeSize(frameBytes[...]),
           VideoFrame.byteCount(of: .nv12(width: width, height: height, framesPerSecond: 0)) > picture.capacity {
            picture = VideoFrame(maxWidth: width, maxHeight: height)   // a bigger stream: once per size
        }
        let previous = (video.width, video.height)
        // Without a renderer the picture stays in the decoder: no NV12 conversion.
        let target = videoRenderer == nil ? nil : picture
        var size: FrameSize?
        do {
            size = try frameBytes.withUnsafeBytes { bytes in
                switch negotiated.videoCodec {
                case .vp8?: try vp8?.decode(bytes, into: target)
                case .h264?: try h264?.decode(bytes, into: target)
                case nil: nil
                }
            }
        } catch {
            video.decodeErrors += 1
            logger.debug("video frame \(frame.timestamp) not decoded: \(error)")
            jitter?.decodeFailed(now: now, feedback: &requests)
            return
        }
        video.framesDecoded += 1
        if let delay = Self.delay(since: frame.timestamp, clock: videoClock, rate: 90_000) {
            video.senderToRenderDelay = Self.smoothed(video.senderToRenderDelay, delay)
        }
        if frame.isKeyframe { video.keyframesDecoded += 1 }
        if let size, (size.width, size.height) != previous {
            video.width = size.width
            video.height = size.height
            onEvent(.videoDimensions(width: size.width, height: size.height))
        }
        guard let videoRenderer else { return }
        do { try videoRenderer.render(picture) } catch { fail(error) }
    }

    // MARK: Audio

    private func receiveAudio(_ view: RTPPacketView, _ packet: ArraySlice<UInt8>, now: Double) {
        if audioReception?.ssrc != view.ssrc {
            audioReception = ReceptionCounter(ssrc: view.ssrc, firstSequence: view.sequenceNumber)
            audio.ssrc = view.ssrc
            audio.sender = nil
            playout.reset()
        }
        audioReception?.count(sequence: view.sequenceNumber)
        audioReception?.noteArrival(timestamp: view.timestamp, arrival: now, clockRate: 48_000)
        audio.packetsReceived += 1
        audio.bytesReceived += UInt64(view.payload.count)
        guard let opus else { return }
        let concealing: Int
        switch playout.arrange(sequence: view.sequenceNumber) {
        case .late, .duplicate:
            audio.latePackets += 1
            return
        case .play(let count): concealing = count
        }
        guard decodeAudio.load(ordering: .relaxed) else { return }
        do {
            for _ in 0..<concealing {
                let n = try opus.conceal(samplesPerChannel: lastPacketSamples, into: pcm)
                audio.samplesConcealed += UInt64(n)
                try render(samples: n * opus.channels)
            }
            let n = try packet[view.payload].withUnsafeBytes { bytes in try opus.decode(bytes, into: pcm) }
            lastPacketSamples = n
            if let delay = Self.delay(since: view.timestamp, clock: audioClock, rate: 48_000) {
                audio.senderToRenderDelay = Self.smoothed(audio.senderToRenderDelay, delay + (audioRenderer?.latency ?? 0))
            }
            audio.samplesDecoded += UInt64(n)
            try render(samples: n * opus.channels)
        } catch let error as RenderError {
            fail(error)
        } catch {
            logger.debug("audio packet \(view.sequenceNumber) not decoded: \(error)")
        }
    }

    private func render(samples: Int) throws(RenderError) {
        try audioRenderer?.render(UnsafeBufferPointer(rebasing: pcm[0..<samples]))
    }

    // MARK: A/V sync

    /// Seconds from when the sender stamped `timestamp` (on its wall clock,
    /// through its last sender report) to now: the delay to render, when the
    /// clocks agree (one host, or NTP-synced hosts); nil before a report.
    private static func delay(since timestamp: UInt32, clock: (ntp: Double, rtp: UInt32)?, rate: Double) -> Double? {
        guard let clock else { return nil }
        let sent = clock.ntp + Double(Int32(bitPattern: timestamp &- clock.rtp)) / rate
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9 - sent
    }

    /// A moving average: one late packet does not swing the figure.
    private static func smoothed(_ previous: Double?, _ sample: Double) -> Double {
        guard let previous else { return sample }
        return previous + (sample - previous) / 16
    }

    // MARK: Publishing the counters

    private func fail(_ error: RenderError) {
        published.withLock { if $0.failure == nil { $0.failure = error } }
    }

    private func publish(lastPacket: Double? = nil) {
        video.packetsLost = videoReception?.lost ?? 0
        video.jitterSeconds = videoReception?.jitterSeconds(clockRate: 90_000) ?? 0
        audio.packetsLost = audioReception?.lost ?? 0
        audio.jitterSeconds = audioReception?.jitterSeconds(clockRate: 48_000) ?? 0
        let hasVideo = negotiated.videoPayloadType != nil
        let hasAudio = negotiated.audioPayloadType != nil
        published.withLock { p in
            p.video = hasVideo ? video : nil
            p.audio = hasAudio ? audio : nil
            if let lastPacket { p.lastPacket = lastPacket }
        }
    }
}
