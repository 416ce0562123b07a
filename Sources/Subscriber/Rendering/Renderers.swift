import MediaFiles
import MediaTypes
#if canImport(Glibc)
import Glibc
#endif

/// Where decoded video goes. Called on the subscriber's receive thread,
/// one frame at a time; the frame is reused after the call returns.
public protocol VideoRenderer: AnyObject, Sendable {
    func render(_ frame: VideoFrame) throws(RenderError)
    /// The stream is over: flush and close.
    func finish() throws(RenderError)
}

/// Where decoded audio goes: interleaved S16 at `sampleRate`.
public protocol AudioRenderer: AnyObject, Sendable {
    var sampleRate: Int { get }
    var channels: Int { get }
    func render(_ samples: UnsafeBufferPointer<Int16>) throws(RenderError)
    func finish() throws(RenderError)
    /// Seconds between a sample handed over and its playing (0 for a file).
    var latency: Double { get }
}

extension AudioRenderer {
    public var latency: Double { 0 }
}

/// Video into a Y4M file (4:2:0), opened at the first frame with its size.
/// A stream that changes size keeps the first size: frames of another size
/// are counted and left out (Y4M has one size per file). The header's frame
/// rate is the stream's: the first frame is held (copied once) until a frame
/// that knows the rate comes (the decoder tells it from the second on).
public final class Y4MFileRenderer: VideoRenderer, @unchecked Sendable {   // one receive thread at a time
    public let path: String
    /// The rate written when the stream never says one (a single frame).
    private let framesPerSecond: Double
    private var writer: Y4MWriter?
    private var held: VideoFrame?
    public private(set) var framesOfAnotherSize = 0

    /// Creates (empties) the file at once, so an unwritable path fails
    /// before connecting; the header follows with the first frames.
    public init(path: String, framesPerSecond: Double = 30) throws(RenderError) {
        self.path = path
        self.framesPerSecond = framesPerSecond
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw RenderError(target: path, reason: String(cString: strerror(errno))) }
        close(fd)
    }

    public func render(_ frame: VideoFrame) throws(RenderError) {
        do {
            if writer == nil {
                let rate = frame.format.estimatedFramesPerSecond
                if rate <= 0, held == nil {
                    let first = VideoFrame(maxWidth: frame.width, maxHeight: frame.height)
                    first.copy(from: frame)
                    held = first
                    return
                }
                let first = held ?? frame
                writer = try Y4MWriter(path: path, width: first.width, height: first.height,
                                       framesPerSecond: rate > 0 ? rate : framesPerSecond, fullRange: first.isFullRange)
                if let held {
                    self.held = nil
                    try write(held)
                }
            }
            try write(frame)
        } catch {
            throw RenderError(target: path, reason: error.description)
        }
    }

    private func write(_ frame: VideoFrame) throws(MediaFileError) {
        guard let writer, writer.width == frame.width, writer.height == frame.height else {
            framesOfAnotherSize += 1
            return
        }
        try writer.write(frame)
    }

    public func finish() throws(RenderError) {
        do {
            if writer == nil, let held {   // one frame only: the default rate
                writer = try Y4MWriter(path: path, width: held.width, height: held.height,
                                       framesPerSecond: framesPerSecond, fullRange: held.isFullRange)
                self.held = nil
                try write(held)
            }
            try writer?.close()
        } catch {
            throw RenderError(target: path, reason: error.description)
        }
        writer = nil
    }

    public var framesWritten: Int { writer?.framesWritten ?? 0 }
}

/// Audio into a WAV file (S16), created at once so that an unwritable path
/// fails before connecting.
public final class WAVFileRenderer: AudioRenderer, @unchecked Sendable {   // one receive thread at a time
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    private var writer: WAVWriter?

    public init(path: String, sampleRate: Int = 48_000, channels: Int = 1) throws(RenderError) {
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        do { writer = try WAVWriter(path: path, sampleRate: sampleRate, channels: channels) } catch {
            throw RenderError(target: path, reason: error.description)
        }
    }

    public func render(_ samples: UnsafeBufferPointer<Int16>) throws(RenderError) {
        do { try writer?.write(samples) } catch { throw RenderError(target: path, reason: error.description) }
    }

    public func finish() throws(RenderError) {
        do { try writer?.close() } catch { throw RenderError(target: path, reason: error.description) }
        writer = nil
    }
}
