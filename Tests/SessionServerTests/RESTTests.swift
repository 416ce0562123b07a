import Foundation
import Hummingbird
import Testing

@testable import SessionServer

/// A router with a fake media engine, driven through its REST responder (no
/// socket: `ResponderClient`), plus tokens for it.
struct RouterFixture {
    let server: SessionServer
    let engine = FakeMediaEngine()
    var registry: SessionRegistry { server.registry }
    var tokens: TokenAuthority { server.tokens }

    init(limits: RegistryLimits = RegistryLimits()) {
        server = SessionServer(configuration: SessionServerConfiguration(limits: limits), secret: testSecret,
                               mediaEngine: engine, logger: quietLogger())
    }

    func project() async throws -> String { try await tokens.makeProjectToken() }

    func client(_ sid: String, _ role: Role, data: String = "") async throws -> String {
        try await tokens.makeClientToken(sessionID: sid, role: role, connectionData: data)
    }

    func session(_ mode: MediaMode = .routed) throws -> String { try registry.createSession(mediaMode: mode).sessionID }

    /// Runs `body` with a test client of the REST responder.
    func test(_ body: @Sendable (ResponderClient) async throws -> Void) async throws {
        try await body(ResponderClient(responder: server.makeResponder(), logger: quietLogger()))
    }
}

func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }
func sdpHeaders(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)", .contentType: "application/sdp"] }
let offer = ByteBuffer(string: "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")

/// The JSON object of a response body.
func object(_ response: RESTResponse) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
}

/// Checks a refusal: the status, and `{"code": status, "message": ...}` with the message containing `words`.
func expectError(_ response: RESTResponse, _ status: Int, _ words: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(response.status.code == status, "\(String(buffer: response.body))", sourceLocation: sourceLocation)
    #expect(response.headers[.contentType] == "application/json", sourceLocation: sourceLocation)
    let body = try object(response)
    #expect(body["code"] as? Int == status, sourceLocation: sourceLocation)
    let message = body["message"] as? String ?? ""
    #expect(!message.isEmpty && (words.isEmpty || message.contains(words)), "\(message)", sourceLocation: sourceLocation)
}

@Suite("REST sessions and tokens")
struct RESTSessionTests {
    @Test("POST /v2/sessions with a project token makes a session: routed by default, relayed when asked")
    func createSession() async throws {
        let f = RouterFixture()
        let project = try await f.project()
        try await f.test { client in
            let routed = try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project))
            #expect(routed.status == .ok)
            let sid = try #require(try object(routed)["sessionId"] as? String)
            #expect(f.registry.session(sid)?.mediaMode == .routed)

            var headers: HTTPFields = [.contentType: "application/json"]
            headers[HTTPFields.Element.Name("X-OPENTOK-AUTH")!] = project
            let relayed = try await client.execute(uri: "/v2/sessions", method: .post, headers: headers,
                                                   body: ByteBuffer(string: #"{"mediaMode":"relayed"}"#))
            #expect(relayed.status == .ok)
            let rid = try #require(try object(relayed)["sessionId"] as? String)
            #expect(f.registry.session(rid)?.mediaMode == .relayed)
        }
    }

    @Test("401: no token, a bad one, an expired one, one signed with another secret")
    func unauthorized() async throws {
        let f = RouterFixture()
        let expired = try await f.tokens.makeProjectToken(expireIn: 1, now: Date().addingTimeInterval(-10))
        let foreign = try await TokenAuthority(secret: otherSecret).makeProjectToken()
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post), 401, "token is required")
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer("nonsense")), 401, "malformed")
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(expired)), 401, "expired")
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(foreign)), 401, "signature")
        }
    }

    @Test("403: a client token where a project token is needed")
    func clientTokenOnProjectRoute() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let moderator = try await f.client(sid, .moderator)
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(moderator)), 403, "project token")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(moderator)), 403)
        }
    }

    @Test("400: bad JSON, a bad mediaMode, a wrongly typed field; 413: a body too large")
    func badBodies() async throws {
        let f = RouterFixture()
        let project = try await f.project()
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: "{not json")), 400, "JSON")
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"mediaMode":"teleported"}"#)), 400, "mediaMode")
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"mediaMode":5}"#)), 400, "mediaMode")
            let huge = ByteBuffer(string: #"{"mediaMode":""# + String(repeating: "r", count: 70 * 1024) + #""}"#)
            try expectError(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project), body: huge), 413)
        }
    }

    @Test("503 with a message once the session limit is reached")
    func sessionLimit() async throws {
        let f = RouterFixture(limits: RegistryLimits(maxSessions: 1))
        let project = try await f.project()
        try await f.test { client in
            #expect(try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project)).status == .ok)
            let refused = try await client.execute(uri: "/v2/sessions", method: .post, headers: bearer(project))
            try expectError(refused, 503, "maximum of 1 sessions")
        }
    }

    @Test("POST /v2/sessions/{sid}/tokens mints a client token with the role, data and lifetime asked for")
    func createToken() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let project = try await f.project()
        try await f.test { client in
            let response = try await client.execute(
                uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(project),
                body: ByteBuffer(string: #"{"role":"moderator","expireIn":120,"data":"name=ops"}"#))
            #expect(response.status == .ok)
            let token = try #require(try object(response)["token"] as? String)
            guard case .client(let claims) = try await f.tokens.verify(token) else { Issue.record("not a client token"); return }
            #expect(claims.sessionID == sid && claims.role == .moderator && claims.connectionData == "name=ops")
            #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == 120)

            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"role":"king"}"#)), 400, "unknown role")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"expireIn":99999999}"#)), 400, "lifetime")
            // Valid JSON whose number is not whole, and JSON that is not an object: said in words.
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"expireIn":1.5}"#)), 400, "numbers such as expireIn are whole")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: "[]")), 400, "is not a JSON object")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/tokens", method: .post, headers: bearer(project),
                                                     body: ByteBuffer(string: #"{"data":"\#(String(repeating: "d", count: 1001))"}"#)), 400, "1000")
            try expectError(try await client.execute(uri: "/v2/sessions/nosuch/tokens", method: .post, headers: bearer(project)), 404, "no session")
        }
    }

    @Test("GET streams: a project token or a token of that session; another session's token gets 403, an unknown session 404")
    func listStreams() async throws {
        let f = RouterFixture()
        let sid = try f.session(), other = try f.session()
        let c = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let streamID = try f.registry.reserveStream(sessionID: sid, connectionID: c.connectionId)
        _ = try f.registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(c.connectionId),
                                          name: "cam", hasAudio: true, hasVideo: true, videoType: .camera)
        let project = try await f.project()
        let subscriber = try await f.client(sid, .subscriber)
        let stranger = try await f.client(other, .moderator)
        let ghost = try await f.client("never-made", .moderator)
        try await f.test { client in
            for token in [project, subscriber] {
                let response = try await client.execute(uri: "/v2/sessions/\(sid)/streams", method: .get, headers: bearer(token))
                #expect(response.status == .ok)
                let list = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [[String: Any]])
                #expect(list.count == 1)
                let stream = list[0]
                #expect(Set(stream.keys) == ["streamId", "connectionId", "name", "hasAudio", "hasVideo", "hasCaptions",
                                             "videoType", "width", "height", "createdAt"])
                #expect(stream["streamId"] as? String == streamID)
                #expect(stream["name"] as? String == "cam")
            }
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/streams", method: .get, headers: bearer(stranger)), 403, "another session")
            try expectError(try await client.execute(uri: "/v2/sessions/never-made/streams", method: .get, headers: bearer(ghost)), 404)
            try expectError(try await client.execute(uri: "/v2/sessions/never-made/streams", method: .get, headers: bearer(project)), 404)
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/streams", method: .get), 401)
        }
    }

    @Test("unknown routes are 404 and wrong methods 405, as JSON")
    func unknownRoutes() async throws {
        let f = RouterFixture()
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/elsewhere", method: .get), 404)
            try expectError(try await client.execute(uri: "/v2/sessions", method: .get), 405)
        }
    }
}

@Suite("REST force disconnect")
struct RESTForceDisconnectTests {
    @Test("a moderator's or the project's DELETE removes the connection (204); a publisher's is 403; unknown ids 404")
    func forceDisconnect() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let watcher = Outbox(), target = Outbox()
        _ = try f.registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let victim = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: target)
        let second = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let moderator = try await f.client(sid, .moderator), publisher = try await f.client(sid, .publisher)
        let project = try await f.project()
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/connections/\(victim.connectionId)", method: .delete,
                                                     headers: bearer(publisher)), 403, "force a disconnect")
            let done = try await client.execute(uri: "/v2/sessions/\(sid)/connections/\(victim.connectionId)", method: .delete,
                                                headers: bearer(moderator))
            #expect(done.status == .noContent)
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/connections/\(victim.connectionId)", method: .delete,
                                                     headers: bearer(moderator)), 404, "no connection")
            #expect(try await client.execute(uri: "/v2/sessions/\(sid)/connections/\(second.connectionId)", method: .delete,
                                             headers: bearer(project)).status == .noContent)
        }
        #expect(await drain(target).last == .close(reason: "forceDisconnected"))
        let seen = messages(await drain(watcher))
        #expect(seen.last?["type"] as? String == "connectionDestroyed")
        #expect(seen.last?["reason"] as? String == "forceDisconnected")
    }
}

@Suite("REST media (WHIP and WHEP)")
struct RESTMediaTests {
    @Test("a bare WHIP client publishes: 201, Location, the answer; its connection and stream are announced; DELETE ends both")
    func publishAndDelete() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let watcher = Outbox()
        _ = try f.registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let publisher = try await f.client(sid, .publisher, data: "obs")
        try await f.test { client in
            let response = try await client.execute(uri: "/v2/sessions/\(sid)/publish?name=desk", method: .post,
                                                     headers: sdpHeaders(publisher), body: offer)
            #expect(response.status == .created)
            #expect(response.headers[.contentType] == "application/sdp")
            let location = try #require(response.headers[.location])
            let streamID = try #require(f.engine.calls.withLock { $0.published.first })
            #expect(location == "/v2/sessions/\(sid)/publish/\(streamID)")
            #expect(String(buffer: response.body).contains("answer for \(streamID)"))
            let streams = try f.registry.streams(sessionID: sid)
            #expect(streams.map(\.streamId) == [streamID])
            #expect(streams[0].name == "desk")

            #expect(try await client.execute(uri: location, method: .delete, headers: bearer(publisher)).status == .noContent)
            #expect(f.engine.calls.withLock { $0.unpublished } == [streamID])
            try expectError(try await client.execute(uri: location, method: .delete, headers: bearer(publisher)), 404)
        }
        let seen = messages(await drain(watcher))
        #expect(seen.map { $0["type"] as? String } == ["connected", "connectionCreated", "streamCreated", "streamDestroyed", "connectionDestroyed"])
        #expect(seen[3]["reason"] as? String == "clientDisconnected")
        #expect((seen[1]["connection"] as? [String: Any])?["data"] as? String == "obs")
    }

    @Test("?connectionId= ties the stream to that signalling connection (joined with the same token); an unknown one is 404, another token's 403")
    func publishOnConnection() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let outbox = Outbox()
        let publisher = try await f.client(sid, .publisher)
        guard case .client(let claims) = try await f.tokens.verify(publisher) else { Issue.record("not a client token"); return }
        let c = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: outbox, tokenID: claims.tokenID)
        let other = try await f.client(sid, .publisher)
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish?connectionId=\(c.connectionId)", method: .post,
                                                     headers: sdpHeaders(other), body: offer), 403, "this token")
            let response = try await client.execute(uri: "/v2/sessions/\(sid)/publish?connectionId=\(c.connectionId)", method: .post,
                                                     headers: sdpHeaders(publisher), body: offer)
            #expect(response.status == .created)
            #expect(try f.registry.streams(sessionID: sid).first?.connectionId == c.connectionId)
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish?connectionId=nobody", method: .post,
                                                     headers: sdpHeaders(publisher), body: offer), 404, "no connection")
        }
        #expect(f.registry.counts().connections == 1)
        // The connection leaving takes its stream along, and the engine lets go of it.
        let release = f.registry.disconnect(sessionID: sid, connectionID: c.connectionId, reason: .clientDisconnected)
        #expect(release?.streamIDs.count == 1)
    }

    @Test("roles: a subscriber token cannot publish, a publisher-only token cannot subscribe (403)")
    func roles() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let c = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let streamID = try f.registry.reserveStream(sessionID: sid, connectionID: c.connectionId)
        _ = try f.registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(c.connectionId),
                                          name: "", hasAudio: true, hasVideo: true, videoType: .camera)
        let subscriber = try await f.client(sid, .subscriber), publisherOnly = try await f.client(sid, .publisherOnly)
        let project = try await f.project()
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post,
                                                     headers: sdpHeaders(subscriber), body: offer), 403, "may not publish")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/streams/\(streamID)/subscribe", method: .post,
                                                     headers: sdpHeaders(publisherOnly), body: offer), 403, "may not subscribe")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post,
                                                     headers: sdpHeaders(project), body: offer), 403, "client token")
        }
    }

    @Test("the engine's refusals: bad offer and no common codec are 400, unavailable is 503; the place is given back")
    func engineErrors() async throws {
        let f = RouterFixture(limits: RegistryLimits(maxStreamsPerSession: 1))
        let sid = try f.session()
        let publisher = try await f.client(sid, .publisher)
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher),
                                                     body: ByteBuffer(string: "v=0 bad")), 400, "bad offer")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher),
                                                     body: ByteBuffer(string: "v=0 nocodec")), 400, "codec")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher),
                                                     body: ByteBuffer(string: "v=0 busy")), 503, "no ports left")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher),
                                                     body: ByteBuffer(string: "")), 400, "empty")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post,
                                                     headers: [.authorization: "Bearer \(publisher)", .contentType: "text/plain"],
                                                     body: offer), 400, "application/sdp")
            // None of the refusals kept the one place.
            #expect(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher),
                                             body: offer).status == .created)
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher),
                                                     body: offer), 503, "maximum of 1 streams")
        }
        #expect(f.registry.counts().connections == 1)
    }

    @Test("relayed sessions answer publish and subscribe with 409")
    func relayed() async throws {
        let f = RouterFixture()
        let sid = try f.session(.relayed)
        let publisher = try await f.client(sid, .publisher)
        try await f.test { client in
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post,
                                                     headers: sdpHeaders(publisher), body: offer), 409, "relayed sessions carry media between clients")
        }
    }

    @Test("WHEP: subscribe is 201 with a Location ending in the subscriberId; DELETE is 204; unknown stream 404; the subscriber limit 503")
    func subscribe() async throws {
        let f = RouterFixture(limits: RegistryLimits(maxSubscribersPerStream: 1))
        let sid = try f.session()
        let publisher = try await f.client(sid, .publisher), subscriber = try await f.client(sid, .subscriber)
        try await f.test { client in
            let published = try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher), body: offer)
            let streamID = try #require(published.headers[.location]?.split(separator: "/").last.map(String.init))
            let response = try await client.execute(uri: "/v2/sessions/\(sid)/streams/\(streamID)/subscribe", method: .post,
                                                     headers: sdpHeaders(subscriber), body: offer)
            #expect(response.status == .created)
            let location = try #require(response.headers[.location])
            let subscriberID = try #require(f.engine.calls.withLock { $0.subscribed.first })
            #expect(location == "/v2/sessions/\(sid)/streams/\(streamID)/subscribe/\(subscriberID)")
            #expect(String(buffer: response.body).contains("answer for \(subscriberID)"))
            #expect(f.registry.counts().subscribers == 1)
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/streams/\(streamID)/subscribe", method: .post,
                                                     headers: sdpHeaders(subscriber), body: offer), 503, "subscribers")
            try expectError(try await client.execute(uri: "/v2/sessions/\(sid)/streams/nostream/subscribe", method: .post,
                                                     headers: sdpHeaders(subscriber), body: offer), 404, "no stream")
            #expect(try await client.execute(uri: location, method: .delete, headers: bearer(subscriber)).status == .noContent)
            #expect(f.engine.calls.withLock { $0.unsubscribed } == [subscriberID])
            try expectError(try await client.execute(uri: location, method: .delete, headers: bearer(subscriber)), 404)
        }
    }

    @Test("WHEP: a preferredResolution and preferredFrameRate in the subscribe URL are set before the answer; bad ones are 400")
    func subscribeWithWishes() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let publisher = try await f.client(sid, .publisher), subscriber = try await f.client(sid, .subscriber)
        try await f.test { client in
            let published = try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher), body: offer)
            let streamID = try #require(published.headers[.location]?.split(separator: "/").last.map(String.init))
            let base = "/v2/sessions/\(sid)/streams/\(streamID)/subscribe"
            for bad in ["preferredResolution=320by240", "preferredResolution=0x240", "preferredResolution=320x",
                        "preferredResolution=99999x240", "preferredFrameRate=500", "preferredFrameRate=fast"] {
                try expectError(try await client.execute(uri: "\(base)?\(bad)", method: .post, headers: sdpHeaders(subscriber), body: offer),
                                400, bad.hasPrefix("preferredResolution") ? "preferredResolution" : "preferredFrameRate")
            }
            #expect(f.engine.calls.withLock { $0.subscribed.isEmpty }, "a refused offer subscribes nothing")
            let response = try await client.execute(uri: "\(base)?preferredResolution=320x240&preferredFrameRate=15.0", method: .post,
                                                     headers: sdpHeaders(subscriber), body: offer)
            #expect(response.status == .created)
            let subscriberID = try #require(f.engine.calls.withLock { $0.subscribed.first })
            #expect(f.engine.calls.withLock { $0.resolutions[subscriberID] } == FakeMediaEngine.FrameSizeWish(width: 320, height: 240))
            #expect(f.engine.calls.withLock { $0.frameRates[subscriberID] } == 15.0)
            // Without them nothing is set: the defaults stand.
            _ = try await client.execute(uri: base, method: .post, headers: sdpHeaders(subscriber), body: offer)
            let second = try #require(f.engine.calls.withLock { $0.subscribed.last })
            #expect(second != subscriberID && f.engine.calls.withLock { $0.resolutions[second] == nil && $0.frameRates[second] == nil })
        }
    }

    @Test("only the token that published (or subscribed) ends it; a moderator forces it (forceUnpublished); others get 403")
    func deleteOwnership() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let watcher = Outbox()
        _ = try f.registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let owner = try await f.client(sid, .publisher), intruder = try await f.client(sid, .publisher)
        let moderator = try await f.client(sid, .moderator)
        let viewer = try await f.client(sid, .subscriber), otherViewer = try await f.client(sid, .subscriber)
        try await f.test { client in
            let published = try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(owner), body: offer)
            let location = try #require(published.headers[.location])
            let streamID = String(location.split(separator: "/").last!)
            let subscribed = try await client.execute(uri: "/v2/sessions/\(sid)/streams/\(streamID)/subscribe", method: .post,
                                                      headers: sdpHeaders(viewer), body: offer)
            let subscriberLocation = try #require(subscribed.headers[.location])

            try expectError(try await client.execute(uri: location, method: .delete, headers: bearer(intruder)), 403, "token that published")
            try expectError(try await client.execute(uri: subscriberLocation, method: .delete, headers: bearer(otherViewer)), 403, "token that subscribed")
            #expect(try await client.execute(uri: subscriberLocation, method: .delete, headers: bearer(viewer)).status == .noContent)
            #expect(try await client.execute(uri: location, method: .delete, headers: bearer(moderator)).status == .noContent)
        }
        let destroyed = messages(await drain(watcher)).first { $0["type"] as? String == "streamDestroyed" }
        #expect(destroyed?["reason"] as? String == "forceUnpublished")
    }

    @Test("the engine's events: videoDimensions changes the stream, ended destroys it with that reason")
    func mediaEvents() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let watcher = Outbox()
        let c = try f.registry.connect(sessionID: sid, role: .subscriber, data: "", outbox: watcher)
        let publisher = try await f.client(sid, .publisher)
        try await f.test { client in
            let published = try await client.execute(uri: "/v2/sessions/\(sid)/publish", method: .post, headers: sdpHeaders(publisher), body: offer)
            #expect(published.status == .created)
        }
        let streamID = try #require(f.engine.calls.withLock { $0.published.first })
        f.engine.report(.videoDimensions(width: 640, height: 480), streamID: streamID)
        #expect(try f.registry.streams(sessionID: sid).first?.width == 640)
        f.engine.report(.ended(reason: "networkDisconnected"), streamID: streamID)
        #expect(try f.registry.streams(sessionID: sid).isEmpty)
        _ = c
        let seen = messages(await drain(watcher))
        #expect(seen.map { $0["type"] as? String } == [
            "connected", "connectionCreated", "streamCreated", "streamPropertyChanged", "streamDestroyed", "connectionDestroyed",
        ])
        #expect(seen[4]["reason"] as? String == "networkDisconnected")
        #expect(seen[5]["reason"] as? String == "networkDisconnected")
    }

    @Test("GET /metrics lists the counts and the engine's forwarding totals")
    func metrics() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        _ = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        try await f.test { client in
            let response = try await client.execute(uri: "/metrics", method: .get)
            #expect(response.status == .ok)
            let text = String(buffer: response.body)
            for line in ["camagent_router_sessions 1", "camagent_router_connections 1", "camagent_router_streams 0",
                         "camagent_router_subscribers 0", "camagent_router_forwarded_packets_total 12",
                         "camagent_router_forwarded_bytes_total 3456", "camagent_router_dropped_packets_total 1"] {
                #expect(text.contains(line + "\n"), "\(line)")
            }
        }
    }
}
