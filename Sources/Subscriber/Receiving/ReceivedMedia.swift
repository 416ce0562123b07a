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
/// Video is decoded and rendered on a thread of its own (`VideoDecoding`), so
/// that a slow renderer never holds up the packets, and held there to play
/// with its audio (lip sync, from both streams' sender reports); audio (an Opus packet
/// decodes in well under a millisecond, and playback has its own buffer) is
/// decoded here. The buffers (slots, frame bytes, picture, PCM) are
/// allocated once.
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
    private let videoDecoding: VideoDecoding
    private let videoDecodeThread: StoppableThread
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
    private var frameBytes: [UInt8] = []
    /// Frames dropped because the decode thread had every slot.
    private var framesDroppedBehindDecoder: UInt64 = 0
    /// The RTP timestamp of the last keyframe given to the decode thread.
    private var lastKeyframeHandedOver: UInt32?
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
        let published = self.published
        let decoding = VideoDecoding(renderer: video, logger: logger, onEvent: onEvent) { error in
            published.withLock { if $0.failure == nil { $0.failure = error } }
        }
        videoDecoding = decoding
        videoDecodeThread = StoppableThread(name: "camagent-decode") { stop in decoding.run(stop) }
        decoding.wake = videoDecodeThread.signal
        // 120 ms at 48 kHz, stereo: Opus's longest packet.
        pcm = .allocate(capacity: 5760 * 2)
        pcm.initialize(repeating: 0)
        frameBytes.reserveCapacity(1 << 20)
    }

    deinit {
        videoDecodeThread.stop()
        pcm.deallocate()
    }

    /// A new connection's codecs: the receive state starts over (new SSRCs
    /// and sequence numbers); decoders and renderers carry on.
    func configure(_ negotiated: Negotiated) throws(SubscriberError) {
        self.negotiated = negotiated
        jitter = negotiated.videoCodec.map { VideoJitterBuffer(codec: $0) }
        playout.reset()
        videoReception = nil
        audioReception = nil
        videoClock = nil
        audioClock = nil
        videoDecoding.setAudioDelay(nil)
        do {
            if let codec = negotiated.videoCodec { try videoDecoding.prepare(codec) }
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
        let (video, audio) = published.withLock { ($0.video, $0.audio) }
        guard var video else { return (nil, audio) }
        let decoded = videoDecoding.decoded
        video.framesDecoded = decoded.framesDecoded
        video.keyframesDecoded = decoded.keyframesDecoded
        video.decodeErrors = decoded.decodeErrors
        video.width = decoded.width
        video.height = decoded.height
        video.framesDropped += decoded.framesSkipped
        video.senderToRenderDelay = decoded.senderToRenderDelay
        video.lipSyncHold = decoded.lipSyncHold
        return (video, audio)
    }

    /// A renderer's failure: the subscriber stops with it.
    var failure: RenderError? { published.withLock { $0.failure } }

    /// When the last packet arrived (monotonic seconds; 0: none yet).
    var lastPacketAt: Double { published.withLock { $0.lastPacket } }

    /// The stream is over: the frames handed over are decoded, then the renderers close.
    func finishRenderers() throws(RenderError) {
        videoDecodeThread.stop()
        videoDecoding.drain()
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
            videoClock = nil   // a new timeline: the old report does not place it
            lastKeyframeHandedOver = nil
            if let codec = negotiated.videoCodec { jitter = VideoJitterBuffer(codec: codec) }
        }
        videoReception?.count(sequence: view.sequenceNumber)
        videoReception?.noteArrival(timestamp: view.timestamp, arrival: now, clockRate: 90_000)
        video.packetsReceived += 1
        video.bytesReceived += UInt64(view.payload.count)
        guard jitter != nil else { return }
        let decoding = decodeVideo.load(ordering: .relaxed)
        // Video turned back on, or a frame that did not decode (unless a keyframe has been
        // handed over since): what follows needs a keyframe.
        let restart = restartVideo.exchange(false, ordering: .relaxed)
        var failed = false
        if let timestamp = videoDecoding.takeDecodeFailure() {
            failed = lastKeyframeHandedOver.map { Int32(bitPattern: $0 &- timestamp) <= 0 } ?? true
        }
        if restart || failed {
            jitter?.decodeFailed(now: now, feedback: &requests)
        }
        jitter!.insert(view, bytes: packet, now: now, feedback: &requests)
        while let frame = jitter!.nextFrame(into: &frameBytes, now: now, feedback: &requests) {
            guard decoding, let codec = negotiated.videoCodec else { continue }
            if videoDecoding.submit(frame, bytes: frameBytes, codec: codec, clock: videoClock) {
                if frame.isKeyframe { lastKeyframeHandedOver = frame.timestamp }
            } else {
                // The decoder is behind: this frame is lost to it, and the ones after need a keyframe.
                framesDroppedBehindDecoder += 1
                jitter?.decodeFailed(now: now, feedback: &requests)
            }
        }
        let counters = jitter!.counters
        video.framesDropped = counters.framesDropped + framesDroppedBehindDecoder
        video.retransmissionsReceived = counters.recovered
    }

    // MARK: Audio

    private func receiveAudio(_ view: RTPPacketView, _ packet: ArraySlice<UInt8>, now: Double) {
        if audioReception?.ssrc != view.ssrc {
            audioReception = ReceptionCounter(ssrc: view.ssrc, firstSequence: view.sequenceNumber)
            audio.ssrc = view.ssrc
            audio.sender = nil
            audioClock = nil
            videoDecoding.setAudioDelay(nil)
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
        guard decodeAudio.load(ordering: .relaxed) else {
            videoDecoding.setAudioDelay(nil)
            return
        }
        do {
            for _ in 0..<concealing {
                let n = try opus.conceal(samplesPerChannel: lastPacketSamples, into: pcm)
                audio.samplesConcealed += UInt64(n)
                try render(samples: n * opus.channels)
            }
            let n = try packet[view.payload].withUnsafeBytes { bytes in try opus.decode(bytes, into: pcm) }
            lastPacketSamples = n
            if let delay = SenderClock.delay(since: view.timestamp, clock: audioClock, rate: 48_000) {
                audio.senderToRenderDelay = SenderClock.smoothed(audio.senderToRenderDelay, delay + (audioRenderer?.latency ?? 0))
                // Video waits for the audio it goes with, when the audio is played.
                videoDecoding.setAudioDelay(audioRenderer == nil ? nil : audio.senderToRenderDelay)
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
