import Foundation
import Glibc
import MediaTypes
@testable import AudioDevices

/// A scripted sound card behind `PCMSystem`: what it offers, and what each
/// read returns, so tests produce odd periods, overruns, busy and lost devices.
final class FakePCM: PCMSystem, @unchecked Sendable {  // state behind `lock`
    enum Read {
        /// `frames` frames whose samples count up from `firstValue`.
        case frames(Int, firstValue: Int16)
        case error(Int32)   // a positive errno, returned negated
    }

    private let lock = NSLock()
    var rates: [Int] = [44_100, 48_000]
    var channelRange = 1...2
    var takesS16 = true
    var periodOverride: Int?
    var openErrors: [Int32] = []       // errno for successive opens, then success
    private var reads: [Read] = []
    private(set) var recoverCalls: [Int32] = []
    private(set) var startCalls = 0
    private(set) var opens = 0
    private(set) var written: [Int16] = []

    func script(_ r: [Read]) { lock.lock(); reads += r; lock.unlock() }
    var remaining: Int { lock.lock(); defer { lock.unlock() }; return reads.count }
    var writtenSamples: [Int16] { lock.lock(); defer { lock.unlock() }; return written }
    var recovers: [Int32] { lock.lock(); defer { lock.unlock() }; return recoverCalls }
    var starts: Int { lock.lock(); defer { lock.unlock() }; return startCalls }

    func open(_ name: String, direction: AudioDirection) -> Result<PCMHandle, PCMOpenError> {
        lock.lock(); defer { lock.unlock() }
        opens += 1
        if !openErrors.isEmpty { return .failure(PCMOpenError(code: openErrors.removeFirst())) }
        return .success(PCMHandle(raw: 1))
    }

    func close(_ pcm: PCMHandle) {}

    func configure(_ pcm: PCMHandle, format: AudioFormat, periodFrames: Int, periods: Int,
                   direction: AudioDirection) -> Result<PCMConfiguration, PCMConfigurationError> {
        guard takesS16 else { return .failure(.formatNotSupported("the device does not take S16LE samples")) }
        guard channelRange.contains(format.channels) else {
            return .failure(.formatNotSupported("\(format.channels) channels not offered"))
        }
        let rate = rates.min { abs($0 - format.sampleRate) < abs($1 - format.sampleRate) }!
        let period = periodOverride ?? periodFrames
        return .success(PCMConfiguration(format: AudioFormat(sampleRate: rate, channels: format.channels),
                                          periodFrames: period, bufferFrames: period * periods))
    }

    func start(_ pcm: PCMHandle) -> Int32 { lock.lock(); startCalls += 1; lock.unlock(); return 0 }
    func drop(_ pcm: PCMHandle) {}
    func drain(_ pcm: PCMHandle) {}

    func wait(_ pcm: PCMHandle, wakeFD: Int32, timeoutMilliseconds: Int32) -> PCMWaitResult {
        if remaining > 0 { return .ready }
        var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&p, 1, min(timeoutMilliseconds, 20)) > 0 ? .woken : .timedOut
    }

    func read(_ pcm: PCMHandle, into buffer: UnsafeMutablePointer<Int16>, frames: Int) -> Int {
        lock.lock(); defer { lock.unlock() }
        guard !reads.isEmpty else { return -Int(EAGAIN) }
        switch reads.removeFirst() {
        case .error(let e):
            return -Int(e)
        case .frames(let n, let first):
            let count = min(n, frames)
            for i in 0..<count { buffer[i] = first &+ Int16(truncatingIfNeeded: i) }  // mono in these tests
            return count
        }
    }

    func write(_ pcm: PCMHandle, from buffer: UnsafePointer<Int16>, frames: Int) -> Int {
        lock.lock(); defer { lock.unlock() }
        guard written.count < 48_000 else { return -Int(EAGAIN) }
        written += UnsafeBufferPointer(start: buffer, count: frames)
        return frames
    }

    func recover(_ pcm: PCMHandle, error: Int32) -> Int32 {
        lock.lock(); recoverCalls.append(error); lock.unlock()
        return 0
    }

    func delay(_ pcm: PCMHandle) -> Int? { 480 }
    func timestamp(_ pcm: PCMHandle) -> (available: Int, at: MonotonicTimestamp)? { (0, .now()) }
}

/// Collects chunks (copied: they are only valid during the call).
final class ChunkCollector: AudioCaptureConsumer, @unchecked Sendable {
    private let lock = NSLock()
    private var _chunks: [[Int16]] = []
    private var _stamps: [MonotonicTimestamp] = []
    private var _events: [String] = []

    func consume(_ chunk: AudioChunk) {
        lock.lock()
        _chunks.append(Array(chunk.samples))
        _stamps.append(chunk.timestamp)
        lock.unlock()
    }

    func audioEvent(_ event: AudioEvent) { lock.lock(); _events.append(event.description); lock.unlock() }

    var chunks: [[Int16]] { lock.lock(); defer { lock.unlock() }; return _chunks }
    var stamps: [MonotonicTimestamp] { lock.lock(); defer { lock.unlock() }; return _stamps }
    var events: [String] { lock.lock(); defer { lock.unlock() }; return _events }
}
