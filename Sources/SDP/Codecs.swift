/// A codec as offered and answered: payload type, encoding name, clock rate,
/// channels, format parameters and the RTCP feedback it takes.
public struct CodecDescription: Hashable, Sendable {
    public var payloadType: UInt8
    public var name: String            // VP8, H264, opus
    public var clockRate: Int
    public var channels: Int?
    public var parameters: String?     // the fmtp value
    public var feedback: [String]      // rtcp-fb values: "nack", "nack pli", "ccm fir", "goog-remb"

    public init(payloadType: UInt8, name: String, clockRate: Int, channels: Int? = nil,
                parameters: String? = nil, feedback: [String] = []) {
        self.payloadType = payloadType
        self.name = name
        self.clockRate = clockRate
        self.channels = channels
        self.parameters = parameters
        self.feedback = feedback
    }

    static let videoFeedback = ["nack", "nack pli", "ccm fir", "goog-remb"]
    public static let vp8 = CodecDescription(payloadType: 96, name: "VP8", clockRate: 90_000, feedback: videoFeedback)
    /// Constrained baseline 3.1, packetization-mode=1: what every WebRTC receiver decodes.
    public static let h264 = CodecDescription(
        payloadType: 97, name: "H264", clockRate: 90_000,
        parameters: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", feedback: videoFeedback)
    public static let opus = CodecDescription(payloadType: 111, name: "opus", clockRate: 48_000, channels: 2,
                                              parameters: "minptime=10;useinbandfec=1")

    /// Format parameters as a dictionary ("packetization-mode" → "1").
    public var parameterValues: [String: String] {
        var out: [String: String] = [:]
        for pair in (parameters ?? "").split(separator: ";") {
            // Empty pieces kept: a pair that is only "=" (a peer's typo) is an empty name, not a missing index.
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            out[kv[0].trimmingSpaces] = kv.count > 1 ? kv[1].trimmingSpaces : ""
        }
        return out
    }

    /// Whether an answer's codec can be sent with this one's packetizer and
    /// encoder: same name and rate, and for H.264 the same packetization mode
    /// and profile (the level may differ: level-asymmetry-allowed).
    public func matches(_ other: CodecDescription) -> Bool {
        guard name.lowercased() == other.name.lowercased(), clockRate == other.clockRate else { return false }
        guard name.lowercased() == "h264" else { return true }
        let mine = parameterValues, theirs = other.parameterValues
        return (mine["packetization-mode"] ?? "0") == (theirs["packetization-mode"] ?? "0")
            && mine["profile-level-id"]?.prefix(4).lowercased() == theirs["profile-level-id"]?.prefix(4).lowercased()
    }
}

extension Substring {
    var trimmingSpaces: String { String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
}

extension MediaDescription {
    /// The codecs of this section, in the order of the m= line.
    public var codecs: [CodecDescription] {
        formats.compactMap { format -> CodecDescription? in
            guard let pt = UInt8(format),
                  let map = values("rtpmap").first(where: { $0.hasPrefix("\(format) ") }) else { return nil }
            let encoding = map.dropFirst(format.count + 1).split(separator: "/")
            guard encoding.count >= 2, let rate = Int(encoding[1]) else { return nil }
            let fmtp = values("fmtp").first { $0.hasPrefix("\(format) ") }.map { String($0.dropFirst(format.count + 1)) }
            let feedback = values("rtcp-fb").filter { $0.hasPrefix("\(format) ") }.map { String($0.dropFirst(format.count + 1)) }
            return CodecDescription(payloadType: pt, name: String(encoding[0]), clockRate: rate,
                                    channels: encoding.count > 2 ? Int(encoding[2]) : nil,
                                    parameters: fmtp, feedback: feedback)
        }
    }

    /// Adds a codec's rtpmap, fmtp and rtcp-fb lines and its payload type.
    public mutating func add(_ codec: CodecDescription) {
        formats.append(String(codec.payloadType))
        let channels = codec.channels.map { "/\($0)" } ?? ""
        attributes.append(SDPAttribute("rtpmap", "\(codec.payloadType) \(codec.name)/\(codec.clockRate)\(channels)"))
        if let p = codec.parameters { attributes.append(SDPAttribute("fmtp", "\(codec.payloadType) \(p)")) }
        for fb in codec.feedback { attributes.append(SDPAttribute("rtcp-fb", "\(codec.payloadType) \(fb)")) }
    }

    /// sendrecv, sendonly, recvonly or inactive (sendrecv when absent).
    public var direction: String {
        attributes.first { ["sendrecv", "sendonly", "recvonly", "inactive"].contains($0.name) }?.name ?? "sendrecv"
    }
}
