internal import COpus

/// Opus at 48 kHz in 20 ms frames (RFC 7587's usual packet), tuned for
/// speech and in-band FEC, as WebRTC peers expect.
public final class OpusEncoder {
    public static let sampleRate = 48_000
    public let channels: Int
    /// Samples per channel in one 20 ms frame.
    public let frameSamples = OpusEncoder.sampleRate / 50
    public private(set) var bitrate: Int
    private let encoder: OpaquePointer
    /// Large enough for any Opus packet (RFC 6716 caps one frame at 1275 bytes).
    private var packet = [UInt8](repeating: 0, count: 1500)

    public init(channels: Int = 1, bitrate: Int = 32_000) throws(CodecError) {
        precondition(channels == 1 || channels == 2, "Opus here is mono or stereo")
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(Int32(Self.sampleRate), Int32(channels), OPUS_APPLICATION_VOIP, &error),
              error == OPUS_OK else {
            throw .initFailed(codec: "Opus", reason: String(cString: opus_strerror(error)))
        }
        self.encoder = encoder
        self.channels = channels
        self.bitrate = bitrate
        _ = copus_set_bitrate(encoder, Int32(bitrate))
        _ = copus_set_inband_fec(encoder, 1)
        _ = copus_set_packet_loss_percent(encoder, 5)
    }

    deinit { opus_encoder_destroy(encoder) }

    public func setBitrate(_ bitsPerSecond: Int) {
        bitrate = min(max(bitsPerSecond, 6_000), 510_000)
        _ = copus_set_bitrate(encoder, Int32(bitrate))
    }

    /// Encodes exactly one 20 ms frame of interleaved S16 samples; `output`
    /// receives the packet, valid during the call.
    public func encode(_ samples: UnsafeBufferPointer<Int16>, _ output: (UnsafeRawBufferPointer) -> Void) throws(CodecError) {
        precondition(samples.count == frameSamples * channels, "one 20 ms frame at a time")
        let count = packet.withUnsafeMutableBufferPointer { out in
            opus_encode(encoder, samples.baseAddress!, Int32(frameSamples), out.baseAddress!, Int32(out.count))
        }
        guard count > 0 else { throw .encodeFailed(codec: "Opus", reason: String(cString: opus_strerror(count))) }
        packet.withUnsafeBytes { output(UnsafeRawBufferPointer(rebasing: $0[0..<Int(count)])) }
    }
}

/// Opus decoding to interleaved S16: for the tests and subscribers.
public final class OpusDecoder {
    public let channels: Int
    private let decoder: OpaquePointer

    /// `sampleRate`: what the PCM comes out at (8, 12, 16, 24 or 48 kHz; libopus
    /// resamples as it decodes, so captions take 16 kHz straight away).
    public init(channels: Int = 1, sampleRate: Int = OpusEncoder.sampleRate) throws(CodecError) {
        var error: Int32 = 0
        guard let decoder = opus_decoder_create(Int32(sampleRate), Int32(channels), &error), error == OPUS_OK else {
            throw .initFailed(codec: "Opus decoder", reason: String(cString: opus_strerror(error)))
        }
        self.decoder = decoder
        self.channels = channels
    }

    deinit { opus_decoder_destroy(decoder) }

    /// Decodes one packet into `pcm`; returns the samples per channel written.
    /// An empty packet is refused: libopus would take it for a lost one and
    /// conceal as much as `pcm` holds (240 ms into a mono decoder's buffer
    /// sized for stereo); concealment is `conceal`'s, for a length the caller picks.
    public func decode(_ packet: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(CodecError) -> Int {
        guard !packet.isEmpty else { throw .decodeFailed(codec: "Opus", reason: "empty packet") }
        let n = opus_decode(decoder, packet.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(packet.count),
                            pcm.baseAddress!, Int32(pcm.count / channels), 0)
        guard n >= 0 else { throw .decodeFailed(codec: "Opus", reason: String(cString: opus_strerror(n))) }
        return Int(n)
    }

    /// Loss concealment: fills `samplesPerChannel` samples of `pcm` with the
    /// decoder's best guess at a packet that never came (Opus PLC).
    public func conceal(samplesPerChannel: Int, into pcm: UnsafeMutableBufferPointer<Int16>) throws(CodecError) -> Int {
        precondition(samplesPerChannel * channels <= pcm.count, "the concealment buffer is too small")
        let n = opus_decode(decoder, nil, 0, pcm.baseAddress!, Int32(samplesPerChannel), 0)
        guard n >= 0 else { throw .decodeFailed(codec: "Opus", reason: String(cString: opus_strerror(n))) }
        return Int(n)
    }
}
