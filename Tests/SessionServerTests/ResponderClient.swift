import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

@testable import SessionServer

/// What a request sent through `ResponderClient` got back.
struct RESTResponse: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: ByteBuffer
}

/// Hands requests straight to the router's REST responder, with no socket in
/// between: these tests are about the REST logic. The servers' sockets, limits
/// and deadlines have tests of their own on real connections.
///
/// Hummingbird's `HummingbirdTesting` does the same, but linking it brings
/// AsyncHTTPClient, swift-nio-ssl (a second BoringSSL) and HTTP/2 into every
/// test build: minutes of each sanitizer build in CI, for code no test ran.
struct ResponderClient: Sendable {
    let responder: RESTResponder
    let logger: Logger

    func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:],
                 body: ByteBuffer? = nil) async throws -> RESTResponse {
        var fields = headers
        if let body { fields[.contentLength] = String(body.readableBytes) }
        let request = Request(
            head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: uri, headerFields: fields),
            body: RequestBody(buffer: body ?? ByteBuffer()))
        // The context wants a channel only for what it can say of the connection
        // (addresses, allocator); an embedded one has no socket behind it.
        let context = BasicRequestContext(source: ApplicationRequestContextSource(channel: EmbeddedChannel(), logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            // What Hummingbird's server sends for an error the responder throws.
            response = Response(status: .internalServerError)
        }
        let collector = BodyCollector()
        try await response.body.write(collector)
        return RESTResponse(status: response.status, headers: response.headers, body: collector.box.body)
    }
}

/// Collects a response body; the writer is consumed by `ResponseBody.write`, so
/// what it wrote lives in a box the caller keeps.
private struct BodyCollector: ResponseBodyWriter {
    final class Box { var body = ByteBuffer() }
    let box = Box()

    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        box.body.writeBuffer(&buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
