internal import COpenH264
internal import CYUV
import MediaTypes

/// H.264 constrained baseline through OpenH264, for RTP packetization-mode 1.
///
/// Real-time settings: the camera-video usage, one spatial and one temporal
/// layer (no B-frames, one reference), CAVLC, the bitrate rate-control mode
/// with frame skipping allowed, one slice per picture (FU-A carries large
/// NAL units), the fastest complexity. Output is Annex B with 4-byte start
/// codes; every IDR picture comes with its SPS and PPS (constant ids). An IDR
/// is made on request and every `keyframeInterval`, so late joiners recover.
///
/// Frames come in as NV12 and are converted once into a preallocated I420
/// picture (OpenH264 takes only I420); nothing is allocated per frame here.
public final class H264Encoder {
    public let size: FrameSize
    public let framesPerSecond: Double
    public private(set) var bitrateKbps: Int
    /// The longest run between IDR pictures when none is asked for.
    public let keyframeInterval: Duration
    /// level_idc asked of the encoder (31 is level 3.1), the lowest level from
    /// 3.1 up whose frame size and macroblock rate limits fit the stream.
    public let levelIDC: Int
    /// The level's MaxBR: OpenH264 refuses a higher target, so rates are capped here.
    public let maxBitrateKbps: Int
    private let encoder: UnsafeMutablePointer<ISVCEncoder?>
    private var picture = SSourcePicture()
    private var info = SFrameBSInfo()
    private let i420: UnsafeMutableRawBufferPointer
    /// Where an access unit is gathered when OpenH264 hands its layers out in
    /// separate places (it writes them one after the other in practice).
    private var joined: UnsafeMutableRawBufferPointer
    private var firstTimestamp: MonotonicTimestamp?
    private var lastPTS: Int64 = -1

    /// The SDP fmtp `profile-level-id` for this stream: constrained baseline
    /// (profile_idc 66, constraint_set0 and constraint_set1) at `levelIDC`.
    public var profileLevelID: String {
        let hex = String(levelIDC, radix: 16)
        return "42e0" + (hex.count < 2 ? "0" + hex : hex)
    }

    public init(size: FrameSize, framesPerSecond: Double, bitrateKbps: Int,
                keyframeInterval: Duration = .seconds(3)) throws(CodecError) {
        self.size = size
        self.framesPerSecond = framesPerSecond
        self.keyframeInterval = keyframeInterval
        let level = Self.level(for: size, framesPerSecond: framesPerSecond)
        levelIDC = level.idc
        maxBitrateKbps = level.maxBitrateKbps
        let bitrateKbps = min(bitrateKbps, maxBitrateKbps)
        self.bitrateKbps = bitrateKbps

        var handle: UnsafeMutablePointer<ISVCEncoder?>?
        guard WelsCreateSVCEncoder(&handle) == 0, let handle else {
            throw .initFailed(codec: "H.264", reason: "WelsCreateSVCEncoder failed")
        }
        encoder = handle
        let chromaWidth = (size.width + 1) / 2, chromaHeight = (size.height + 1) / 2
        i420 = .allocate(byteCount: size.width * size.height + 2 * chromaWidth * chromaHeight, alignment: 64)
        joined = .allocate(byteCount: 64 * 1024, alignment: 16)

        var logLevel: Int32 = Int32(WELS_LOG_ERROR)
        _ = copenh264_encoder_set_option(encoder, ENCODER_OPTION_TRACE_LEVEL, &logLevel)
        var params = SEncParamExt()
        _ = copenh264_encoder_default_params(encoder, &params)
        params.iUsageType = CAMERA_VIDEO_REAL_TIME
        params.iPicWidth = Int32(size.width)
        params.iPicHeight = Int32(size.height)
        params.iTargetBitrate = Int32(bitrateKbps * 1000)
        params.iMaxBitrate = Int32(UNSPECIFIED_BIT_RATE)
        params.iRCMode = RC_BITRATE_MODE
        params.fMaxFrameRate = Float(framesPerSecond)
        params.bEnableFrameSkip = true           // stay within the rate rather than queue a burst
        params.iTemporalLayerNum = 1
        params.iSpatialLayerNum = 1
        params.iNumRefFrame = 1
        params.iEntropyCodingModeFlag = 0        // CAVLC: baseline has no CABAC
        params.iComplexityMode = LOW_COMPLEXITY
        params.eSpsPpsIdStrategy = CONSTANT_ID   // SPS/PPS id 0 always: what receivers expect to replace
        params.bPrefixNalAddingCtrl = false      // prefix NALs (type 14) are SVC only
        params.bEnableSSEI = false
        params.bSimulcastAVC = false
        params.iPaddingFlag = 0
        params.bEnableDenoise = false
        params.bEnableFrameCroppingFlag = true   // 1080 is not a multiple of 16
        params.iMultipleThreadIdc = 1            // threads split slices; there is one slice
        params.uiIntraPeriod = UInt32(max(1, (framesPerSecond * keyframeInterval.seconds).rounded()))
        params.sSpatialLayers.0.iVideoWidth = Int32(size.width)
        params.sSpatialLayers.0.iVideoHeight = Int32(size.height)
        params.sSpatialLayers.0.fFrameRate = Float(framesPerSecond)
        params.sSpatialLayers.0.iSpatialBitrate = Int32(bitrateKbps * 1000)
        params.sSpatialLayers.0.iMaxSpatialBitrate = Int32(UNSPECIFIED_BIT_RATE)
        params.sSpatialLayers.0.uiProfileIdc = PRO_BASELINE
        params.sSpatialLayers.0.uiLevelIdc = ELevelIdc(rawValue: UInt32(levelIDC))
        params.sSpatialLayers.0.sSliceArgument.uiSliceMode = SM_SINGLE_SLICE
        params.sSpatialLayers.0.sSliceArgument.uiSliceNum = 1
        let status = copenh264_encoder_initialize(encoder, &params)
        guard status == 0 else {
            // Every stored property is set by now, so throwing runs deinit: it frees all of it.
            throw .initFailed(codec: "H.264", reason: "InitializeExt returned \(status)")
        }
        var format = Int32(videoFormatI420.rawValue)
        _ = copenh264_encoder_set_option(encoder, ENCODER_OPTION_DATAFORMAT, &format)

        let y = i420.baseAddress!.assumingMemoryBound(to: UInt8.self)
        picture.iColorFormat = Int32(videoFormatI420.rawValue)
        picture.iPicWidth = Int32(size.width)
        picture.iPicHeight = Int32(size.height)
        picture.pData.0 = y
        picture.pData.1 = y + size.width * size.height
        picture.pData.2 = y + size.width * size.height + chromaWidth * chromaHeight
        picture.iStride.0 = Int32(size.width)
        picture.iStride.1 = Int32(chromaWidth)
        picture.iStride.2 = Int32(chromaWidth)
    }

    deinit {
        _ = copenh264_encoder_uninitialize(encoder)
        WelsDestroySVCEncoder(encoder)
        i420.deallocate()
        joined.deallocate()
    }

    /// Changes the target bitrate from the next frame (REMB, loss), within
    /// 30 kbps and the level's `maxBitrateKbps`.
    public func setBitrate(kbps: Int) throws(CodecError) {
        let kbps = min(max(kbps, 30), maxBitrateKbps)
        var rate = SBitrateInfo(iLayer: SPATIAL_LAYER_ALL, iBitrate: Int32(kbps * 1000))
        let status = copenh264_encoder_set_option(encoder, ENCODER_OPTION_BITRATE, &rate)
        guard status == 0 else {
            throw .encodeFailed(codec: "H.264", reason: "SetOption(BITRATE) returned \(status)")
        }
        bitrateKbps = kbps
    }

    /// Encodes one NV12 frame; `output` receives the access unit in Annex B
    /// form (none when the rate control skips the frame).
    public func encode(_ frame: VideoFrame, forceKeyframe: Bool = false,
                       _ output: (EncodedVideoFrame) -> Void) throws(CodecError) {
        guard frame.width == size.width, frame.height == size.height else {
            throw .sizeMismatch(expected: size, got: FrameSize(width: frame.width, height: frame.height))
        }
        NV12ToI420(frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                   frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                   picture.pData.0, picture.iStride.0, picture.pData.1, picture.iStride.1,
                   picture.pData.2, picture.iStride.2, Int32(size.width), Int32(size.height))
        // Presentation time from the capture clock, so RTP timestamps follow real time.
        let first = firstTimestamp ?? frame.timestamp
        firstTimestamp = first
        var pts = (frame.timestamp - first).nanoseconds90kHz
        if pts <= lastPTS { pts = lastPTS + 1 }
        lastPTS = pts
        picture.uiTimeStamp = pts / 90   // OpenH264's rate control counts in milliseconds
        if forceKeyframe {
            _ = copenh264_encoder_force_idr(encoder)
        }
        info = SFrameBSInfo()
        let status = copenh264_encoder_encode(encoder, &picture, &info)
        guard status == 0 else {
            throw .encodeFailed(codec: "H.264", reason: "EncodeFrame returned \(status)")
        }
        guard info.eFrameType != videoFrameTypeSkip, info.eFrameType != videoFrameTypeInvalid else { return }
        let isKeyframe = info.eFrameType == videoFrameTypeIDR
        let layerCount = Int(info.iLayerNum)
        withUnsafePointer(to: &info.sLayerInfo) { tuple in
            tuple.withMemoryRebound(to: SLayerBSInfo.self, capacity: layerCount) { layers in
                // Each layer holds its NAL units back to back; usually the layers do too.
                var start: UnsafeMutablePointer<UInt8>?
                var total = 0
                var contiguous = true
                for l in 0..<layerCount {
                    let layer = layers[l]
                    let bytes = Self.layerSize(layer)
                    if bytes == 0 { continue }
                    if start == nil {
                        start = layer.pBsBuf
                    } else if start! + total != layer.pBsBuf {
                        contiguous = false
                    }
                    total += bytes
                }
                guard let start, total > 0 else { return }
                if contiguous {
                    output(EncodedVideoFrame(bytes: UnsafeRawBufferPointer(start: start, count: total),
                                             isKeyframe: isKeyframe, timestamp90kHz: pts))
                    return
                }
                if joined.count < total {
                    joined.deallocate()
                    joined = .allocate(byteCount: total * 2, alignment: 16)
                }
                var offset = 0
                for l in 0..<layerCount {
                    let layer = layers[l]
                    let bytes = Self.layerSize(layer)
                    if bytes == 0 { continue }
                    (joined.baseAddress! + offset).copyMemory(from: layer.pBsBuf, byteCount: bytes)
                    offset += bytes
                }
                output(EncodedVideoFrame(bytes: UnsafeRawBufferPointer(rebasing: joined[0..<total]),
                                         isKeyframe: isKeyframe, timestamp90kHz: pts))
            }
        }
    }

    private static func layerSize(_ layer: SLayerBSInfo) -> Int {
        var bytes = 0
        for n in 0..<Int(layer.iNalCount) { bytes += Int(layer.pNalLengthInByte[n]) }
        return bytes
    }

    /// H.264 Table A-1 limits from level 3.1 up: level_idc, MaxFS (macroblocks
    /// per picture), MaxMBPS (macroblocks per second), MaxBR (units of 1200
    /// bit/s for baseline).
    private static let levels: [(idc: Int, frameSize: Int, rate: Int, maxBR: Int)] = [
        (31, 3_600, 108_000, 14_000), (32, 5_120, 216_000, 20_000), (40, 8_192, 245_760, 20_000),
        (42, 8_704, 522_240, 50_000), (50, 22_080, 589_824, 135_000), (51, 36_864, 983_040, 240_000),
        (52, 36_864, 2_073_600, 240_000),
    ]

    /// The lowest level from 3.1 (what the SDP offers by default) that holds
    /// this size at this rate: 3.1 up to 1280x720 at 30, 4.0 for 1920x1080 at 30.
    static func level(for size: FrameSize, framesPerSecond: Double) -> (idc: Int, maxBitrateKbps: Int) {
        let mbWidth = (size.width + 15) / 16, mbHeight = (size.height + 15) / 16
        let frameSize = mbWidth * mbHeight
        let rate = Double(frameSize) * framesPerSecond
        for level in levels {
            // Neither dimension may exceed sqrt(8 * MaxFS) macroblocks.
            let side = Int((8 * Double(level.frameSize)).squareRoot())
            if frameSize <= level.frameSize, mbWidth <= side, mbHeight <= side, rate <= Double(level.rate) {
                return (level.idc, level.maxBR * 1200 / 1000)
            }
        }
        return (levels.last!.idc, levels.last!.maxBR * 1200 / 1000)
    }
}

/// H.264 decoding (OpenH264) into NV12 frames: how the tests (and
/// subscribers) look at what the encoder produced.
public final class H264Decoder {
    private let decoder: UnsafeMutablePointer<ISVCDecoder?>

    public init() throws(CodecError) {
        var handle: UnsafeMutablePointer<ISVCDecoder?>?
        guard WelsCreateDecoder(&handle) == 0, let handle else {
            throw .initFailed(codec: "H.264 decoder", reason: "WelsCreateDecoder failed")
        }
        decoder = handle
        var level: Int32 = Int32(WELS_LOG_ERROR)
        _ = copenh264_decoder_set_option(decoder, DECODER_OPTION_TRACE_LEVEL, &level)
        var params = SDecodingParam()
        params.eEcActiveIdc = ERROR_CON_DISABLE   // a broken stream is an error, not a concealed picture
        params.sVideoProperty.size = UInt32(MemoryLayout<SVideoProperty>.size)
        params.sVideoProperty.eVideoBsType = VIDEO_BITSTREAM_AVC
        let status = copenh264_decoder_initialize(decoder, &params)
        guard status == 0 else {
            WelsDestroyDecoder(decoder)
            throw .initFailed(codec: "H.264 decoder", reason: "Initialize returned \(status)")
        }
    }

    deinit {
        _ = copenh264_decoder_uninitialize(decoder)
        WelsDestroyDecoder(decoder)
    }

    /// Decodes one Annex B access unit into `frame` (its format set to the
    /// picture's size); with no frame, only decodes and returns its size.
    @discardableResult
    public func decode(_ bytes: UnsafeRawBufferPointer, into frame: VideoFrame?) throws(CodecError) -> FrameSize {
        var info = SBufferInfo()
        var planes: (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?)
            = (nil, nil, nil)
        let state = withUnsafeMutablePointer(to: &planes) { tuple in
            tuple.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 3) { p in
                copenh264_decoder_decode(decoder, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                         Int32(bytes.count), p, &info)
            }
        }
        guard state == dsErrorFree else {
            throw .decodeFailed(codec: "H.264", reason: "DecodeFrameNoDelay state 0x\(String(state.rawValue, radix: 16))")
        }
        guard info.iBufferStatus == 1, let y = planes.0, let u = planes.1, let v = planes.2 else {
            throw .decodeFailed(codec: "H.264", reason: "no picture")
        }
        let picture = info.UsrData.sSystemBuffer
        let size = FrameSize(width: Int(picture.iWidth), height: Int(picture.iHeight))
        guard let frame else { return size }
        let format = VideoFormat.nv12(width: Int(picture.iWidth), height: Int(picture.iHeight), framesPerSecond: 0)
        guard VideoFrame.byteCount(of: format) <= frame.capacity else {
            throw .decodeFailed(codec: "H.264", reason: "the picture (\(Int(picture.iWidth))x\(Int(picture.iHeight))) is larger than the frame it decodes into")
        }
        frame.setFormat(format)
        I420ToNV12(y, picture.iStride.0, u, picture.iStride.1, v, picture.iStride.1,
                   frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.yStride),
                   frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(frame.uvStride),
                   picture.iWidth, picture.iHeight)
        return size
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (s, a) = components
        return Double(s) + Double(a) / 1e18
    }
}
