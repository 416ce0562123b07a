import MediaTypes

/// Full-range (JPEG, 0-255) NV12 to the limited "video" range (luma 16-235,
/// chroma 16-240) that VP8 and H.264 receivers assume: MJPEG cameras
/// deliver full range, and encoding it as it is washes out blacks and
/// whites and dulls colours at the receiver. Two 256-entry tables, made
/// once; a frame costs one table look-up per byte.
public enum RangeConversion {
    /// Y' = 16 + Y * 219 / 255, rounded.
    private static let luma: [UInt8] = (0..<256).map { UInt8(16 + ($0 * 219 + 127) / 255) }
    /// C' = 128 + (C - 128) * 224 / 255, rounded half away from zero.
    private static let chroma: [UInt8] = (0..<256).map { c in
        let scaled = Double(c - 128) * 224 / 255
        return UInt8(128 + Int(scaled.rounded(.toNearestOrAwayFromZero)))
    }

    /// Writes `source` (full range) into `destination` in limited range; the
    /// two may be the same frame. `destination` takes `source`'s format.
    public static func fullToLimited(_ source: VideoFrame, into destination: VideoFrame) {
        destination.setFormat(source.format)
        luma.withUnsafeBufferPointer { table in
            map(source.yPlane, rowBytes: source.width, rows: source.height, stride: source.yStride,
                into: destination.yPlane, table: table)
        }
        chroma.withUnsafeBufferPointer { table in
            map(source.uvPlane, rowBytes: 2 * ((source.width + 1) / 2), rows: (source.height + 1) / 2,
                stride: source.uvStride, into: destination.uvPlane, table: table)
        }
    }

    private static func map(_ source: UnsafeMutableRawBufferPointer, rowBytes: Int, rows: Int, stride: Int,
                            into destination: UnsafeMutableRawBufferPointer, table: UnsafeBufferPointer<UInt8>) {
        let s = source.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let d = destination.baseAddress!.assumingMemoryBound(to: UInt8.self)
        for row in 0..<rows {
            let offset = row * stride
            for i in offset..<(offset + rowBytes) { d[i] = table[Int(s[i])] }
        }
    }
}
