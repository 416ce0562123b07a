import FoundationEssentials
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

/// A request as the fuzzer writes it, the way it would reach a responder:
///
///     METHOD /path?query
///     Name: value
///     ...
///
///     body
///
/// Placeholders in the head (`@PROJECT@`, ...) are replaced by `substitutions`,
/// so a seed can carry a valid token the fuzzer then mutates around.
public struct FuzzRequest: Sendable {
    public var method: HTTPRequest.Method
    public var path: String
    public var headers: HTTPFields
    public var body: [UInt8]

    public init?(_ input: [UInt8], substitutions: [String: String] = [:]) {
        let split = Self.headEnd(input)
        var head = String(decoding: input[..<split.head], as: UTF8.self)
        for (placeholder, value) in substitutions { head = head.replacingOccurrences(of: placeholder, with: value) }
        body = Array(input[split.body...])
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        guard !lines.isEmpty else { return nil }
        let requestLine = lines.removeFirst().split(separator: " ", maxSplits: 1)
        guard requestLine.count == 2, let method = HTTPRequest.Method(String(requestLine[0])) else { return nil }
        self.method = method
        path = String(requestLine[1])
        headers = HTTPFields()
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else { continue }
            headers.append(HTTPField(name: name, value: String(line[line.index(after: colon)...].drop { $0 == " " })))
        }
    }

    private static func headEnd(_ input: [UInt8]) -> (head: Int, body: Int) {
        var i = 0
        while i + 1 < input.count {
            if input[i] == 0x0A, input[i + 1] == 0x0A { return (i, i + 2) }
            if i + 3 < input.count, input[i] == 0x0D, input[i + 1] == 0x0A, input[i + 2] == 0x0D, input[i + 3] == 0x0A {
                return (i, i + 4)
            }
            i += 1
        }
        return (input.count, input.count)
    }
}

/// What a responder answered, body read out.
public struct FuzzResponse: Sendable {
    public var status: Int
    public var headers: HTTPFields
    public var body: [UInt8]
}

/// Runs one request through a responder as Hummingbird's server would hand
/// it over (a Request with its body, a BasicRequestContext on a channel), and
/// reads the whole response body.
public func respond<R: HTTPResponder>(_ responder: R, to fuzzRequest: FuzzRequest, logger: Logger) async -> FuzzResponse
where R.Context == BasicRequestContext {
    let head = HTTPRequest(method: fuzzRequest.method, scheme: "http", authority: "localhost",
                           path: fuzzRequest.path, headerFields: fuzzRequest.headers)
    let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: fuzzRequest.body)))
    let channel = EmbeddedChannel()
    // An embedded channel and its pipeline hold each other until it is finished.
    defer { _ = try? channel.finish() }
    let context = BasicRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
    let response: Response
    do { response = try await responder.respond(to: request, context: context) } catch {
        fatalError("the responder threw instead of answering: \(error)")
    }
    let collector = Collector()
    do { try await response.body.write(collector) } catch { fatalError("writing the response body failed: \(error)") }
    return FuzzResponse(status: response.status.code, headers: response.headers, body: collector.bytes)
}

private final class Collector: ResponseBodyWriter, @unchecked Sendable {
    var bytes: [UInt8] = []
    func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

public let quietLogger: Logger = {
    var logger = Logger(label: "fuzz")
    logger.logLevel = .critical
    return logger
}()
