import MediaTypes

/// One request and its response over a fresh connection (Connection: close),
/// all within `timeout` seconds from the start of the connect; a request of
/// `stop` ends it at any wait.
struct HTTPExchange {
    static let maxBodyBytes = 1 << 20
    static let maxHeaderBytes = 64 << 10

    var url: HTTPURL
    var timeout: Double
    var verifyTLS: Bool
    var extraTrustFile: String?
    var stop: StopSignal? = nil

    func perform(method: String, headers: [(String, String)], body: [UInt8]) throws(WHIPError) -> HTTPResponse {
        let deadline = Deadline(seconds: timeout, stop: stop)
        let tcp = try TCPConnection.connect(host: url.host, port: url.port, deadline: deadline)
        let stream: any ByteStream
        if url.isTLS {
            do {
                stream = try TLSConnection(over: tcp, verify: verifyTLS, extraTrustFile: extraTrustFile, deadline: deadline)
            } catch {
                tcp.close()
                throw error
            }
        } else {
            stream = tcp
        }
        defer { stream.close() }

        var head = "\(method) \(url.target) HTTP/1.1\r\nHost: \(url.authority)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PUT" || method == "PATCH" {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "Connection: close\r\n\r\n"
        // A server may answer and close before reading everything (a 413, a
        // 401 before the body): a failed send is reported only when no
        // response can be read either.
        var sendFailure: WHIPError?
        do {
            try stream.write(Array(head.utf8) + body, deadline: deadline)
        } catch {
            if case .timedOut = error { throw error }
            sendFailure = error
        }
        var reader = ResponseReader(stream: stream, deadline: deadline, host: url.host)
        do {
            return try reader.readResponse(method: method)
        } catch {
            throw sendFailure ?? error
        }
    }
}
