import Foundation
import MediaTypes
import Testing
@testable import Subscriber

@Suite("Y4M file renderer")
struct Y4MFileRendererTests {
    private func frame(value: UInt8, framesPerSecond: Double) -> VideoFrame {
        let frame = VideoFrame(maxWidth: 16, maxHeight: 8)
        frame.setFormat(.nv12(width: 16, height: 8, framesPerSecond: framesPerSecond))
        frame.yPlane.initializeMemory(as: UInt8.self, repeating: value)
        frame.uvPlane.initializeMemory(as: UInt8.self, repeating: 128)
        return frame
    }

    private func file(_ name: String) -> String {
        NSTemporaryDirectory() + "camagent-y4m-\(getpid())-\(name).y4m"
    }

    /// The decoder knows the rate only from the second frame on: the first is held
    /// and written after the header, which carries the stream's rate (not 30).
    @Test func theHeaderCarriesTheStreamsRate() throws {
        let path = file("rate")
        defer { unlink(path) }
        let renderer = try Y4MFileRenderer(path: path)
        let first = frame(value: 10, framesPerSecond: 0)
        try renderer.render(first)
        first.yPlane.initializeMemory(as: UInt8.self, repeating: 99)   // the decoder reuses its picture
        try renderer.render(frame(value: 20, framesPerSecond: 10))
        try renderer.finish()
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let header = String(decoding: bytes.prefix { $0 != 0x0A }, as: UTF8.self)
        #expect(header.split(separator: " ").contains("F10:1"), "\(header)")
        // Two frames in order: the held copy (10), not what the decoder wrote over it later.
        let frameBytes = 16 * 8 * 3 / 2
        let body = bytes.dropFirst(header.utf8.count + 1)
        #expect(body.count == 2 * ("FRAME\n".utf8.count + frameBytes))
        let firstLuma = body.dropFirst("FRAME\n".utf8.count).first
        let secondLuma = body.dropFirst(2 * "FRAME\n".utf8.count + frameBytes).first
        #expect((firstLuma, secondLuma) == (10, 20))
    }

    /// The decoder's rate for the header: one late capture must not make a 30 fps file
    /// say 29 (seen in CI), nor a thinned 15 fps stream say 8.
    @Test(arguments: [(29.0, 30.0), (31.5, 30.0), (14.2, 15.0), (7.4, 7.5), (25.8, 25.0), (59.0, 60.0), (3.2, 3.0), (40.0, 40.0)])
    func theMeasuredRateIsTakenToTheNominalOne(measured: Double, nominal: Double) {
        #expect(VideoDecoding.nominalFrameRate(measured) == nominal)
    }

    /// A stream that ends after one frame still gets its file, at the default rate.
    @Test func oneFrameIsWrittenAtTheDefaultRate() throws {
        let path = file("single")
        defer { unlink(path) }
        let renderer = try Y4MFileRenderer(path: path)
        try renderer.render(frame(value: 10, framesPerSecond: 0))
        try renderer.finish()
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let header = String(decoding: bytes.prefix { $0 != 0x0A }, as: UTF8.self)
        #expect(header.split(separator: " ").contains("F30:1"), "\(header)")
        #expect(bytes.count == header.utf8.count + 1 + "FRAME\n".utf8.count + 16 * 8 * 3 / 2)
    }
}
