/// How the camera is mounted: a clockwise rotation and an optional horizontal mirror.
///
/// Carried on every frame as metadata; pixels are rotated only when asked
/// (`--rotate-pixels`), because most consumers (encoders with a rotation
/// RTP extension, a browser) can apply it for free.
public struct VideoOrientation: Hashable, Sendable, CustomStringConvertible {
    public enum Rotation: Int, Sendable, CaseIterable {
        case none = 0, clockwise90 = 90, upsideDown = 180, clockwise270 = 270
    }

    public var rotation: Rotation
    public var mirrored: Bool

    public init(rotation: Rotation = .none, mirrored: Bool = false) {
        self.rotation = rotation
        self.mirrored = mirrored
    }

    public static let upright = VideoOrientation()

    /// True when a consumer must do nothing to show the frame as captured.
    public var isUpright: Bool { rotation == .none && !mirrored }

    public var description: String { "\(rotation.rawValue)°\(mirrored ? " mirrored" : "")" }
}
