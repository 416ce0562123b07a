import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A deliberately small HTTP/1.1 client for the tests: one request per
/// connection (`Connection: close`), blocking POSIX sockets on loopback, the
/// raw status line, headers and body handed back as they came.
struct HTTPTestResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

enum HTTPTestError: Error { case malformed(String) }

func httpRequest(
    port: Int,
    method: String,
    path: String,
    headers: [(String, String)] = [],
    body: [UInt8] = []
) async throws -> HTTPTestResponse {
    var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    if !body.isEmpty || method == "POST" { request += "Content-Length: \(body.count)\r\n" }
    request += "\r\n"
    let bytes = Array(request.utf8) + body
    return try parseResponse(try await onOwnThread { try exchange(port: port, bytes) })
}

func httpRequest(port: Int, method: String, path: String, headers: [(String, String)] = [], body: String) async throws -> HTTPTestResponse {
    try await httpRequest(port: port, method: method, path: path, headers: headers, body: Array(body.utf8))
}

private func exchange(port: Int, _ bytes: [UInt8]) throws -> [UInt8] {
    let connection = try RawTCPConnection(port: port)
    connection.send(bytes)  // the server may answer (413) and close before reading everything
    return connection.readToEnd(timeout: 10)
}

private func parseResponse(_ raw: [UInt8]) throws -> HTTPTestResponse {
    let separator: [UInt8] = [13, 10, 13, 10]
    guard let end = (0..<max(0, raw.count - 3)).first(where: { Array(raw[$0..<$0 + 4]) == separator }) else {
        throw HTTPTestError.malformed("no end of head in \(raw.count) bytes")
    }
    let head = String(decoding: raw[..<end], as: UTF8.self)
    var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
    let statusLine = lines.removeFirst().split(separator: " ")
    guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
        throw HTTPTestError.malformed("status line")
    }
    var headers: [(name: String, value: String)] = []
    for line in lines {
        guard let colon = line.firstIndex(of: ":") else { throw HTTPTestError.malformed("header \(line)") }
        let value = line[line.index(after: colon)...].drop { $0 == " " }
        headers.append((String(line[..<colon]), String(value)))
    }
    var body = Array(raw[(end + 4)...])
    let response = HTTPTestResponse(status: status, headers: headers, body: body)
    if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
        body = try dechunk(body)
    } else if let length = response.header("Content-Length").flatMap(Int.init), length < body.count {
        body = Array(body[..<length])
    }
    return HTTPTestResponse(status: status, headers: headers, body: body)
}

private func dechunk(_ data: [UInt8]) throws -> [UInt8] {
    var out: [UInt8] = []
    var index = 0
    while index < data.count {
        guard let lineEnd = (index..<data.count - 1).first(where: { data[$0] == 13 && data[$0 + 1] == 10 }) else {
            throw HTTPTestError.malformed("chunk size")
        }
        let sizeText = String(decoding: data[index..<lineEnd], as: UTF8.self).split(separator: ";")[0]
        guard let size = Int(sizeText, radix: 16) else { throw HTTPTestError.malformed("chunk size \(sizeText)") }
        if size == 0 { break }
        let start = lineEnd + 2
        guard start + size <= data.count else { throw HTTPTestError.malformed("short chunk") }
        out += data[start..<start + size]
        index = start + size + 2
    }
    return out
}
