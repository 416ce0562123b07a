/// An http or https URL, taken apart as far as an HTTP/1.1 client needs:
/// scheme, host (a name, an IPv4 address or an IPv6 address, without its
/// brackets), port and the request target (path and query, never empty).
/// A fragment is dropped; user info is refused (a token goes in a header).
struct HTTPURL: Hashable, Sendable, CustomStringConvertible {
    var isTLS: Bool
    var host: String
    var port: Int
    /// Path and query as sent on the request line: "/whip/endpoint?x=1".
    var target: String

    var scheme: String { isTLS ? "https" : "http" }
    var defaultPort: Int { isTLS ? 443 : 80 }
    var isIPv6Literal: Bool { host.contains(":") }

    /// host[:port] as the Host header and URLs spell it.
    var authority: String {
        let h = isIPv6Literal ? "[\(host)]" : host
        return port == defaultPort ? h : "\(h):\(port)"
    }

    var description: String { "\(scheme)://\(authority)\(target)" }

    init(isTLS: Bool, host: String, port: Int, target: String) {
        self.isTLS = isTLS
        self.host = host
        self.port = port
        self.target = target
    }

    init(parsing text: String) throws(WHIPError) {
        let trimmed = text.trimmingWhitespace()
        guard let schemeEnd = trimmed.firstRange(of: "://") else {
            throw .badURL("\"\(text)\" has no scheme (expected http:// or https://)")
        }
        switch trimmed[..<schemeEnd.lowerBound].lowercased() {
        case "http": isTLS = false
        case "https": isTLS = true
        case let other: throw .badURL("\"\(text)\": scheme \"\(other)\" is not http or https")
        }
        var rest = trimmed[schemeEnd.upperBound...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let pathAndQuery = rest[authorityEnd...]
        guard !authority.contains("@") else {
            throw .badURL("\"\(text)\": user info in the URL is not supported (pass the token separately)")
        }
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw .badURL("\"\(text)\": IPv6 address without a closing bracket")
            }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .badURL("\"\(text)\": junk after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." || $0 == "%" }) else {
                throw .badURL("\"\(text)\": \"\(host)\" is not an IPv6 address")
            }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            guard !host.isEmpty else { throw .badURL("\"\(text)\" has no host") }
            guard host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_" }) else {
                throw .badURL("\"\(text)\": \"\(host)\" is not a host name or address")
            }
        }
        if let portText, !portText.isEmpty {
            guard let p = Int(portText), (1...65_535).contains(p) else {
                throw .badURL("\"\(text)\": port \"\(portText)\" is not a number from 1 to 65535")
            }
            port = p
        } else {
            port = isTLS ? 443 : 80
        }
        if pathAndQuery.isEmpty {
            target = "/"
        } else if pathAndQuery.hasPrefix("?") {
            target = "/" + pathAndQuery
        } else {
            target = String(pathAndQuery)
        }
        guard !target.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" || $0 == "\t" }) else {
            throw .badURL("\"\(text)\": spaces or line breaks in the path")
        }
    }

    /// Resolves a reference (a Location header) against this URL, as RFC 3986
    /// section 5.2 says: absolute, network-path ("//host/x"), absolute-path,
    /// query-only or relative-path.
    func resolving(_ reference: String) throws(WHIPError) -> HTTPURL {
        let ref = reference.trimmingWhitespace()
        guard !ref.isEmpty else { throw .badURL("empty reference") }
        if let colon = ref.firstIndex(of: ":"),
           let first = ref.first, first.isLetter,
           ref[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }) {
            return try HTTPURL(parsing: ref)
        }
        if ref.hasPrefix("//") { return try HTTPURL(parsing: scheme + ":" + ref) }
        var ref2 = Substring(ref)
        if let hash = ref2.firstIndex(of: "#") { ref2 = ref2[..<hash] }
        let (basePath, baseQuery) = Self.split(target)
        var resolved = self
        if ref2.isEmpty {
            resolved.target = basePath + (baseQuery.map { "?" + $0 } ?? "")
        } else if ref2.hasPrefix("?") {
            resolved.target = basePath + ref2
        } else {
            let (refPath, refQuery) = Self.split(String(ref2))
            let merged: String
            if refPath.hasPrefix("/") {
                merged = refPath
            } else {
                let directory = basePath[...(basePath.lastIndex(of: "/") ?? basePath.startIndex)]
                merged = (directory.hasPrefix("/") ? String(directory) : "/") + refPath
            }
            resolved.target = Self.removingDotSegments(merged) + (refQuery.map { "?" + $0 } ?? "")
        }
        guard !resolved.target.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" || $0 == "\t" }) else {
            throw .badURL("\"\(reference)\": spaces or line breaks in the path")
        }
        return resolved
    }

    private static func split(_ target: String) -> (path: String, query: String?) {
        guard let q = target.firstIndex(of: "?") else { return (target, nil) }
        return (String(target[..<q]), String(target[target.index(after: q)...]))
    }

    /// RFC 3986 section 5.2.4, on whole segments.
    static func removingDotSegments(_ path: String) -> String {
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (i, segment) in segments.enumerated() {
            let isLast = i == segments.count - 1
            switch segment {
            case ".":
                if isLast { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if isLast { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }
}
