
/// Signed 16-bit little-endian PCM at a rate and channel count: the one
/// sample format camagent moves (OpenTok's audio device uses the same).
public struct AudioFormat: Hashable, Sendable, Codable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int

    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }

    public static let voice = AudioFormat(sampleRate: 48_000, channels: 1)

    public var bytesPerFrame: Int { 2 * channels }
    /// Frames (one sample per channel) in a 10 ms chunk.
    public var framesPerChunk: Int { sampleRate / 100 }
    public var samplesPerChunk: Int { framesPerChunk * channels }
    public var description: String { "S16LE \(sampleRate) Hz \(channels == 1 ? "mono" : "\(channels) channels")" }
}

public enum AudioDirection: String, Sendable, Codable { case capture, playback }

/// Why an audio device failed, naming it.
public enum AudioError: Error, Hashable, Sendable, CustomStringConvertible {
    case noSoundCard
    case noSuchDevice(device: String)
    case busy(device: String)
    case permissionDenied(device: String)
    case formatNotSupported(device: String, requested: AudioFormat, reason: String)
    case deviceLost(device: String)
    case driverError(device: String, operation: String, code: Int32)

    public var description: String {
        switch self {
        case .noSoundCard: "no sound card found"
        case .noSuchDevice(let d): "\(d): no such audio device"
        case .busy(let d): "\(d): audio device is busy (another program is using it)"
        case .permissionDenied(let d): "\(d): permission denied (is the user in the 'audio' group?)"
        case .formatNotSupported(let d, let f, let reason): "\(d): \(f) not supported: \(reason)"
        case .deviceLost(let d): "\(d): audio device lost (unplugged or driver gone)"
        case .driverError(let d, let op, let code): "\(d): \(op) failed: \(SystemErrorText.describe(code))"
        }
    }
}

/// What an audio side really negotiated.
public struct AudioSettings: Hashable, Sendable, Codable {
    public var device: String
    public var direction: AudioDirection
    public var requested: AudioFormat
    public var format: AudioFormat
    public var periodFrames: Int
    public var bufferFrames: Int
    /// True when the rate differs from the one asked for (reported, never hidden).
    public var rateChanged: Bool { requested.sampleRate != format.sampleRate }

    /// Made by the audio drivers of this package (what a driver negotiated).
    package init(device: String, direction: AudioDirection, requested: AudioFormat, format: AudioFormat,
                 periodFrames: Int, bufferFrames: Int) {
        self.device = device
        self.direction = direction
        self.requested = requested
        self.format = format
        self.periodFrames = periodFrames
        self.bufferFrames = bufferFrames
    }
}

/// Counters an audio side keeps.
public struct AudioStatistics: Hashable, Sendable, Codable {
    /// Frames (samples per channel) moved to or from the card.
    public var frames: UInt64 = 0
    /// 10 ms chunks delivered (capture) or played (render).
    public var chunks: UInt64 = 0
    /// Overruns (capture) or underruns (render) reported by ALSA.
    public var xruns: UInt64 = 0
    /// Successful recoveries from xruns and suspends.
    public var recoveries: UInt64 = 0
    public var suspends: UInt64 = 0
    /// Chunks the bus dropped because nobody read them in time (newest kept).
    public var busOverflows: UInt64 = 0
    /// Render chunks filled with silence because nothing was queued to play.
    public var silenceInserted: UInt64 = 0
    /// Measured frames per second over the run (from the monotonic clock).
    public var measuredRate: Double = 0
    /// The device's latest delay estimate (snd_pcm_delay), in milliseconds.
    public var delayMs: Double = 0

    public init() {}
}

/// A 10 ms chunk of captured audio: interleaved samples and when the first
/// one was captured, on CLOCK_MONOTONIC like video frames. The samples are
/// valid only during the `consume` call (they live in the capture thread's buffer).
public struct AudioChunk {
    public var timestamp: MonotonicTimestamp
    public var format: AudioFormat
    /// Interleaved S16 samples (`format.samplesPerChunk` of them).
    public var samples: UnsafeBufferPointer<Int16>

    /// Made by the audio drivers of this package, over their own buffer.
    package init(timestamp: MonotonicTimestamp, format: AudioFormat, samples: UnsafeBufferPointer<Int16>) {
        self.timestamp = timestamp
        self.format = format
        self.samples = samples
    }
}

/// Receives captured chunks on the capture thread (return quickly; copy what you keep).
public protocol AudioCaptureConsumer: AnyObject, Sendable {
    func consume(_ chunk: AudioChunk)
    func audioEvent(_ event: AudioEvent)
}

extension AudioCaptureConsumer {
    public func audioEvent(_ event: AudioEvent) {}
}

public enum AudioEvent: Sendable, CustomStringConvertible {
    case xrunRecovered(direction: AudioDirection)
    case failed(AudioError)
    /// The device went away and is being waited for (capture with reconnection on).
    case deviceLost(direction: AudioDirection, reason: String)
    /// It came back: chunks flow again.
    case deviceRestored(direction: AudioDirection, description: String)

    public var description: String {
        switch self {
        case .xrunRecovered(let d): "\(d == .capture ? "overrun" : "underrun") recovered"
        case .failed(let e): "audio failed: \(e)"
        case .deviceLost(_, let reason): "audio device lost (\(reason)), waiting for it"
        case .deviceRestored(_, let description): "audio device back: \(description)"
        }
    }
}

/// An audio device in the shape of OpenTok's custom audio device: a capture
/// side and a render side, each initialized, started and stopped on its own.
public protocol AudioDevice: AnyObject, Sendable {
    var captureSettings: AudioSettings? { get }
    var renderSettings: AudioSettings? { get }
    func initializeCapture() throws(AudioError)
    func startCapture() throws(AudioError)
    func stopCapture()
    var isCapturing: Bool { get }
    func initializeRender() throws(AudioError)
    func startRender() throws(AudioError)
    func stopRender()
    var isRendering: Bool { get }
    /// Time from the microphone to the consumer, as the device estimates it.
    var estimatedCaptureDelay: Duration { get }
    /// Time from the bus to the speaker.
    var estimatedRenderDelay: Duration { get }
    var captureStatistics: AudioStatistics { get }
    var renderStatistics: AudioStatistics { get }
    /// Where captured chunks go and where render chunks come from.
    var bus: AudioBus { get }
}
