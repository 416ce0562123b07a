import Foundation
import MediaFiles
import MediaTypes
import PixelConversion
import Testing

@Suite("Y4M files")
struct Y4MTests {
    @Test func rateFractions() {
        #expect(Y4MWriter.rateFraction(30) == (30, 1))
        #expect(Y4MWriter.rateFraction(12.5) == (25, 2))
        #expect(Y4MWriter.rateFraction(29.97) == (30000, 1001))
    }

    @Test func ffmpegReadsWhatWeWrite() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-\(UUID()).y4m").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try Y4MWriter(path: path, width: 320, height: 240, framesPerSecond: 25)
        let renderer = TestPatternRenderer(width: 320, height: 240)
        let f = VideoFrame(maxWidth: 320, maxHeight: 240)
        for i: UInt32 in 0..<7 {
            renderer.render(counter: i, into: f)
            try writer.write(f)
        }
        try writer.close()
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let header = "YUV4MPEG2 W320 H240 F25:1 Ip A1:1 C420jpeg\n"
        #expect(data.count == header.utf8.count + 7 * (6 + 320 * 240 * 3 / 2))
        #expect(data.prefix(header.utf8.count) == Data(header.utf8))

        let p = Process()
        let pipe = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
        p.arguments = ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height",
                       "-of", "csv=p=0", path]
        p.standardOutput = pipe
        try p.run()
        p.waitUntilExit()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "320,240,7")
    }

    @Test func wrongSizeIsAnError() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("camagent-\(UUID()).y4m").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try Y4MWriter(path: path, width: 320, height: 240, framesPerSecond: 25)
        let f = VideoFrame(maxWidth: 160, maxHeight: 120)
        f.setFormat(.nv12(width: 160, height: 120, framesPerSecond: 25))
        #expect(throws: MediaFileError.self) { try writer.write(f) }
    }

    @Test func unwritablePathNamesTheFile() {
        #expect(throws: MediaFileError.cannotOpen(path: "/nonexistent-dir/x.y4m", errno: ENOENT)) {
            _ = try Y4MWriter(path: "/nonexistent-dir/x.y4m", width: 320, height: 240, framesPerSecond: 25)
        }
    }
}
