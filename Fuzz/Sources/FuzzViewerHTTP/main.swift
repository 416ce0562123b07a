// The built-in viewer's HTTP handlers: one request (see FuzzRequest) through
// the viewer routes (viewer page, WHEP POST/DELETE/PATCH, /stats, /metrics)
// as `camagent publish` serves them, mounted on the router's responder,
// with a viewer token (@TOKEN@ in seeds) and a session host that answers
// offers the real SDP parser (ViewerOffer) takes. No answer may be a 5xx but
// the host's 503. (A refusal to a HEAD carries its text here, but none goes
// on the wire: a raw-socket HEAD /metrics refused with 401 arrives bodiless.)
import FuzzHTTPSupport
import FuzzSupport
import SDP
@testable import SessionServer
@testable import ViewerServer

private let token = "fuzz-viewer-token"

private struct ParsingHost: WHEPSessionHost {
    func createViewer(offer: String) async throws(WHEPHostError) -> (id: String, answer: String) {
        do {
            let parsed = try SessionDescription(parsing: offer)
            _ = try ViewerOffer(parsed)
            if parsed.sessionName == "busy" { throw WHEPHostError.unavailable("busy") }
            return ("viewer-1", parsed.text)
        } catch let error as WHEPHostError {
            throw error
        } catch {
            throw .badOffer("\(error)")
        }
    }
    func deleteViewer(id: String) async -> Bool { id == "viewer-1" }
    func statsJSON() async -> String { "{}" }
    func metrics() async -> ViewerMetrics {
        ViewerMetrics(framesEncoded: 1, framesDropped: 0, framesDroppedEncoderBusy: 0, viewers: 1, videoBitrate: 1000)
    }
}

/// The router's own media is never reached by these routes' requests that pass its checks.
private struct NoMedia: SessionMediaEngine {
    func publish(streamID: String, offer: String, events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        throw .unavailable("no media here")
    }
    func unpublish(streamID: String) {}
    func subscribe(streamID: String, subscriberID: String, offer: String, ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        throw .unavailable("no media here")
    }
    func unsubscribe(subscriberID: String) {}
    var counters: ForwardingCounters { ForwardingCounters() }
}

private let server = SessionServer(
    configuration: SessionServerConfiguration(
        additionalRoutes: ViewerRoutes(cameras: [ParsingHost(), ParsingHost()], token: token, maxBodySize: 64 * 1024)),
    secret: try! RouterSecret(key: Array(repeating: 7, count: 32)), mediaEngine: NoMedia(), logger: quietLogger)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let request = FuzzRequest(bytes(data, size), substitutions: ["@TOKEN@": token]) else { return 0 }
    runBlocking {
        let response = await respond(server.makeResponder(), to: request, logger: quietLogger)
        check((100...599).contains(response.status), "status \(response.status)")
        check(response.status < 500 || response.status == 503, "\(response.status) for \(request.method) \(request.path)")
    }
    return 0
}

runFuzzer()
