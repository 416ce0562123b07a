/// Where the viewer routes are and the link to print for them.
extension ViewerRoutes {
    /// The link to print: `http://HOST:PORT/?token=TOKEN` (without the query
    /// when the server is open), and `/cameras/N/` for camera N after the first.
    public static func viewerURL(publicHost: String, port: Int, token: String?, camera: Int = 1) -> String {
        var host = publicHost
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        var url = "http://\(host):\(port)" + cameraPath(camera)
        if let token { url += "?token=\(percentEncoded(token))" }
        return url
    }

    /// Where camera N's page, WHEP endpoint and stats are: `/` for the first, `/cameras/N/` for the others.
    public static func cameraPath(_ camera: Int) -> String { camera == 1 ? "/" : "/cameras/\(camera)/" }
}

/// Query-safe form of a token: RFC 3986 unreserved characters kept, every
/// other byte as %XX.
public func percentEncoded(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.append(byte)
        default:
            out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
        }
    }
    return String(decoding: out, as: UTF8.self)
}
