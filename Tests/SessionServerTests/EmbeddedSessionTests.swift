import Foundation
import Hummingbird
import MediaTypes
import Testing

@testable import SessionServer

/// Routes mounted beside the router's: answers everything it is asked with
/// 418 and the path, and counts what reached it.
struct TeapotRoutes: AdditionalRoutes {
    let asked = PThreadLocked<[String]>([])

    func respond(to request: Request, context: BasicRequestContext,
                 routerMetrics: @escaping @Sendable () -> String) async throws -> Response? {
        asked.withLock { $0.append(request.uri.path) }
        if request.uri.path == "/metrics" {
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "mine 1\n" + routerMetrics())))
        }
        return Response(status: .init(code: 418))
    }
}

@Suite("Embedded session")
struct EmbeddedSessionTests {
    @Test("a local stream is announced like a bare WHIP client's; WHEP for it reaches the engine; its end is clientDisconnected")
    func localStream() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let watcher = Outbox()
        _ = try f.registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        var attached: String?
        let stream = try f.server.publishLocalStream(sessionID: sid, name: "desk", hasAudio: true, hasVideo: true,
                                                     width: 640, height: 480, connectionData: "camagent") { attached = $0 }
        #expect(attached == stream.streamID)
        // Never offered to the engine as WHIP: the engine already has its media.
        #expect(f.engine.calls.withLock { $0.published }.isEmpty)
        let listed = try f.registry.streams(sessionID: sid)
        #expect(listed.map(\.streamId) == [stream.streamID])
        #expect((listed[0].name, listed[0].width, listed[0].height, listed[0].connectionId) == ("desk", 640, 480, stream.connectionID))

        f.server.report(.videoDimensions(width: 1280, height: 720), of: stream)
        #expect(try f.registry.streams(sessionID: sid)[0].width == 1280)

        let subscriber = try await f.client(sid, .subscriber)
        try await f.test { client in
            let response = try await client.execute(uri: "/v2/sessions/\(sid)/streams/\(stream.streamID)/subscribe",
                                                     method: .post, headers: sdpHeaders(subscriber), body: offer)
            #expect(response.status == .created)
        }
        let subscriberID = try #require(f.engine.calls.withLock { $0.subscribed.first })
        f.server.endLocalStream(stream)
        #expect(f.engine.calls.withLock { ($0.unsubscribed, $0.unpublished) } == ([subscriberID], [stream.streamID]))
        #expect(try f.registry.streams(sessionID: sid).isEmpty)

        let seen = messages(await drain(watcher))
        #expect(seen.map { $0["type"] as? String } == ["connected", "connectionCreated", "streamCreated",
                                                         "streamPropertyChanged", "streamDestroyed", "connectionDestroyed"])
        #expect((seen[1]["connection"] as? [String: Any])?["data"] as? String == "camagent")
        #expect(seen[4]["reason"] as? String == "clientDisconnected")
    }

    @Test("a local stream into a relayed session, or past the stream limit, is refused and leaves nothing behind")
    func refusedLocalStream() throws {
        var limits = RegistryLimits()
        limits.maxStreamsPerSession = 1
        let f = RouterFixture(limits: limits)
        let relayed = try f.session(.relayed)
        #expect(throws: RegistryError.self) {
            _ = try f.server.publishLocalStream(sessionID: relayed, name: "", hasAudio: true, hasVideo: true,
                                                width: 0, height: 0) { _ in }
        }
        let routed = try f.session()
        _ = try f.server.publishLocalStream(sessionID: routed, name: "", hasAudio: true, hasVideo: true, width: 0, height: 0) { _ in }
        #expect(throws: RegistryError.limitReached("session \(routed) has its maximum of 1 streams")) {
            _ = try f.server.publishLocalStream(sessionID: routed, name: "", hasAudio: true, hasVideo: true,
                                                width: 0, height: 0) { _ in }
        }
        #expect(try f.registry.streams(sessionID: relayed).isEmpty && f.registry.streams(sessionID: routed).count == 1)
    }

    @Test("mounted routes answer outside /v2/ and may add the router's metrics; /v2/ is always the router's")
    func mountedRoutes() async throws {
        let routes = TeapotRoutes()
        let server = SessionServer(configuration: SessionServerConfiguration(additionalRoutes: routes), secret: testSecret,
                                   mediaEngine: FakeMediaEngine(), logger: quietLogger())
        let client = ResponderClient(responder: server.makeResponder(), logger: quietLogger())
        #expect(try await client.execute(uri: "/whep", method: .post).status == .init(code: 418))
        #expect(try await client.execute(uri: "/", method: .get).status == .init(code: 418))
        try expectError(try await client.execute(uri: "/v2/sessions", method: .post), 401)
        try expectError(try await client.execute(uri: "/v2/nothing", method: .get), 404)
        let metrics = try await client.execute(uri: "/metrics", method: .get)
        let text = String(buffer: metrics.body)
        #expect(text.hasPrefix("mine 1\n") && text.contains("camagent_router_sessions 0"))
        #expect(routes.asked.withLock { $0 } == ["/whep", "/", "/metrics"])
    }
}
