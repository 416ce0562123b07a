import MediaTypes

/// Draws camagent's test pattern into NV12 frames: colour bars that move one
/// step per frame, the frame counter in digits, and the same counter as a
/// barcode that survives YUYV/JPEG round trips and lossy video codecs.
///
/// Barcode layout (see `TestPatternCounter`): a band across the top of the
/// luma plane, `bandHeight` rows tall, split into 40 equal cells; a cell is
/// white (Y=235) for 1 and black (Y=16) for 0. Cells 0-3 are the guard
/// 1,0,1,0; cells 4-35 the 32-bit counter, most significant bit first;
/// cells 36-39 a check nibble (XOR of the counter's eight nibbles).
public final class TestPatternRenderer {
    public let width: Int
    public let height: Int
    /// One row of bars (Y), and one row of bars (interleaved UV), drawn twice
    /// as wide so a moved window is a single copy; allocated once.
    private let barsY: UnsafeMutablePointer<UInt8>
    private let barsUV: UnsafeMutablePointer<UInt8>

    /// Bars in BT.601 limited range: white, yellow, cyan, green, magenta, red, blue.
    private static let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
        (235, 128, 128), (210, 16, 146), (170, 166, 16), (145, 54, 34),
        (106, 202, 222), (81, 90, 240), (41, 240, 110),
    ]

    public init(width: Int, height: Int) {
        precondition(width >= 160 && height >= 120 && width % 2 == 0 && height % 2 == 0,
                     "the test pattern needs an even size of at least 160x120")
        self.width = width
        self.height = height
        barsY = .allocate(capacity: width * 2)
        barsUV = .allocate(capacity: width * 2)
        let barWidth = (width + Self.bars.count - 1) / Self.bars.count
        for x in 0..<(width * 2) {
            let bar = Self.bars[((x % width) / barWidth) % Self.bars.count]
            barsY[x] = bar.y
        }
        for x in stride(from: 0, to: width * 2, by: 2) {
            let bar = Self.bars[((x % width) / barWidth) % Self.bars.count]
            barsUV[x] = bar.u
            barsUV[x + 1] = bar.v
        }
    }

    deinit {
        barsY.deallocate()
        barsUV.deallocate()
    }

    public var bandHeight: Int { TestPatternCounter.bandHeight(forHeight: height) }

    /// Draws frame number `counter` into `frame` (whose format is set to this size).
    public func render(counter: UInt32, into frame: VideoFrame, framesPerSecond: Double = 0) {
        frame.setFormat(.nv12(width: width, height: height, framesPerSecond: framesPerSecond))
        let y = frame.yPlane.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let uv = frame.uvPlane.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // Moving bars: 4 pixels a frame (even, so chroma pairs stay aligned).
        let shift = Int((UInt64(counter) * 4) % UInt64(width))
        for row in 0..<height {
            (y + row * frame.yStride).update(from: barsY + shift, count: width)
        }
        for row in 0..<(height / 2) {
            (uv + row * frame.uvStride).update(from: barsUV + shift, count: width)
        }
        drawBarcode(counter, y: y, stride: frame.yStride)
        neutralizeChroma(rows: 0..<bandHeight, columns: 0..<width, uv: uv, stride: frame.uvStride)
        drawDigits(counter, y: y, uv: uv, yStride: frame.yStride, uvStride: frame.uvStride)
    }

    private func fill(_ y: UnsafeMutablePointer<UInt8>, stride: Int, rows: Range<Int>, columns: Range<Int>, value: UInt8) {
        for row in rows {
            (y + row * stride + columns.lowerBound).update(repeating: value, count: columns.count)
        }
    }

    private func neutralizeChroma(rows: Range<Int>, columns: Range<Int>, uv: UnsafeMutablePointer<UInt8>, stride: Int) {
        let first = columns.lowerBound & ~1
        for row in (rows.lowerBound / 2)..<((rows.upperBound + 1) / 2) {
            (uv + row * stride + first).update(repeating: 128, count: min(columns.upperBound + 1, width) - first)
        }
    }

    private func drawBarcode(_ counter: UInt32, y: UnsafeMutablePointer<UInt8>, stride: Int) {
        let band = bandHeight
        for cell in 0..<TestPatternCounter.cellCount {
            let columns = TestPatternCounter.cellColumns(cell, width: width)
            fill(y, stride: stride, rows: 0..<band, columns: columns,
                 value: TestPatternCounter.bit(cell, of: counter) ? 235 : 16)
        }
    }

    // MARK: digits

    /// 5x7 glyphs for 0-9, one byte per row, bit 4 is the leftmost pixel.
    private static let glyphs: [[UInt8]] = [
        [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
    ]

    private func drawDigits(_ counter: UInt32, y: UnsafeMutablePointer<UInt8>, uv: UnsafeMutablePointer<UInt8>,
                            yStride: Int, uvStride: Int) {
        let scale = max(2, height / 60)
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var value = counter
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[count] = UInt8(value % 10)
                value /= 10
                count += 1
            } while value > 0
        }
        let glyphW = 6 * scale, glyphH = 9 * scale
        let top = bandHeight + 2 * scale
        let left = 2 * scale
        let boxW = min(count * glyphW + scale, width - left)
        guard top + glyphH <= height else { return }
        fill(y, stride: yStride, rows: top..<(top + glyphH), columns: left..<(left + boxW), value: 16)
        neutralizeChroma(rows: top..<(top + glyphH), columns: left..<(left + boxW), uv: uv, stride: uvStride)
        withUnsafeBytes(of: digits) { d in
            for i in 0..<count {
                let glyph = Self.glyphs[Int(d[count - 1 - i])]
                let x0 = left + scale + i * glyphW
                guard x0 + 5 * scale <= width else { break }
                for (r, bitsRow) in glyph.enumerated() {
                    let rowTop = top + scale + r * scale
                    for c in 0..<5 where bitsRow & (0x10 >> c) != 0 {
                        fill(y, stride: yStride, rows: rowTop..<(rowTop + scale),
                             columns: (x0 + c * scale)..<(x0 + (c + 1) * scale), value: 235)
                    }
                }
            }
        }
    }
}

/// Reads the frame counter back from a test-pattern picture (see
/// `TestPatternRenderer` for the layout). The Python twin is Tests/Device/pattern.py.
public enum TestPatternCounter {
    public static let cellCount = 40

    public static func bandHeight(forHeight height: Int) -> Int { max(16, height / 12) }

    /// Columns of barcode cell `cell` in a picture `width` pixels wide.
    public static func cellColumns(_ cell: Int, width: Int) -> Range<Int> {
        (cell * width / cellCount)..<((cell + 1) * width / cellCount)
    }

    static func checkNibble(_ counter: UInt32) -> UInt32 {
        var x: UInt32 = 0
        for i in 0..<8 { x ^= (counter >> (4 * i)) & 0xF }
        return x
    }

    /// The value of barcode cell `cell` (0..<40) for a counter.
    public static func bit(_ cell: Int, of counter: UInt32) -> Bool {
        switch cell {
        case 0..<4: return cell % 2 == 0  // guard 1,0,1,0
        case 4..<36: return (counter >> (35 - cell)) & 1 == 1
        default: return (checkNibble(counter) >> (39 - cell)) & 1 == 1
        }
    }

    /// The counter drawn in a luma plane, or nil when there is none (guard
    /// or check nibble wrong). Each cell is judged by the mean of its middle.
    public static func decode(y: UnsafeRawBufferPointer, stride: Int, width: Int, height: Int) -> UInt32? {
        let band = bandHeight(forHeight: height)
        guard width >= cellCount * 2, y.count >= stride * band else { return nil }
        var value: UInt64 = 0
        for cell in 0..<cellCount {
            let columns = cellColumns(cell, width: width)
            let x0 = columns.lowerBound + columns.count / 4, x1 = columns.upperBound - columns.count / 4
            let y0 = band / 4, y1 = band - band / 4
            var sum = 0, n = 0
            for row in y0..<y1 {
                for x in x0..<max(x1, x0 + 1) {
                    sum += Int(y[row * stride + x])
                    n += 1
                }
            }
            value = value << 1 | (sum / max(n, 1) > 128 ? 1 : 0)
        }
        let guardValue = value >> 36, counter = UInt32((value >> 4) & 0xFFFF_FFFF), check = UInt32(value & 0xF)
        guard guardValue == 0b1010, check == checkNibble(counter) else { return nil }
        return counter
    }

    public static func decode(_ frame: VideoFrame) -> UInt32? {
        decode(y: UnsafeRawBufferPointer(frame.yPlane), stride: frame.yStride, width: frame.width, height: frame.height)
    }
}
