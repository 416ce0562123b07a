/// Width and height of a picture in pixels.
public struct FrameSize: Hashable, Sendable, CustomStringConvertible, Comparable {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// Parses "1280x720".
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        self.init(width: w, height: h)
    }

    public var pixelCount: Int { width * height }
    public var description: String { "\(width)x\(height)" }

    public static func < (a: FrameSize, b: FrameSize) -> Bool {
        (a.pixelCount, a.width) < (b.pixelCount, b.width)
    }
}
