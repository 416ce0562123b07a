// The router's HTTP handlers: one request (method, path, headers, body; see
// FuzzRequest) through RESTResponder, the responder Hummingbird hands every
// non-WebSocket request to, on a fresh server with one routed session. Seeds
// carry @PROJECT@, @PUBLISHER@, @SUBSCRIBER@ and @SESSION@, replaced by a
// project token, client tokens and the session's ID, so the fuzzer gets past
// authorization. The media engine parses offers with the real SDP parser.
// Every answer must be a well-formed HTTP status, never a 500, and every
// refusal the JSON `{"code":N,"message":"..."}` the contract promises. (A
// refusal to a HEAD carries its JSON here, but the HTTP/1 server sends none.)
import FoundationEssentials
import FuzzHTTPSupport
import FuzzSupport
import SDP
@testable import SessionServer

private let key = Array("fuzz-secret-fuzz-secret-fuzz-secret!".utf8)

/// Answers offers the SDP parser takes, refuses the rest as a bad offer.
private struct ParsingMediaEngine: SessionMediaEngine {
    func publish(streamID: String, offer: String, events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        let parsed = try parse(offer)
        return PublishedMedia(answer: parsed.text, hasAudio: parsed.media.contains { $0.kind == "audio" },
                              hasVideo: parsed.media.contains { $0.kind == "video" })
    }
    func unpublish(streamID: String) {}
    func subscribe(streamID: String, subscriberID: String, offer: String, ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        try parse(offer).text
    }
    func unsubscribe(subscriberID: String) {}
    var counters: ForwardingCounters { ForwardingCounters() }

    private func parse(_ offer: String) throws(MediaEngineError) -> SessionDescription {
        do { return try SessionDescription(parsing: offer) } catch { throw .badOffer(error.description) }
    }
}

private struct Refusal: Decodable {
    var code: Int
    var message: String
}

/// A project token is not bound to a session: one, made once, serves every input.
private let projectToken = runBlocking {
    try! await TokenAuthority(secret: try! RouterSecret(key: key)).makeProjectToken(expireIn: TokenAuthority.maxLifetime)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let text = String(decoding: input, as: UTF8.self)
    runBlocking {
        // A fresh router per input, so an input means the same alone as in a run.
        let server = SessionServer(configuration: SessionServerConfiguration(), secret: try! RouterSecret(key: key),
                                   mediaEngine: ParsingMediaEngine(), logger: quietLogger)
        let session = try! server.registry.createSession(mediaMode: .routed)
        var substitutions = ["@PROJECT@": projectToken, "@SESSION@": session.sessionID]
        // Signing is the slow part of an input (jwt-kit, unoptimised): client tokens only when asked for.
        for (placeholder, role) in [("@PUBLISHER@", Role.publisher), ("@SUBSCRIBER@", .subscriber)] where text.contains(placeholder) {
            substitutions[placeholder] = try! await server.tokens.makeClientToken(sessionID: session.sessionID, role: role)
        }
        guard let request = FuzzRequest(input, substitutions: substitutions) else { return }
        let response = await respond(server.makeResponder(), to: request, logger: quietLogger)
        check((100...599).contains(response.status), "status \(response.status)")
        check(response.status != 500, "500 for \(request.method) \(request.path)")
        if response.status >= 400 {
            guard let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(response.body)) else {
                fatalError("a \(response.status) without its JSON body: \(String(decoding: response.body, as: UTF8.self))")
            }
            check(refusal.code == response.status, "body code \(refusal.code) on a \(response.status)")
        }
    }
    return 0
}

runFuzzer()
