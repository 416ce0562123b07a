/// A pixel format named by its V4L2 FourCC code ("YUYV", "NV12", "MJPG"...).
///
/// Kept as the raw code rather than an enum because devices report many formats
/// camagent does not convert (vivid alone lists 83); they still need a name.
public struct PixelFormat: Hashable, Sendable, CustomStringConvertible {
    public let fourcc: UInt32

    public init(fourcc: UInt32) { self.fourcc = fourcc }

    /// Builds the code from its four ASCII characters, e.g. `PixelFormat("YUYV")`.
    public init(_ code: StaticString) {
        precondition(code.utf8CodeUnitCount == 4, "a FourCC has four characters")
        let p = code.utf8Start
        fourcc = UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24
    }

    /// Parses a four-character string such as "YUYV"; nil if it is not four ASCII characters.
    public init?(name: String) {
        let bytes = Array(name.utf8)
        guard bytes.count == 4, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
        fourcc = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
    }

    public static let nv12 = PixelFormat("NV12")
    public static let yuyv = PixelFormat("YUYV")
    public static let mjpeg = PixelFormat("MJPG")
    /// Plain JPEG: some cameras report MJPEG under this code.
    public static let jpeg = PixelFormat("JPEG")
    /// I420 (V4L2 calls it YU12): three planes, what Y4M files carry.
    public static let i420 = PixelFormat("YU12")

    /// The four characters, with trailing spaces kept ("Y16 "); formats with
    /// the big-endian bit (31) set get "-BE", as v4l2-ctl names them.
    public var name: String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: (fourcc & 0x7FFF_FFFF) >> (8 * $0)) }
        let text = String(decoding: bytes, as: UTF8.self)
        return fourcc & 0x8000_0000 != 0 ? text + "-BE" : text
    }

    public var description: String { name }

    /// True for compressed formats whose buffers vary in size (MJPEG, JPEG).
    public var isCompressed: Bool { self == .mjpeg || self == .jpeg }
}
