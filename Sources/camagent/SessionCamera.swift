import Publisher

/// One camera's stream as publish's own session is told of it (a local
/// stream): its publisher, and what it carries.
struct SessionCamera: Sendable {
    let publisher: Publisher
    let name: String
    let hasAudio: Bool
    let hasVideo: Bool
    let width: Int
    let height: Int
}
