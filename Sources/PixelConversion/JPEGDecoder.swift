internal import CTurboJPEG
internal import CYUV
import MediaTypes

/// Decodes MJPEG frames into NV12 with libjpeg-turbo.
///
/// The luma plane is decoded straight into the frame; chroma comes out at the
/// JPEG's own subsampling (4:2:2 from UVC webcams, 4:2:0, 4:4:4...) into
/// scratch planes, is scaled to 4:2:0 with libyuv when needed, and interleaved
/// into the frame's UV plane. Scratch is allocated once for the largest size
/// seen; one decoder serves one capture thread.
public final class JPEGDecoder {
    private let handle: tjhandle
    private var scratch: UnsafeMutableRawPointer?
    private var scratchBytes = 0

    public init() {
        guard let h = tjInitDecompress() else { fatalError("tjInitDecompress failed: out of memory") }
        handle = h
    }

    deinit {
        tjDestroy(handle)
        scratch?.deallocate()
    }

    private func scratch(atLeast bytes: Int) -> UnsafeMutableRawPointer {
        if bytes > scratchBytes {
            scratch?.deallocate()
            scratch = .allocate(byteCount: bytes, alignment: 64)
            scratchBytes = bytes
        }
        return scratch!
    }

    /// Decodes one JPEG (validated first: see `NV12Conversion.validatedJPEG`) into `frame`.
    public func decode(_ source: UnsafeRawBufferPointer, into frame: VideoFrame) throws(JPEGError) {
        guard let jpeg = NV12Conversion.validatedJPEG(source) else { throw .brokenMarkers }
        let bytes = jpeg.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        guard tjDecompressHeader3(handle, bytes, UInt(jpeg.count), &width, &height, &subsampling, &colorspace) == 0 else {
            throw .brokenMarkers
        }
        guard Int(width) == frame.width, Int(height) == frame.height else {
            throw .sizeMismatch(width: Int(width), height: Int(height))
        }
        let (w, h) = (Int(width), Int(height))
        let (cw, ch) = ((w + 1) / 2, (h + 1) / 2)
        let y = frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let uv = frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self)

        if subsampling == Int32(TJSAMP_GRAY.rawValue) {
            try decompress(bytes, count: jpeg.count, width: width, height: height,
                           planes: (y, nil, nil), strides: (Int32(frame.yStride), 0, 0))
            for row in 0..<ch { (uv + row * frame.uvStride).update(repeating: 128, count: 2 * cw) }
            return
        }

        // Chroma planes at the JPEG's own size, then (if needed) scaled to 4:2:0.
        let pw = Int(tjPlaneWidth(1, width, subsampling)), ph = Int(tjPlaneHeight(1, height, subsampling))
        guard pw > 0, ph > 0 else { throw .decodeFailed }
        let native = pw * ph, half = cw * ch
        let base = scratch(atLeast: 2 * native + 2 * half).assumingMemoryBound(to: UInt8.self)
        let (u, v) = (base, base + native)
        try decompress(bytes, count: jpeg.count, width: width, height: height,
                       planes: (y, u, v), strides: (Int32(frame.yStride), Int32(pw), Int32(pw)))
        if pw == cw && ph == ch {
            MergeUVPlane(u, Int32(pw), v, Int32(pw), uv, Int32(frame.uvStride), Int32(cw), Int32(ch))
            return
        }
        let (u2, v2) = (base + 2 * native, base + 2 * native + half)
        ScalePlane(u, Int32(pw), Int32(pw), Int32(ph), u2, Int32(cw), Int32(cw), Int32(ch), kFilterBox)
        ScalePlane(v, Int32(pw), Int32(pw), Int32(ph), v2, Int32(cw), Int32(cw), Int32(ch), kFilterBox)
        MergeUVPlane(u2, Int32(cw), v2, Int32(cw), uv, Int32(frame.uvStride), Int32(cw), Int32(ch))
    }

    /// tjDecompressToYUVPlanes with its plane and stride arrays kept in
    /// tuples on the stack: Swift arrays here would allocate on every frame.
    private func decompress(_ bytes: UnsafePointer<UInt8>, count: Int, width: Int32, height: Int32,
                            planes: (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?),
                            strides: (Int32, Int32, Int32)) throws(JPEGError) {
        var planes = planes, strides = strides
        let status = withUnsafeMutableBytes(of: &planes) { planePointers in
            withUnsafeMutableBytes(of: &strides) { strideValues in
                tjDecompressToYUVPlanes(
                    handle, bytes, UInt(count),
                    planePointers.baseAddress!.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self), width,
                    strideValues.baseAddress!.assumingMemoryBound(to: Int32.self), height, 0)
            }
        }
        guard status == 0 else { throw .decodeFailed }
    }
}
