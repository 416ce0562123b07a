/// RTP header extensions (RFC 8285) as SDP negotiates them with
/// `a=extmap:<id>[/<direction>] <uri>`.
public enum HeaderExtensions {
    /// Coordination of video orientation (3GPP TS 26.114, "CVO"): one byte
    /// that says how far the receiver turns the picture to show it upright.
    public static let videoOrientation = "urn:3gpp:video-orientation"
    /// The RID of the RTP stream a packet belongs to (RFC 8852): how a
    /// browser names each simulcast layer's stream before its SSRC is known.
    public static let streamID = "urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id"
    /// The media section a packet belongs to (RFC 9143).
    public static let mid = "urn:ietf:params:rtp-hdrext:sdes:mid"

    /// The id a media section maps `uri` to, if it maps it (one-byte ids 1-14 only).
    public static func id(of uri: String, in media: MediaDescription) -> UInt8? {
        for value in media.values("extmap") {
            let fields = value.split(separator: " ")
            guard fields.count >= 2, fields[1] == uri else { continue }
            let idText = fields[0].split(separator: "/").first.map(String.init) ?? ""
            if let id = UInt8(idText), (1...14).contains(id) { return id }
        }
        return nil
    }

    /// The attribute that maps `uri` to `id`.
    static func attribute(id: UInt8, uri: String) -> SDPAttribute { SDPAttribute("extmap", "\(id) \(uri)") }
}
