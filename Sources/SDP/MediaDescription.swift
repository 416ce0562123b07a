public struct MediaDescription: Hashable, Sendable {
    public var kind: String            // audio, video, application
    public var port: Int
    public var proto: String           // UDP/TLS/RTP/SAVPF
    public var formats: [String]       // payload types, in preference order
    public var connection: String?     // the c= line's value
    public var attributes: [SDPAttribute]

    public init(kind: String, port: Int = 9, proto: String = "UDP/TLS/RTP/SAVPF", formats: [String],
                connection: String? = "IN IP4 0.0.0.0", attributes: [SDPAttribute] = []) {
        self.kind = kind
        self.port = port
        self.proto = proto
        self.formats = formats
        self.connection = connection
        self.attributes = attributes
    }

    public func values(_ name: String) -> [String] {
        attributes.filter { $0.name == name }.map { $0.value ?? "" }
    }

    public func value(_ name: String) -> String? {
        attributes.first { $0.name == name }?.value
    }

    public func has(_ name: String) -> Bool {
        attributes.contains { $0.name == name }
    }
}
