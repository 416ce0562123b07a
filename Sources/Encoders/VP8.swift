internal import CVPX
internal import CYUV
import MediaTypes

public enum CodecError: Error, Hashable, Sendable, CustomStringConvertible {
    case initFailed(codec: String, reason: String)
    case encodeFailed(codec: String, reason: String)
    case decodeFailed(codec: String, reason: String)
    case sizeMismatch(expected: FrameSize, got: FrameSize)

    public var description: String {
        switch self {
        case .initFailed(let c, let r): "\(c) encoder could not start: \(r)"
        case .encodeFailed(let c, let r): "\(c) encoding failed: \(r)"
        case .decodeFailed(let c, let r): "\(c) decoding failed: \(r)"
        case .sizeMismatch(let e, let g): "frame is \(g), the encoder was set up for \(e)"
        }
    }
}

/// One encoded picture, valid only during the callback that receives it
/// (the bytes live in the encoder's own buffers).
public struct EncodedVideoFrame {
    public var bytes: UnsafeRawBufferPointer
    public var isKeyframe: Bool
    /// 90 kHz units since the encoder's first frame.
    public var timestamp90kHz: Int64
    /// Its temporal layer: 0, the base every other frame refers to; 1, a
    /// frame nothing refers to, which a forwarder may leave out to halve the
    /// frame rate (VP8 with `temporalLayers` 2). Always 0 for H.264.
    public var temporalLayer: UInt8 = 0

    public init(bytes: UnsafeRawBufferPointer, isKeyframe: Bool, timestamp90kHz: Int64, temporalLayer: UInt8 = 0) {
        self.bytes = bytes
        self.isKeyframe = isKeyframe
        self.timestamp90kHz = timestamp90kHz
        self.temporalLayer = temporalLayer
    }
}

/// VP8 through libvpx with real-time settings: no lookahead, CBR, error
/// resilient, the fastest real-time speed, and as many threads as the size
/// and the machine warrant (`threadCount`). Frames come in as NV12 and are
/// converted once into a preallocated I420 picture (libvpx's VP8 encoder takes
/// only I420); nothing is allocated per frame here.
public final class VP8Encoder {
    public let size: FrameSize
    public let framesPerSecond: Double
    public private(set) var bitrateKbps: Int
    /// libvpx's encoding threads (g_threads).
    public let threads: Int
    /// 1, or 2: every other frame is then a layer-1 frame that updates no
    /// reference and no probability, so a router can drop those for a
    /// subscriber that asked for a lower frame rate (preferredFrameRate) and
    /// what is left still decodes. A layer-1 frame predicts from two frames
    /// back: at the same bitrate the picture is 0.1-0.4 dB worse (luma PSNR,
    /// 640x480 at 30 fps, BENCHMARKS.md "Temporal layers").
    public let temporalLayers: Int
    /// Frames encoded since the pattern (base, upper, base, …) last started.
    private var patternIndex = 0
    private var context = vpx_codec_ctx_t()
    private var config = vpx_codec_enc_cfg_t()
    private var image = vpx_image_t()
    private let i420: UnsafeMutableRawBufferPointer
    private var firstTimestamp: MonotonicTimestamp?
    private var lastPTS: Int64 = -1

    /// `threads` nil: `threadCount(for:processors:)` on the processors this process may use.
    public init(size: FrameSize, framesPerSecond: Double, bitrateKbps: Int, threads: Int? = nil,
                temporalLayers: Int = 1) throws(CodecError) {
        self.size = size
        self.temporalLayers = min(max(temporalLayers, 1), 2)
        self.framesPerSecond = framesPerSecond
        self.bitrateKbps = bitrateKbps
        self.threads = max(1, threads ?? Self.threadCount(for: size, processors: Processors.usable))
        i420 = .allocate(byteCount: size.width * size.height * 3 / 2 + size.width, alignment: 64)
        // Every stored property is set from here on, so a throw below runs deinit, which frees
        // i420 and destroys the (possibly never initialised) context: no manual clean-up here.
        guard vpx_codec_enc_config_default(vpx_codec_vp8_cx(), &config, 0) == VPX_CODEC_OK else {
            throw .initFailed(codec: "VP8", reason: "no default configuration")
        }
        config.g_w = UInt32(size.width)
        config.g_h = UInt32(size.height)
        config.g_timebase = vpx_rational(num: 1, den: 90_000)   // pts in RTP video units
        config.rc_target_bitrate = UInt32(bitrateKbps)
        config.rc_end_usage = VPX_CBR
        config.g_lag_in_frames = 0                                // real time: no lookahead
        config.g_error_resilient = UInt32(VPX_ERROR_RESILIENT_DEFAULT)
        config.g_threads = UInt32(self.threads)
        config.rc_min_quantizer = 2
        config.rc_max_quantizer = 56
        config.rc_undershoot_pct = 100
        config.rc_overshoot_pct = 15
        config.rc_buf_initial_sz = 500
        config.rc_buf_optimal_sz = 600
        config.rc_buf_sz = 1000
        config.kf_mode = VPX_KF_AUTO
        config.kf_max_dist = UInt32(max(1, framesPerSecond * 10))  // a keyframe at least every 10 s
        let status = cvpx_enc_init(&context, &config)
        guard status == VPX_CODEC_OK else {
            throw .initFailed(codec: "VP8", reason: String(cString: vpx_codec_err_to_string(status)))
        }
        _ = cvpx_control_int(&context, Int32(VP8E_SET_CPUUSED.rawValue), -6)
        _ = cvpx_control_int(&context, Int32(VP8E_SET_NOISE_SENSITIVITY.rawValue), 0)
        _ = cvpx_control_int(&context, Int32(VP8E_SET_STATIC_THRESHOLD.rawValue), 1)
        let base = i420.baseAddress!.assumingMemoryBound(to: UInt8.self)
        vpx_img_wrap(&image, VPX_IMG_FMT_I420, UInt32(size.width), UInt32(size.height), 1, base)
    }

    deinit {
        vpx_codec_destroy(&context)
        i420.deallocate()
    }

    /// How many threads libvpx should encode `size` with on `processors`
    /// cores. VP8 splits a picture by macroblock rows, and each thread waits
    /// for the row above in a busy loop (`pause`, no yield). Unless every
    /// encoding thread has a core of its own, a thread whose neighbour was
    /// preempted spins through its whole time slice: publishing 720p30 on 2
    /// cores beside a receiver, 61 % of camagent's CPU went into those two
    /// loops, and 2 threads cost nearly 3x the CPU of 1 (BENCHMARKS.md). So:
    /// one thread up to VGA or below 3 cores (libwebrtc draws similar
    /// lines), then one more per size step while cores are to spare.
    public static func threadCount(for size: FrameSize, processors: Int) -> Int {
        let pixels = size.width * size.height
        if pixels >= 1920 * 1080 && processors >= 8 { return 4 }
        if pixels > 1280 * 960 && processors >= 6 { return 3 }
        if pixels > 640 * 480 && processors >= 3 { return 2 }
        return 1
    }

    /// Changes the target bitrate from the next frame (REMB, loss).
    public func setBitrate(kbps: Int) throws(CodecError) {
        config.rc_target_bitrate = UInt32(max(kbps, 30))
        let status = vpx_codec_enc_config_set(&context, &config)
        guard status == VPX_CODEC_OK else {
            throw .encodeFailed(codec: "VP8", reason: String(cString: vpx_codec_err_to_string(status)))
        }
        bitrateKbps = Int(config.rc_target_bitrate)
    }

    /// Encodes one NV12 frame; `output` receives the compressed picture (none
    /// when the rate control drops the frame).
    public func encode(_ frame: VideoFrame, forceKeyframe: Bool = false,
                       _ output: (EncodedVideoFrame) -> Void) throws(CodecError) {
        guard frame.width == size.width, frame.height == size.height else {
            throw .sizeMismatch(expected: size, got: FrameSize(width: frame.width, height: frame.height))
        }
        NV12ToI420(frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                   frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                   image.planes.0, image.stride.0, image.planes.1, image.stride.1, image.planes.2, image.stride.2,
                   Int32(size.width), Int32(size.height))
        // Presentation time from the capture clock, so RTP timestamps follow real time.
        let first = firstTimestamp ?? frame.timestamp
        firstTimestamp = first
        var pts = (frame.timestamp - first).nanoseconds90kHz
        if pts <= lastPTS { pts = lastPTS + 1 }   // libvpx needs increasing pts
        lastPTS = pts
        let duration = UInt(90_000 / max(framesPerSecond, 1))
        var flags: vpx_enc_frame_flags_t = forceKeyframe ? CVPX_FORCE_KEYFRAME : 0
        if forceKeyframe { patternIndex = 0 }
        let layer: UInt8 = temporalLayers == 2 && patternIndex % 2 == 1 ? 1 : 0
        if layer == 1 { flags |= Self.upperLayerFlags }
        patternIndex += 1
        let status = vpx_codec_encode(&context, &image, pts, duration, flags, UInt(CVPX_DEADLINE_REALTIME))
        guard status == VPX_CODEC_OK else {
            throw .encodeFailed(codec: "VP8", reason: String(cString: vpx_codec_err_to_string(status)))
        }
        var iterator: vpx_codec_iter_t?
        while let packet = vpx_codec_get_cx_data(&context, &iterator) {
            guard packet.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let f = packet.pointee.data.frame
            let isKeyframe = f.flags & UInt32(VPX_FRAME_IS_KEY) != 0
            // A keyframe (libvpx may make one on its own) refreshes every reference:
            // it is a base frame whatever was asked, and the pattern starts again.
            if isKeyframe { patternIndex = 1 }
            output(EncodedVideoFrame(bytes: UnsafeRawBufferPointer(start: f.buf, count: f.sz), isKeyframe: isKeyframe,
                                     timestamp90kHz: f.pts, temporalLayer: isKeyframe ? 0 : layer))
        }
    }

    /// A layer-1 frame: it refers to the base frames' references and updates
    /// none of them, nor the entropy state, so leaving it out changes nothing
    /// for the frames after it.
    private static let upperLayerFlags = vpx_enc_frame_flags_t(
        VP8_EFLAG_NO_UPD_LAST | VP8_EFLAG_NO_UPD_GF | VP8_EFLAG_NO_UPD_ARF | VP8_EFLAG_NO_UPD_ENTROPY)
}

/// VP8 decoding into NV12 frames: how the tests (and subscribers) look at
/// what the encoder produced.
public final class VP8Decoder {
    private var context = vpx_codec_ctx_t()

    public init() throws(CodecError) {
        let status = cvpx_dec_init(&context)
        guard status == VPX_CODEC_OK else {
            throw .initFailed(codec: "VP8 decoder", reason: String(cString: vpx_codec_err_to_string(status)))
        }
    }

    deinit { vpx_codec_destroy(&context) }

    /// Decodes one compressed frame into `frame` (its format set to the
    /// picture's size); with no frame, only decodes (the picture stays in the
    /// decoder: nothing renders it) and returns its size.
    @discardableResult
    public func decode(_ bytes: UnsafeRawBufferPointer, into frame: VideoFrame?) throws(CodecError) -> FrameSize {
        let status = vpx_codec_decode(&context, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                      UInt32(bytes.count), nil, 0)
        guard status == VPX_CODEC_OK else {
            throw .decodeFailed(codec: "VP8", reason: String(cString: vpx_codec_err_to_string(status)))
        }
        var iterator: vpx_codec_iter_t?
        guard let image = vpx_codec_get_frame(&context, &iterator)?.pointee else {
            throw .decodeFailed(codec: "VP8", reason: "no picture")
        }
        let size = FrameSize(width: Int(image.d_w), height: Int(image.d_h))
        guard let frame else { return size }
        let format = VideoFormat.nv12(width: Int(image.d_w), height: Int(image.d_h), framesPerSecond: 0)
        guard VideoFrame.byteCount(of: format) <= frame.capacity else {
            throw .decodeFailed(codec: "VP8", reason: "the picture (\(Int(image.d_w))x\(Int(image.d_h))) is larger than the frame it decodes into")
        }
        frame.setFormat(format)
        I420ToNV12(image.planes.0, image.stride.0, image.planes.1, image.stride.1, image.planes.2, image.stride.2,
                   frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                   frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                   Int32(image.d_w), Int32(image.d_h))
        return size
    }
}

extension Duration {
    /// The duration in 90 kHz ticks (RTP's video clock).
    var nanoseconds90kHz: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 90_000 + attoseconds / 11_111_111_111_111
    }
}
