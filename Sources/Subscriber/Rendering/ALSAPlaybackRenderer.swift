import AudioDevices
import Logging
import MediaTypes

/// Audio to an ALSA playback device ("default", "hw:1,0", "plughw:…"),
/// through the render side of the audio driver: decoded packets go into its
/// queue, the card's own thread plays them at the card's pace. The queue is
/// bounded (half a second); when the sender's clock runs ahead of the
/// card's, the oldest audio goes first, so the delay never grows.
public final class ALSAPlaybackRenderer: AudioRenderer, @unchecked Sendable {   // one receive thread at a time
    public let device: String
    public let sampleRate = 48_000
    public let channels: Int
    private let card: ALSAAudioDevice
    /// A cushion of silence queued ahead of the first packet, and again after
    /// the queue ran dry: packets arrive in bursts of 20 ms, the card takes
    /// 10 ms at a time, and without it every late packet is a gap.
    private let cushion: [Int16]

    /// Opens and starts the device at once, so a missing, busy or refusing
    /// card fails before connecting.
    public init(device: String, channels: Int = 1, logger: Logger) throws(RenderError) {
        self.device = device
        self.channels = channels
        cushion = [Int16](repeating: 0, count: 48_000 / 1000 * Self.cushionMilliseconds * channels)
        guard AudioDevices.hasSoundCard else { throw RenderError(AudioError.noSoundCard, target: device) }
        card = ALSAAudioDevice(captureDevice: nil, renderDevice: device,
                               format: AudioFormat(sampleRate: 48_000, channels: channels), logger: logger)
        do throws(AudioError) {
            try card.initializeRender()
            if let settings = card.renderSettings, settings.rateChanged {
                card.stopRender()
                throw .formatNotSupported(device: device, requested: settings.format,
                                                    reason: "it plays at \(settings.format.sampleRate) Hz, not 48000 Hz (use plughw: to resample)")
            }
            try card.startRender()
        } catch {
            throw RenderError(error, target: device)
        }
    }

    static let cushionMilliseconds = 60

    public func render(_ samples: UnsafeBufferPointer<Int16>) throws(RenderError) {
        if let failure = card.renderFailure { throw RenderError(failure, target: device) }
        if card.bus.queuedRenderChunks == 0 { _ = cushion.withUnsafeBufferPointer { card.bus.queueForRender($0) } }
        card.bus.queueForRender(samples)
    }

    public func finish() throws(RenderError) { card.stopRender() }

    /// What is queued (10 ms chunks) plus the card's own delay.
    public var latency: Double {
        Double(card.bus.queuedRenderChunks) * 0.01 + card.estimatedRenderDelay.secondsDouble
    }

    /// Underruns and chunks played, for the summary.
    public var statistics: AudioStatistics { card.renderStatistics }
}
