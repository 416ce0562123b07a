/// An SDP session description (RFC 8866) as WebRTC uses it (RFC 8829):
/// session lines, then media sections, each with its attributes in order.
/// Parsing keeps every attribute; the typed accessors below read the ones a
/// publisher acts on.
public struct SessionDescription: Hashable, Sendable {
    public var sessionID: UInt64
    public var sessionVersion: UInt64
    public var sessionName: String
    public var attributes: [SDPAttribute]
    public var media: [MediaDescription]

    public init(sessionID: UInt64, sessionVersion: UInt64 = 2, sessionName: String = "-",
                attributes: [SDPAttribute] = [], media: [MediaDescription] = []) {
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.sessionName = sessionName
        self.attributes = attributes
        self.media = media
    }
}

extension SessionDescription {
    /// Parses SDP text; lines may end in CRLF or LF. Unknown line types are
    /// skipped, as RFC 8866 asks of a receiver.
    public init(parsing text: String) throws(SDPError) {
        var session = SessionDescription(sessionID: 0)
        var sawVersion = false, sawOrigin = false
        var current: MediaDescription?
        for (index, raw) in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline).enumerated() {
            let line = String(raw)
            let number = index + 1
            guard line.count >= 2, line.dropFirst().first == "=" else { throw .badLine(number: number, text: line) }
            let type = line.first!, value = String(line.dropFirst(2))
            switch type {
            case "v":
                guard value == "0" else { throw .badLine(number: number, text: line) }
                sawVersion = true
            case "o":
                let fields = value.split(separator: " ")
                guard fields.count == 6 else { throw .badLine(number: number, text: line) }
                session.sessionID = UInt64(fields[1]) ?? 0
                session.sessionVersion = UInt64(fields[2]) ?? 0
                sawOrigin = true
            case "s":
                session.sessionName = value
            case "m":
                if let m = current { session.media.append(m) }
                let fields = value.split(separator: " ").map(String.init)
                // "9" or "9/2" (a port count); "/" alone has no port to read.
                guard fields.count >= 3, let first = fields[1].split(separator: "/").first, let port = Int(first) else {
                    throw .badLine(number: number, text: line)
                }
                current = MediaDescription(kind: fields[0], port: port, proto: fields[2],
                                           formats: Array(fields.dropFirst(3)), connection: nil)
            case "c":
                current?.connection = value
            case "a":
                let attribute: SDPAttribute
                if let colon = value.firstIndex(of: ":") {
                    attribute = SDPAttribute(String(value[..<colon]), String(value[value.index(after: colon)...]))
                } else {
                    attribute = SDPAttribute(value)
                }
                if current != nil { current!.attributes.append(attribute) } else { session.attributes.append(attribute) }
            default:
                continue   // t=, b=, i=, ...: nothing a publisher acts on
            }
        }
        if let m = current { session.media.append(m) }
        guard sawVersion else { throw .missing("v= line") }
        guard sawOrigin else { throw .missing("o= line") }
        self = session
    }

    /// The description as SDP text, CRLF line ends.
    public var text: String {
        var lines = ["v=0", "o=- \(sessionID) \(sessionVersion) IN IP4 127.0.0.1", "s=\(sessionName)", "t=0 0"]
        lines += attributes.map(\.line)
        for m in media {
            lines.append("m=\(m.kind) \(m.port) \(m.proto) \(m.formats.joined(separator: " "))")
            if let c = m.connection { lines.append("c=\(c)") }
            lines += m.attributes.map(\.line)
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    public func value(_ name: String) -> String? {
        attributes.first { $0.name == name }?.value
    }

    /// A media-level attribute, else the session-level one (ICE credentials,
    /// fingerprint and setup may sit at either level).
    public func value(_ name: String, in media: MediaDescription) -> String? {
        media.value(name) ?? value(name)
    }

    public var isICELite: Bool { attributes.contains { $0.name == "ice-lite" } }
}
