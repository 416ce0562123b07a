// The built-in viewer's HTTP handlers: one request (see FuzzRequest) through
// ViewerResponder (viewer page, WHEP POST/DELETE/PATCH, /stats, /metrics),
// with a viewer token (@TOKEN@ in seeds) and a session host that answers
// offers the real SDP parser (ViewerOffer) takes. No answer may be a 5xx but
// the host's 503. (A refusal to a HEAD carries its text here, but none goes
// on the wire: a raw-socket HEAD /metrics refused with 401 arrives bodiless.)
import FuzzHTTPSupport
import FuzzSupport
import SDP
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

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let request = FuzzRequest(bytes(data, size), substitutions: ["@TOKEN@": token]) else { return 0 }
    runBlocking {
        let responder = ViewerResponder(cameras: [ParsingHost(), ParsingHost()], token: token, maxBodySize: 64 * 1024)
        let response = await respond(responder, to: request, logger: quietLogger)
        check((100...599).contains(response.status), "status \(response.status)")
        check(response.status < 500 || response.status == 503, "\(response.status) for \(request.method) \(request.path)")
    }
    return 0
}

runFuzzer()
