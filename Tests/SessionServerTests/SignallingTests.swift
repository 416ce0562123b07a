import Foundation
import Hummingbird
import Testing

@testable import SessionServer

@Suite("Signalling messages")
struct ClientMessageTests {
    @Test("ping, signal (to all or one), publisherProperty and subscriberSettings parse")
    func valid() throws {
        #expect(try ClientMessage.parse(#"{"type":"ping"}"#) == .ping)
        #expect(try ClientMessage.parse(#"{"type":"signal","data":"hi"}"#) == .signal(signalType: nil, data: .string("hi"), to: nil))
        #expect(try ClientMessage.parse(#"{"type":"signal","signalType":"chat","data":{"n":1},"to":"c1"}"#)
            == .signal(signalType: "chat", data: .object(["n": .number(1)]), to: "c1"))
        #expect(try ClientMessage.parse(#"{"type":"publisherProperty","streamId":"s","hasVideo":false}"#)
            == .publisherProperty(streamID: "s", hasAudio: nil, hasVideo: false, publishCaptions: nil))
        #expect(try ClientMessage.parse(#"{"type":"subscriberSettings","subscriberId":"x","subscribeToVideo":false,"preferredResolution":{"width":640,"height":360},"preferredFrameRate":15}"#)
            == .subscriberSettings(subscriberID: "x", settings: SubscriberSettings(subscribeToVideo: false, preferredResolution: (640, 360), preferredFrameRate: 15)))
    }

    @Test("refused with a code and a message saying why", arguments: [
        ("not json", 400, "JSON"),
        ("[1,2]", 400, "JSON"),
        (#"{"data":1}"#, 400, "no \"type\""),
        (#"{"type":"teleport"}"#, 400, "unknown message type"),
        (#"{"type":7}"#, 400, "JSON"),
        (#"{"type":"publisherProperty","streamId":"s"}"#, 400, "hasAudio, hasVideo or publishCaptions"),
        (#"{"type":"publisherProperty","hasAudio":true}"#, 400, "streamId is missing"),
        (#"{"type":"subscriberSettings","subscriberId":"x","subscribeToAudio":"yes"}"#, 400, "subscribeToAudio is not a boolean"),
        (#"{"type":"subscriberSettings","subscriberId":"x","preferredResolution":{"width":0,"height":10}}"#, 400, "preferredResolution"),
        (#"{"type":"subscriberSettings","subscriberId":"x","preferredFrameRate":500}"#, 400, "preferredFrameRate"),
    ])
    func refused(_ text: String, _ code: Int, _ words: String) {
        #expect {
            _ = try ClientMessage.parse(text)
        } throws: { error in
            guard let refusal = error as? SignallingRefusal else { return false }
            return refusal.code == code && refusal.message.contains(words)
        }
    }

    @Test("over 64 KiB is refused (413); signal data over 8 KiB too")
    func sizes() {
        let big = #"{"type":"ping","pad":""# + String(repeating: "x", count: 64 * 1024) + #""}"#
        #expect(throws: SignallingRefusal.self) { try ClientMessage.parse(big) }
        let bigSignal = #"{"type":"signal","data":""# + String(repeating: "x", count: 8 * 1024) + #""}"#
        #expect {
            _ = try ClientMessage.parse(bigSignal)
        } throws: { ($0 as? SignallingRefusal)?.code == 413 }
    }

    @Test("the error message is the contract's shape")
    func errorShape() throws {
        let text = SignallingRefusal(400, "why").messageText
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["type"] as? String == "error")
        #expect(object["code"] as? Int == 400)
        #expect(object["message"] as? String == "why")
    }
}

@Suite("Signalling upgrade")
struct SignallingUpgradeTests {
    private func decide(_ f: RouterFixture, path: String, headers: HTTPFields = [:]) async -> Result<SignallingConnection, APIError> {
        let upgrade = SignallingUpgrade(services: RouterServices(registry: f.registry, tokens: f.tokens, media: f.engine, logger: quietLogger()))
        var request = HTTPRequest(method: .get, scheme: "http", authority: "router", path: path)
        request.headerFields = headers
        return await upgrade.decide(request)
    }

    private func status(_ result: Result<SignallingConnection, APIError>) -> Int {
        switch result {
        case .success: 101
        case .failure(let error): error.status
        }
    }

    @Test("a client token of the session upgrades, as ?token= or Authorization: Bearer")
    func accepted() async throws {
        let f = RouterFixture()
        let sid = try f.session()
        let token = try await f.client(sid, .subscriber, data: "d")
        let byQuery = await decide(f, path: "/v2/sessions/\(sid)/connect?token=\(token)")
        guard case .success(let connection) = byQuery else { Issue.record("refused: \(byQuery)"); return }
        #expect(connection.claims.role == .subscriber && connection.claims.connectionData == "d")
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect", headers: [.authorization: "Bearer \(token)"])) == 101)
    }

    @Test("refusals: 401 no, bad or expired token; 403 another session's token or a project token; 404 unknown session or path; 503 full")
    func refused() async throws {
        let f = RouterFixture(limits: RegistryLimits(maxConnectionsPerSession: 1))
        let sid = try f.session(), other = try f.session()
        let expired = try await f.tokens.makeClientToken(sessionID: sid, role: .publisher, expireIn: 1, now: Date().addingTimeInterval(-5))
        let stranger = try await f.client(other, .publisher)
        let project = try await f.project()
        let ghost = try await f.client("ghost", .publisher)
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect")) == 401)
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect?token=abc")) == 401)
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect?token=\(expired)")) == 401)
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect?token=\(stranger)")) == 403)
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect?token=\(project)")) == 403)
        #expect(status(await decide(f, path: "/v2/sessions/ghost/connect?token=\(ghost)")) == 404)
        #expect(status(await decide(f, path: "/elsewhere?token=\(ghost)")) == 404)
        _ = try f.registry.connect(sessionID: sid, role: .publisher, data: "", outbox: nil)
        let ok = try await f.client(sid, .publisher)
        #expect(status(await decide(f, path: "/v2/sessions/\(sid)/connect?token=\(ok)")) == 503)
    }
}
