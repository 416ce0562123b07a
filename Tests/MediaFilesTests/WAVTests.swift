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
}
