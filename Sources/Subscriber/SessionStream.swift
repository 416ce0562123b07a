import Foundation

/// A stream of a router session, as `GET /v2/sessions/{sid}/streams` lists it.
public struct SessionStream: Sendable, Codable, Equatable {
    public var streamId: String
    public var connectionId: String
    public var name: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    /// Its audio is being captioned (the session's captions run and its publisher asked).
    public var hasCaptions: Bool
    public var width: Int
    public var height: Int
    /// camera, screen or custom.
    public var videoType: String
    /// When it was published, in milliseconds since 1970 (the router's clock).
    public var createdAt: Int64
}

extension SessionStream {
    /// A `streamPropertyChanged` applied: hasAudio, hasVideo and hasCaptions
    /// take `true`/`false`, videoDimensions `{"width","height"}` (the values as
    /// JSON text). False when the property is unknown or its value unreadable.
    package mutating func apply(property: String, newValue: String) -> Bool {
        struct Size: Decodable { var width: Int; var height: Int }
        let json = Data(newValue.utf8), decoder = JSONDecoder()
        switch property {
        case "hasAudio", "hasVideo", "hasCaptions":
            guard let on = try? decoder.decode(Bool.self, from: json) else { return false }
            if property == "hasAudio" { hasAudio = on } else if property == "hasVideo" { hasVideo = on } else { hasCaptions = on }
        case "videoDimensions":
            guard let size = try? decoder.decode(Size.self, from: json) else { return false }
            (width, height) = (size.width, size.height)
        default:
            return false
        }
        return true
    }
}
