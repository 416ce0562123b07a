#if canImport(Glibc)
import Glibc
#endif
import MediaTypes

/// Writes 16-bit PCM WAV files; the sizes in the header are patched on close.
public final class WAVWriter {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    private let fd: Int32
    private var dataBytes = 0
    private var closed = false

    public init(path: String, sampleRate: Int, channels: Int) throws(MediaFileError) {
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        try writeBytes(header(dataBytes: 0))
    }

    deinit { if !closed { Glibc.close(fd) } }

    private func header(dataBytes: Int) -> [UInt8] {
        var h: [UInt8] = []
        func u32(_ v: Int) { h += [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }
        func u16(_ v: Int) { h += [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        h += Array("RIFF".utf8); u32(36 + dataBytes); h += Array("WAVE".utf8)
        h += Array("fmt ".utf8); u32(16); u16(1); u16(channels); u32(sampleRate)
        u32(sampleRate * channels * 2); u16(channels * 2); u16(16)
        h += Array("data".utf8); u32(dataBytes)
        return h
    }

    private func writeBytes(_ bytes: [UInt8]) throws(MediaFileError) {
        let ok = bytes.withUnsafeBytes { raw in Self.writeAll(fd, raw) }
        if !ok { throw .writeFailed(path: path, errno: errno) }
    }

    private static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < raw.count {
            let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
            if n < 0 { if errno == EINTR { continue }; return false }
            offset += n
        }
        return true
    }

    /// Appends interleaved samples (little-endian on this platform, as WAV wants).
    public func write(_ samples: UnsafeBufferPointer<Int16>) throws(MediaFileError) {
        guard Self.writeAll(fd, UnsafeRawBufferPointer(samples)) else { throw .writeFailed(path: path, errno: errno) }
        dataBytes += samples.count * 2
    }

    public var framesWritten: Int { dataBytes / (2 * channels) }

    public func close() throws(MediaFileError) {
        guard !closed else { return }
        closed = true
        defer { Glibc.close(fd) }
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw .writeFailed(path: path, errno: errno) }
        let ok = header(dataBytes: dataBytes).withUnsafeBytes { Self.writeAll(fd, $0) }
        if !ok { throw .writeFailed(path: path, errno: errno) }
    }
}

/// Reads 16-bit PCM WAV files.
public struct WAVFile: Sendable {
    public var sampleRate: Int
    public var channels: Int
    /// Interleaved samples.
    public var samples: [Int16]

    /// The largest file read: 256 MiB, 23 minutes of 48 kHz stereo.
    public static let maxFileBytes = 256 << 20
    public static let sampleRates = 1000...384_000
    public static let maxChannels = 32

    public init(path: String) throws(MediaFileError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        defer { Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw .cannotOpen(path: path, errno: errno) }
            if n == 0 { break }
            bytes += chunk[0..<n]
            // A bound, or --audio file:/dev/zero reads until memory runs out.
            guard bytes.count <= Self.maxFileBytes else {
                throw .malformed(path: path, reason: "larger than \(Self.maxFileBytes >> 20) MiB")
            }
        }
        func u32(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2]) << 16 | Int(bytes[i + 3]) << 24 }
        func u16(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 }
        guard bytes.count >= 12, Array(bytes[0..<4]) == Array("RIFF".utf8), Array(bytes[8..<12]) == Array("WAVE".utf8) else {
            throw .malformed(path: path, reason: "not a RIFF/WAVE file")
        }
        var i = 12
        var rate = 0, chans = 0, bits = 0, formatTag = 0
        var data: ArraySlice<UInt8>?
        while i + 8 <= bytes.count {
            let id = String(decoding: bytes[i..<(i + 4)], as: UTF8.self)
            let size = u32(i + 4)
            let body = i + 8
            if id == "fmt " && body + 16 <= bytes.count {
                formatTag = u16(body); chans = u16(body + 2); rate = u32(body + 4); bits = u16(body + 14)
            } else if id == "data" {
                data = bytes[body..<min(body + size, bytes.count)]
            }
            i = body + size + (size & 1)
        }
        guard formatTag == 1 || formatTag == 0xFFFE, bits == 16, chans > 0, rate > 0, let data else {
            throw .malformed(path: path, reason: "only 16-bit PCM WAV files are supported")
        }
        // A rate of 1 Hz made converting to 48 kHz ask for 48,000 times the file; 65535 channels
        // made a player's buffers absurd. Real files sit well inside these.
        guard Self.sampleRates.contains(rate), chans <= Self.maxChannels else {
            throw .malformed(path: path, reason: "\(rate) Hz, \(chans) channels: camagent takes \(Self.sampleRates.lowerBound)-\(Self.sampleRates.upperBound) Hz and at most \(Self.maxChannels) channels")
        }
        sampleRate = rate
        channels = chans
        samples = stride(from: data.startIndex, to: data.endIndex - 1, by: 2).map {
            Int16(bitPattern: UInt16(data[$0]) | UInt16(data[$0 + 1]) << 8)
        }
    }
}

extension WAVFile {
    /// The samples at another rate and channel count (for playing a file into
    /// a capture format): channels mixed down or copied, rate changed by
    /// linear interpolation, which suits speech and tones for tests and demos.
    public func converted(toRate rate: Int, channels outChannels: Int) -> [Int16] {
        let frames = samples.count / channels
        guard frames > 0 else { return [] }
        var mono = [Float](repeating: 0, count: frames)
        for f in 0..<frames {
            var sum: Float = 0
            for c in 0..<channels { sum += Float(samples[f * channels + c]) }
            mono[f] = sum / Float(channels)
        }
        let outFrames = Int((Double(frames) * Double(rate) / Double(sampleRate)).rounded(.down))
        var out = [Int16](repeating: 0, count: outFrames * outChannels)
        let step = Double(sampleRate) / Double(rate)
        for f in 0..<outFrames {
            let position = Double(f) * step
            let i = Int(position)
            let t = Float(position - Double(i))
            let a = mono[min(i, frames - 1)], b = mono[min(i + 1, frames - 1)]
            let value = Int16(max(-32768, min(32767, (a + (b - a) * t).rounded())))
            for c in 0..<outChannels { out[f * outChannels + c] = value }
        }
        return out
    }
}
