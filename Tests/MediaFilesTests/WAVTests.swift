import Foundation
import MediaFiles
import Testing

@Suite("WAV files")
struct WAVTests {
    @Test func roundTripAndSoxReadsIt() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let w = try WAVWriter(path: path, sampleRate: 16_000, channels: 2)
        let samples: [Int16] = (0..<3200).map { Int16(truncatingIfNeeded: $0 * 7 - 5000) }
        try samples.withUnsafeBufferPointer { try w.write($0) }
        try w.close()
        let r = try WAVFile(path: path)
        #expect(r.sampleRate == 16_000 && r.channels == 2 && r.samples == samples)
        // soxi, a tool nobody here wrote, agrees on the header.
        let p = Process()
        let pipe = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/soxi")
        p.arguments = ["-s", path]
        p.standardOutput = pipe
        try p.run()
        p.waitUntilExit()
        let frames = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(frames.trimmingCharacters(in: .whitespacesAndNewlines) == "1600")
    }

    @Test func notAWAV() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("hello".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: MediaFileError.malformed(path: path, reason: "not a RIFF/WAVE file")) { try WAVFile(path: path) }
    }

    /// A 16-bit PCM header with any rate and channel count, and `frames` frames of silence.
    static func wav(rate: UInt32, channels: UInt16, frames: Int) -> Data {
        func le32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }
        func le16(_ v: UInt16) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }
        let dataBytes = frames * Int(channels) * 2
        var bytes = Array("RIFF".utf8) + le32(UInt32(36 + dataBytes)) + Array("WAVE".utf8)
        bytes += Array("fmt ".utf8) + le32(16) + le16(1) + le16(channels) + le32(rate)
        bytes += le32(rate &* UInt32(channels) &* 2) + le16(channels &* 2) + le16(16)
        bytes += Array("data".utf8) + le32(UInt32(dataBytes)) + [UInt8](repeating: 0, count: dataBytes)
        return Data(bytes)
    }

    /// A rate of 1 Hz made publish's conversion to 48 kHz ask for 48,000 times the file
    /// (about 48 GB for 1 MB), and `play` divided by a chunk of 0 frames; 65535 channels
    /// made a player's buffers absurd. Such headers are refused with the reason.
    @Test(arguments: [(UInt32(1), UInt16(1)), (999, 1), (384_001, 2), (0xFFFF_FFFF, 1), (48_000, 33), (48_000, 65535)])
    func ratesAndChannelsOutsideWhatIsTaken(rate: UInt32, channels: UInt16) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.wav(rate: rate, channels: channels, frames: 10).write(to: URL(fileURLWithPath: path))
        #expect(throws: MediaFileError.malformed(path: path, reason: "\(rate) Hz, \(channels) channels: camagent takes 1000-384000 Hz and at most 32 channels")) {
            try WAVFile(path: path)
        }
    }

    @Test func ratesAndChannelsAtTheBounds() throws {
        for (rate, channels) in [(UInt32(1000), UInt16(1)), (384_000, 32)] {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-\(UUID()).wav").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            try Self.wav(rate: rate, channels: channels, frames: 10).write(to: URL(fileURLWithPath: path))
            let file = try WAVFile(path: path)
            #expect(file.sampleRate == Int(rate) && file.channels == Int(channels) && file.samples.count == 10 * Int(channels))
        }
    }

    /// `--audio file:/dev/zero` read until memory ran out.
    @Test func aFileWithoutEndIsReadUpToTheBound() {
        #expect(throws: MediaFileError.malformed(path: "/dev/zero", reason: "larger than 256 MiB")) { try WAVFile(path: "/dev/zero") }
    }
}
