import Logging
import MediaTypes

/// An ALSA sound card as an OpenTok-style audio device: a capture side and a
/// render side, each opened by ALSA name ("default", "hw:1,0", "plughw:...",
/// "hw:Loopback,1,0") and run on its own thread paced by the card.
public final class ALSAAudioDevice: AudioDevice {
    public let bus: AudioBus
    private let capture: ALSASide?
    private let render: ALSASide?

    /// `captureDevice` / `renderDevice`: ALSA names, or nil for a side not used.
    /// `reconnect`: a capture device that goes away is waited for (events
    /// `deviceLost`, then `deviceRestored`) instead of failing.
    public convenience init(captureDevice: String?, renderDevice: String?, format: AudioFormat,
                            logger: Logger, debugStallMilliseconds: Int = 0, reconnect: Bool = false) {
        self.init(captureDevice: captureDevice, renderDevice: renderDevice, format: format,
                  system: LibASoundPCM(), logger: logger, debugStallMilliseconds: debugStallMilliseconds,
                  reconnect: reconnect)
    }

    init(captureDevice: String?, renderDevice: String?, format: AudioFormat, system: any PCMSystem,
         logger: Logger, debugStallMilliseconds: Int = 0, reconnect: Bool = false) {
        let bus = AudioBus(renderFormat: format)
        self.bus = bus
        capture = captureDevice.map {
            ALSASide(name: $0, direction: .capture, requested: format, system: system, bus: bus, logger: logger,
                     stallOnceMilliseconds: debugStallMilliseconds, reconnect: reconnect)
        }
        render = renderDevice.map {
            ALSASide(name: $0, direction: .playback, requested: format, system: system, bus: bus, logger: logger)
        }
    }

    public var captureSettings: AudioSettings? { capture?.settings }
    public var renderSettings: AudioSettings? { render?.settings }

    public func initializeCapture() throws(AudioError) {
        guard let capture else { throw .noSuchDevice(device: "(no capture device given)") }
        try capture.initialize()
    }

    public func startCapture() throws(AudioError) {
        guard let capture else { throw .noSuchDevice(device: "(no capture device given)") }
        try capture.start()
    }

    public func stopCapture() { capture?.stop() }
    public var isCapturing: Bool { capture?.isRunning ?? false }

    public func initializeRender() throws(AudioError) {
        guard let render else { throw .noSuchDevice(device: "(no render device given)") }
        try render.initialize()
    }

    public func startRender() throws(AudioError) {
        guard let render else { throw .noSuchDevice(device: "(no render device given)") }
        try render.start()
    }

    public func stopRender() { render?.stop() }
    public var isRendering: Bool { render?.isRunning ?? false }

    /// Waits for queued playback to reach the speaker.
    public func drainRender() { render?.drain() }

    public var estimatedCaptureDelay: Duration { capture?.estimatedDelay ?? .zero }
    public var estimatedRenderDelay: Duration { render?.estimatedDelay ?? .zero }
    public var captureStatistics: AudioStatistics { capture?.statistics ?? AudioStatistics() }
    public var renderStatistics: AudioStatistics { render?.statistics ?? AudioStatistics() }
    /// Why capture or render stopped on its own, if it did.
    public var captureFailure: AudioError? { capture?.failure }
    public var renderFailure: AudioError? { render?.failure }
}
