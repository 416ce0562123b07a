import Foundation
import Logging
import MediaTypes
@testable import VideoSources

let testLogger: Logger = {
    var l = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    l.logLevel = .critical
    return l
}()

/// Collects what a capturer delivers.
final class CollectingConsumer: VideoCaptureConsumer, @unchecked Sendable {  // state behind `lock`
    struct Seen {
        var identity: ObjectIdentifier
        var sequence: UInt64
        var timestamp: MonotonicTimestamp
        var deliveredAt: MonotonicTimestamp
        var width: Int
        var height: Int
        var firstLuma: UInt8
        var firstChroma: (UInt8, UInt8)
        var orientation: VideoOrientation
    }
    private let lock = NSLock()
    private var _frames: [Seen] = []
    private var _events: [CaptureEvent] = []
    /// Frames kept alive (to exhaust the pool on purpose).
    private var held: [VideoFrame] = []
    var holdFrames = false

    func consume(_ frame: VideoFrame) {
        let seen = Seen(identity: ObjectIdentifier(frame), sequence: frame.sequence, timestamp: frame.timestamp,
                        deliveredAt: frame.deliveredAt, width: frame.width, height: frame.height,
                        firstLuma: frame.yPlane[0], firstChroma: (frame.uvPlane[0], frame.uvPlane[1]),
                        orientation: frame.orientation)
        lock.lock()
        _frames.append(seen)
        if holdFrames { held.append(frame) }
        lock.unlock()
    }

    func captureEvent(_ event: CaptureEvent) {
        lock.lock()
        _events.append(event)
        lock.unlock()
    }

    var frames: [Seen] { lock.lock(); defer { lock.unlock() }; return _frames }
    var events: [CaptureEvent] { lock.lock(); defer { lock.unlock() }; return _events }
}

/// A YUYV picture whose every pixel is (y, u, v).
func yuyvFrame(width: Int, height: Int, y: UInt8, u: UInt8, v: UInt8) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: width * height * 2)
    for i in stride(from: 0, to: bytes.count, by: 4) {
        bytes[i] = y; bytes[i + 1] = u; bytes[i + 2] = y; bytes[i + 3] = v
    }
    return bytes
}

let vga = FrameSize(width: 640, height: 480)
let qvga = FrameSize(width: 320, height: 240)
let hd = FrameSize(width: 1280, height: 720)
let fullHD = FrameSize(width: 1920, height: 1080)

func fps(_ rate: UInt32) -> V4L2FrameIntervalEntry { .discrete(FrameInterval(numerator: 1, denominator: rate)) }

extension CaptureEvent {
    var isDeviceLost: Bool { if case .deviceLost = self { return true }; return false }
    var isReconnected: Bool { if case .reconnected = self { return true }; return false }
    var failure: CaptureError? { if case .failed(let e) = self { return e }; return nil }
}
