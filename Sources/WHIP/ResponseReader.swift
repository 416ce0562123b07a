/// Reads a response from a stream through a buffer.
struct ResponseReader {
    let stream: any ByteStream
    let deadline: Deadline
    let host: String
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false

    init(stream: any ByteStream, deadline: Deadline, host: String) {
        self.stream = stream
        self.deadline = deadline
        self.host = host
    }

    /// Reads more into the buffer; false at the end of the stream.
    private mutating func fill() throws(WHIPError) -> Bool {
        guard !atEnd else { return false }
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        }
        let more = try stream.read(maxCount: 16_384, deadline: deadline)
        if more.isEmpty {
            atEnd = true
            return false
        }
        buffer += more
        return true
    }

    private func truncated(_ what: String) -> WHIPError {
        .badResponse("\(host) closed the connection in the middle of the response (\(what))")
    }

    /// One line without its CR LF (a bare LF is taken too).
    private mutating func readLine(limit: Int, what: String) throws(WHIPError) -> String {
        var scanned = 0  // bytes past `position` already searched (fill may move the buffer)
        while true {
            if let lf = buffer[(position + scanned)...].firstIndex(of: 10) {
                var end = lf
                if end > position && buffer[end - 1] == 13 { end -= 1 }
                let line = String(decoding: buffer[position..<end], as: UTF8.self)
                position = lf + 1
                return line
            }
            scanned = buffer.count - position
            guard buffer.count - position <= limit else {
                throw .badResponse("\(host) sent a line longer than \(limit) bytes in the \(what)")
            }
            guard try fill() else { throw truncated(what) }
        }
    }

    private mutating func readExactly(_ count: Int, what: String) throws(WHIPError) -> [UInt8] {
        while buffer.count - position < count {
            guard try fill() else { throw truncated(what) }
        }
        let bytes = Array(buffer[position..<position + count])
        position += count
        return bytes
    }

    private mutating func readToEnd() throws(WHIPError) -> [UInt8] {
        while try fill() {
            guard buffer.count - position <= HTTPExchange.maxBodyBytes else { throw tooLarge() }
        }
        let bytes = Array(buffer[position...])
        position = buffer.count
        return bytes
    }

    private func tooLarge() -> WHIPError {
        .badResponse("\(host) sent a body larger than \(HTTPExchange.maxBodyBytes) bytes")
    }

    /// The head of a response that switches protocols (101), and the bytes
    /// already read past it: the new protocol's first bytes.
    mutating func readUpgradeResponse() throws(WHIPError) -> (response: HTTPResponse, leftover: [UInt8]) {
        var response = try readHead()
        guard response.status == 101 else {
            response.body = try readBody(of: response, method: "GET")
            return (response, [])
        }
        return (response, Array(buffer[position...]))
    }

    mutating func readResponse(method: String) throws(WHIPError) -> HTTPResponse {
        var interim = 0
        while true {
            var response = try readHead()
            // 1xx are interim (100 Continue, 103 Early Hints): the real one follows.
            if (100..<200).contains(response.status) && response.status != 101 {
                interim += 1
                guard interim <= 8 else { throw .badResponse("\(host) sent too many interim (1xx) responses") }
                continue
            }
            response.body = try readBody(of: response, method: method)
            return response
        }
    }

    private mutating func readHead() throws(WHIPError) -> HTTPResponse {
        let statusLine = try readLine(limit: 8192, what: "status line")
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3,
              let status = Int(parts[1]), (100...999).contains(status) else {
            let shown = String(statusLine.prefix(80))
            throw .badResponse("\(host) did not answer with an HTTP/1.x status line: \"\(shown)\"")
        }
        var response = HTTPResponse(
            status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: [], body: [])
        var headerBytes = statusLine.utf8.count
        while true {
            let line = try readLine(limit: HTTPExchange.maxHeaderBytes, what: "headers")
            headerBytes += line.utf8.count + 2
            guard headerBytes <= HTTPExchange.maxHeaderBytes else {
                throw .badResponse("\(host) sent more than \(HTTPExchange.maxHeaderBytes) bytes of headers")
            }
            if line.isEmpty { return response }
            if line.first == " " || line.first == "\t" {
                // Obsolete line folding: a continuation of the previous value.
                guard !response.headers.isEmpty else { throw .badResponse("\(host) sent a malformed header line") }
                response.headers[response.headers.count - 1].value += " " + line.trimmingWhitespace()
                continue
            }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw .badResponse("\(host) sent a malformed header line: \"\(line.prefix(80))\"")
            }
            response.headers.append((String(line[..<colon]).trimmingWhitespace(),
                                     line[line.index(after: colon)...].trimmingWhitespace()))
        }
    }

    private mutating func readBody(of response: HTTPResponse, method: String) throws(WHIPError) -> [UInt8] {
        if method == "HEAD" || response.status == 204 || response.status == 304 { return [] }
        if let coding = response.header("Transfer-Encoding") {
            guard coding.lowercased().split(separator: ",").last?.trimmingWhitespace() == "chunked" else {
                throw .badResponse("\(host) sent a body with transfer coding \"\(coding)\", which this client cannot read")
            }
            return try readChunked()
        }
        if let lengthText = response.header("Content-Length") {
            // Repeated identical values ("12, 12") are allowed; differing ones are not.
            let values = Set(lengthText.split(separator: ",").map { $0.trimmingWhitespace() })
            guard values.count == 1, let length = Int(values.first!), length >= 0 else {
                throw .badResponse("\(host) sent a bad Content-Length: \"\(lengthText)\"")
            }
            guard length <= HTTPExchange.maxBodyBytes else { throw tooLarge() }
            return try readExactly(length, what: "body of \(length) bytes")
        }
        return try readToEnd()
    }

    private mutating func readChunked() throws(WHIPError) -> [UInt8] {
        var body: [UInt8] = []
        while true {
            let line = try readLine(limit: 4096, what: "chunk size")
            let sizeText = (line.split(separator: ";", maxSplits: 1).first ?? "").trimmingWhitespace()
            // Hex digits only: Int(_:radix:) also takes a sign, and a size of -1 would read backwards.
            guard !sizeText.isEmpty, sizeText.utf8.count <= 8, sizeText.allSatisfy(\.isHexDigit),
                  let size = Int(sizeText, radix: 16) else {
                throw .badResponse("\(host) sent a bad chunk size line: \"\(line.prefix(40))\"")
            }
            if size == 0 {
                // Trailers, if any, up to the empty line.
                var trailerBytes = 0
                while true {
                    let trailer = try readLine(limit: HTTPExchange.maxHeaderBytes, what: "trailers")
                    if trailer.isEmpty { return body }
                    trailerBytes += trailer.utf8.count
                    guard trailerBytes <= HTTPExchange.maxHeaderBytes else {
                        throw .badResponse("\(host) sent too many trailer bytes")
                    }
                }
            }
            guard body.count + size <= HTTPExchange.maxBodyBytes else { throw tooLarge() }
            body += try readExactly(size, what: "chunk of \(size) bytes")
            guard try readLine(limit: 2, what: "end of chunk").isEmpty else {
                throw .badResponse("\(host) sent a chunk longer than its size line said")
            }
        }
    }
}
