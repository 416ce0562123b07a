import Hummingbird

/// Who is asking, once the token is verified: the project (which may do
/// anything) or a client of one session with its role.
enum Caller: Sendable {
    case project
    case client(ClientTokenClaims)

    var capabilities: Capabilities {
        switch self {
        case .project: Capabilities(publish: true, subscribe: true, forceDisconnect: true, captions: true)
        case .client(let claims): claims.role.capabilities
        }
    }
}

/// The token a request presents: `Authorization: Bearer T`, or OpenTok's
/// `X-OPENTOK-AUTH: T` header; with `allowQuery`, also `?token=T` (the
/// WebSocket, where browsers cannot set headers).
func presentedToken(headers: HTTPFields, query: String?, allowQuery: Bool) -> String? {
    for value in headers[values: .authorization] {
        let trimmed = value.trimmingSpaces
        if trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " {
            return String(trimmed.dropFirst(7).trimmingSpaces)
        }
    }
    if let name = HTTPFields.Element.Name("X-OPENTOK-AUTH"), let value = headers[name] {
        let trimmed = value.trimmingSpaces
        if !trimmed.isEmpty { return String(trimmed) }
    }
    if allowQuery, let query, let token = queryValue("token", in: query), !token.isEmpty { return token }
    return nil
}

/// The first value of `name` in a query string, percent-decoded ('+' is a space).
func queryValue(_ name: String, in query: String) -> String? {
    for pair in query.split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard percentDecoded(parts[0]) == name else { continue }
        return parts.count > 1 ? percentDecoded(parts[1]) : ""
    }
    return nil
}

func percentDecoded(_ text: Substring) -> String {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count)
    var iterator = text.utf8.makeIterator()
    while let byte = iterator.next() {
        switch byte {
        case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
        case UInt8(ascii: "%"):
            let high = iterator.next(), low = iterator.next()
            if let high, let low, let h = hexValue(high), let l = hexValue(low) {
                bytes.append(h << 4 | l)
            } else {
                // Not an escape: kept as written.
                bytes.append(byte)
                if let high { bytes.append(high) }
                if let low { bytes.append(low) }
            }
        default: bytes.append(byte)
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}
