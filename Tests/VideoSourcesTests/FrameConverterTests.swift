import MediaTypes
import Testing
@testable import VideoSources

@Suite("FrameConverter")
struct FrameConverterTests {
    @Test("an NV12 picture of odd height needs (height + 1) / 2 chroma rows: one buffer short of them is too short, not a trap")
    func oddHeightNV12() throws {
        let format = V4L2PixFormat(pixelFormat: .nv12, width: 8, height: 5, bytesPerLine: 8, sizeImage: 64)
        let converter = FrameConverter(deviceFormat: format)
        #expect(converter.minimumBytes == 8 * (5 + 3))
        let frame = VideoFrame(maxWidth: 8, maxHeight: 5)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 16)
        defer { buffer.deallocate() }
        for i in 0..<64 { buffer[i] = UInt8(i) }
        // 8 * 5 * 3 / 2 = 60 bytes: the old minimum, which let copyNV12's precondition trap.
        #expect(throws: FrameConverter.Failure.tooShort) { try converter.convert(UnsafeRawBufferPointer(rebasing: buffer[..<60]), into: frame) }
        try converter.convert(UnsafeRawBufferPointer(buffer), into: frame)
        #expect(frame.yPlane.load(fromByteOffset: frame.yStride, as: UInt8.self) == 8)
        #expect(frame.uvPlane.load(fromByteOffset: 2 * frame.uvStride, as: UInt8.self) == 56)   // the third chroma row
    }
}
