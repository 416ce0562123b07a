import Foundation
import Logging
import MediaTypes
import TestSupport
import Testing

import SessionServer
@testable import ViewerServer

/// Stands in for the publisher's WebRTC side: answers any offer that looks like
/// SDP, refuses "garbage", is unavailable for offers saying "busy".
actor FakeSessionHost: WHEPSessionHost {
    private(set) var viewers: [String: String] = [:]
    private var next = 1
    var metricsValue = ViewerMetrics(framesEncoded: 1234, framesDropped: 5, framesDroppedEncoderBusy: 2, viewers: 0, videoBitrate: 1_500_000.5, roundTripTime: 0.012)

    func createViewer(offer: String) async throws(WHEPHostError) -> (id: String, answer: String) {
        if offer.contains("busy") { throw .unavailable("no stream yet") }
        guard offer.hasPrefix("v=0") else { throw .badOffer("not SDP") }
        let id = "viewer-\(next)"
        next += 1
        viewers[id] = offer
        return (id, "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=answer for \(id)\r\n")
    }

    func deleteViewer(id: String) async -> Bool { viewers.removeValue(forKey: id) != nil }

    func statsJSON() async -> String { #"{"viewers":\#(viewers.count),"frames":{"encoded":1234}}"# }

    func metrics() async -> ViewerMetrics {
        var m = metricsValue
        m.viewers = viewers.count
        return m
    }

    func setRoundTripTime(_ rtt: Double?) { metricsValue.roundTripTime = rtt }
}

let offer = "v=0\r\no=- 42 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
let sdpType = ("Content-Type", "application/sdp")

/// The viewer routes as `camagent publish` serves them: mounted on the
/// router (SessionServer), whose own media is not used here.
struct MountedViewer {
    let server: SessionServer
    let routes: ViewerRoutes

    var boundPort: Int? { server.boundPort }

    func viewerURL(publicHost: String, camera: Int = 1) -> String {
        ViewerRoutes.viewerURL(publicHost: publicHost, port: boundPort ?? server.configuration.port,
                               token: routes.token, camera: camera)
    }
}

/// A media engine that takes nothing: the viewer routes never reach it.
struct NoSessionMedia: SessionMediaEngine {
    func publish(streamID: String, offer: String, events: @escaping @Sendable (MediaEvent) -> Void) throws(MediaEngineError) -> PublishedMedia {
        throw .unavailable("no media in these tests")
    }
    func unpublish(streamID: String) {}
    func subscribe(streamID: String, subscriberID: String, offer: String, ended: @escaping @Sendable (String) -> Void) throws(MediaEngineError) -> String {
        throw .unavailable("no media in these tests")
    }
    func unsubscribe(subscriberID: String) {}
    var counters: ForwardingCounters { ForwardingCounters() }
}

/// Runs a server on 127.0.0.1, a port the kernel picks, for the duration of `body`.
func withServer(
    token: String? = nil,
    limits: ServerLimits = ServerLimits(),
    host: FakeSessionHost = FakeSessionHost(),
    moreCameras: [FakeSessionHost] = [],
    _ body: (_ port: Int, _ server: MountedViewer) async throws -> Void
) async throws {
    let (ports, continuation) = AsyncStream<Int>.makeStream()
    var logger = Logger(label: "ViewerServerTests")
    logger.logLevel = .warning
    let routes = ViewerRoutes(cameras: [host] + moreCameras, token: token)
    let server = SessionServer(
        configuration: .init(host: "127.0.0.1", port: 0, serverLimits: limits, additionalRoutes: routes),
        secret: try RouterSecret(key: Array(repeating: 7, count: 32)), mediaEngine: NoSessionMedia(),
        logger: logger, onServerRunning: { continuation.yield($0) })
    let mounted = MountedViewer(server: server, routes: routes)
    try await whileRunning({ try await server.run() }, ports: ports) { port in try await body(port, mounted) }
}

@Suite("WHEP endpoint")
struct WHEPEndpointTests {
    @Test("POST /whep answers 201 with Location, application/sdp and the answer")
    func createViewer() async throws {
        let host = FakeSessionHost()
        try await withServer(token: "secret", host: host) { port, _ in
            let response = try await httpRequest(
                port: port, method: "POST", path: "/whep",
                headers: [sdpType, ("Authorization", "Bearer secret")], body: offer)
            #expect(response.status == 201)
            #expect(response.header("Location") == "/whep/viewer-1")
            #expect(response.header("Content-Type") == "application/sdp")
            #expect(response.text.hasPrefix("v=0\r\n"))
            #expect(response.text.contains("answer for viewer-1"))
            #expect(response.header("Access-Control-Expose-Headers") == "Location")
            #expect(await host.viewers["viewer-1"] == offer)
        }
    }

    @Test("401 without the token, with a wrong one (header or query); the right one in either form works")
    func tokenRequired() async throws {
        try await withServer(token: "secret") { port, _ in
            let none = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType], body: offer)
            #expect(none.status == 401)
            #expect(none.header("WWW-Authenticate") == "Bearer")
            let wrongHeader = try await httpRequest(
                port: port, method: "POST", path: "/whep",
                headers: [sdpType, ("Authorization", "Bearer secreT")], body: offer)
            #expect(wrongHeader.status == 401)
            let wrongQuery = try await httpRequest(port: port, method: "POST", path: "/whep?token=secre", headers: [sdpType], body: offer)
            #expect(wrongQuery.status == 401)
            let longer = try await httpRequest(port: port, method: "POST", path: "/whep?token=secret2", headers: [sdpType], body: offer)
            #expect(longer.status == 401)
            let basic = try await httpRequest(
                port: port, method: "POST", path: "/whep",
                headers: [sdpType, ("Authorization", "Basic c2VjcmV0")], body: offer)
            #expect(basic.status == 401)

            let query = try await httpRequest(port: port, method: "POST", path: "/whep?token=secret", headers: [sdpType], body: offer)
            #expect(query.status == 201)
            let header = try await httpRequest(
                port: port, method: "POST", path: "/whep",
                headers: [sdpType, ("authorization", "bearer  secret ")], body: offer)
            #expect(header.status == 201)

            let location = try #require(query.header("Location"))
            #expect(try await httpRequest(port: port, method: "DELETE", path: location).status == 401)
            #expect(try await httpRequest(port: port, method: "DELETE", path: location + "?token=nope").status == 401)
            #expect(try await httpRequest(port: port, method: "GET", path: "/stats").status == 401)
            #expect(try await httpRequest(port: port, method: "GET", path: "/metrics").status == 401)
            #expect(try await httpRequest(port: port, method: "GET", path: "/metrics?token=secret").status == 200)
            #expect(try await httpRequest(port: port, method: "DELETE", path: location + "?token=secret").status == 200)
        }
    }

    @Test("Open mode: no token configured, none needed")
    func openMode() async throws {
        try await withServer(token: nil) { port, _ in
            let response = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType], body: offer)
            #expect(response.status == 201)
            let location = try #require(response.header("Location"))
            #expect(try await httpRequest(port: port, method: "DELETE", path: location).status == 200)
            #expect(try await httpRequest(port: port, method: "GET", path: "/stats").status == 200)
        }
    }

    @Test("Garbage SDP gets 400 and the server keeps serving; unavailable gets 503")
    func badOffer() async throws {
        try await withServer(token: "t") { port, _ in
            let auth = ("Authorization", "Bearer t")
            let bad = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType, auth], body: "garbage\u{0}\u{1}")
            #expect(bad.status == 400)
            #expect(bad.text == "bad offer: not SDP\n")
            let good = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType, auth], body: offer)
            #expect(good.status == 201)
            let empty = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType, auth])
            #expect(empty.status == 400)
            let busy = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType, auth], body: offer + "busy")
            #expect(busy.status == 503)
            #expect(busy.header("Retry-After") == "2")
            let notSDP = try await httpRequest(
                port: port, method: "POST", path: "/whep",
                headers: [("Content-Type", "application/json"), auth], body: "{}")
            #expect(notSDP.status == 415)
            let charset = try await httpRequest(
                port: port, method: "POST", path: "/whep",
                headers: [("Content-Type", "Application/SDP; charset=utf-8"), auth], body: offer)
            #expect(charset.status == 201)
            let huge = try await httpRequest(
                port: port, method: "POST", path: "/whep", headers: [sdpType, auth],
                body: offer + String(repeating: "a=x\r\n", count: 20_000))
            #expect(huge.status == 413)
            let again = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType, auth], body: offer)
            #expect(again.status == 201)
        }
    }

    @Test("DELETE ends a viewer (200), then the resource is gone (404)")
    func deleteThenGone() async throws {
        let host = FakeSessionHost()
        try await withServer(token: "t", host: host) { port, _ in
            let auth = ("Authorization", "Bearer t")
            let created = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType, auth], body: offer)
            let location = try #require(created.header("Location"))
            #expect(try await httpRequest(port: port, method: "DELETE", path: location, headers: [auth]).status == 200)
            #expect(await host.viewers.isEmpty)
            #expect(try await httpRequest(port: port, method: "DELETE", path: location, headers: [auth]).status == 404)
            #expect(try await httpRequest(port: port, method: "DELETE", path: "/whep/unknown", headers: [auth]).status == 404)
        }
    }

    @Test("Unknown paths get 404, wrong methods 405, trailing slashes are ignored")
    func routing() async throws {
        try await withServer(token: "t") { port, _ in
            let auth = ("Authorization", "Bearer t")
            #expect(try await httpRequest(port: port, method: "GET", path: "/nothing").status == 404)
            #expect(try await httpRequest(port: port, method: "GET", path: "/whep/a/b", headers: [auth]).status == 404)
            #expect(try await httpRequest(port: port, method: "GET", path: "/index.html").status == 404)
            let get = try await httpRequest(port: port, method: "GET", path: "/whep", headers: [auth])
            #expect(get.status == 405)
            #expect(get.header("Allow") == "POST, OPTIONS")
            let slash = try await httpRequest(port: port, method: "POST", path: "/whep/", headers: [sdpType, auth], body: offer)
            #expect(slash.status == 201)
            let location = try #require(slash.header("Location"))
            #expect(try await httpRequest(port: port, method: "DELETE", path: location + "/", headers: [auth]).status == 200)
            // No trickle ICE: PATCH on a resource is refused with 405 (RFC 9725 lets a server do so).
            #expect(try await httpRequest(port: port, method: "PATCH", path: location, headers: [auth]).status == 405)
        }
    }

    @Test("CORS preflight for /whep and a resource needs no token")
    func preflight() async throws {
        try await withServer(token: "t") { port, _ in
            let headers = [("Origin", "http://example.test"), ("Access-Control-Request-Method", "POST"),
                           ("Access-Control-Request-Headers", "authorization, content-type")]
            let whep = try await httpRequest(port: port, method: "OPTIONS", path: "/whep", headers: headers)
            #expect(whep.status == 204)
            #expect(whep.header("Access-Control-Allow-Origin") == "*")
            #expect(whep.header("Access-Control-Allow-Methods")?.contains("POST") == true)
            #expect(whep.header("Access-Control-Allow-Headers")?.contains("Authorization") == true)
            #expect(whep.header("Accept-Post") == "application/sdp")
            let resource = try await httpRequest(port: port, method: "OPTIONS", path: "/whep/viewer-1/", headers: headers)
            #expect(resource.status == 204)
            #expect(resource.header("Access-Control-Allow-Methods")?.contains("DELETE") == true)
        }
    }
}

@Suite("Page, stats and metrics")
struct ViewerServerResourceTests {
    @Test("GET / serves the viewer page without the token")
    func page() async throws {
        try await withServer(token: "t") { port, _ in
            let response = try await httpRequest(port: port, method: "GET", path: "/?token=whatever")
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "text/html; charset=utf-8")
            #expect(response.header("Referrer-Policy") == "no-referrer")
            #expect(response.text == viewerPageHTML)
            for id in ["id=\"video\"", "id=\"state\"", "id=\"stats\"", "id=\"mute\"", "RTCPeerConnection", "recvonly"] {
                #expect(response.text.contains(id))
            }
            let head = try await httpRequest(port: port, method: "HEAD", path: "/")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
        }
    }

    @Test("GET /stats is the host's JSON")
    func stats() async throws {
        try await withServer(token: "t") { port, _ in
            _ = try await httpRequest(port: port, method: "POST", path: "/whep?token=t", headers: [sdpType], body: offer)
            let response = try await httpRequest(port: port, method: "GET", path: "/stats", headers: [("Authorization", "Bearer t")])
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "application/json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            #expect(object["viewers"] as? Int == 1)
        }
    }

    @Test("GET /metrics is Prometheus text: HELP and TYPE for each metric, `name value` samples; the router's follow the viewer's")
    func metrics() async throws {
        let host = FakeSessionHost()
        try await withServer(token: "t", host: host) { port, _ in
            _ = try await httpRequest(port: port, method: "POST", path: "/whep?token=t", headers: [sdpType], body: offer)
            let response = try await httpRequest(port: port, method: "GET", path: "/metrics?token=t")
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            let all = try parseExposition(response.text)
            // The router the routes are mounted on adds its own (camagent_router_*).
            #expect(all.samples["camagent_router_sessions"] == 0 && all.types["camagent_router_sessions"] == "gauge")
            var parsed = all
            parsed.samples = all.samples.filter { !$0.key.hasPrefix("camagent_router_") }
            parsed.types = all.types.filter { !$0.key.hasPrefix("camagent_router_") }
            parsed.helps = all.helps.filter { !$0.hasPrefix("camagent_router_") }
            #expect(parsed.samples == [
                "camagent_frames_encoded_total": 1234,
                "camagent_frames_dropped_total": 5,
                "camagent_frames_dropped_encoder_busy_total": 2,
                "camagent_viewers": 1,
                "camagent_video_bitrate_bits_per_second": 1_500_000.5,
                "camagent_rtt_seconds": 0.012,
            ])
            #expect(parsed.types == [
                "camagent_frames_encoded_total": "counter",
                "camagent_frames_dropped_total": "counter",
                "camagent_frames_dropped_encoder_busy_total": "counter",
                "camagent_viewers": "gauge",
                "camagent_video_bitrate_bits_per_second": "gauge",
                "camagent_rtt_seconds": "gauge",
            ])
            #expect(Set(parsed.helps) == Set(parsed.types.keys))

            await host.setRoundTripTime(nil)
            let noRTT = try parseExposition(try await httpRequest(port: port, method: "GET", path: "/metrics?token=t").text)
            #expect(noRTT.samples["camagent_rtt_seconds"] == nil)
            #expect(noRTT.types["camagent_rtt_seconds"] == "gauge")
        }
    }
}

enum ExpositionError: Error { case notANumber(String) }

struct Exposition {
    var samples: [String: Double] = [:]
    var types: [String: String] = [:]
    var helps: [String] = []
}

/// Reads the text format the way a strict scraper would; throws on any line it
/// does not understand.
func parseExposition(_ text: String) throws -> Exposition {
    var result = Exposition()
    #expect(text.hasSuffix("\n"))
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
        let fields = line.split(separator: " ", maxSplits: 3).map(String.init)
        if line.hasPrefix("# HELP ") {
            try #require(fields.count == 4)
            result.helps.append(fields[2])
        } else if line.hasPrefix("# TYPE ") {
            try #require(fields.count == 4 && ["counter", "gauge"].contains(fields[3]))
            result.types[fields[2]] = fields[3]
        } else {
            try #require(fields.count == 2, "sample line \(line)")
            // name, or name{label="value",...}
            let name = fields[0]
            let base = String(name.prefix { $0 != "{" })
            try #require(base.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") })
            if base != name {
                let labels = name.dropFirst(base.count)
                try #require(labels.hasPrefix("{") && labels.hasSuffix("}"), "labels of \(line)")
                for pair in labels.dropFirst().dropLast().split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    try #require(parts.count == 2 && parts[0].allSatisfy { $0.isASCII && ($0.isLetter || $0 == "_") }
                                 && parts[1].hasPrefix("\"") && parts[1].hasSuffix("\"") && parts[1].count >= 2, "label \(pair)")
                }
            }
            try #require(result.types[base] != nil, "TYPE before sample \(name)")
            guard let value = Double(fields[1]) else { throw ExpositionError.notANumber(String(line)) }
            result.samples[name] = value
        }
    }
    return result
}

@Suite("Pieces")
struct ViewerServerPieceTests {
    @Test("Server stops when its task is cancelled; boundPort while running only")
    func runsUntilCancelled() async throws {
        let portSeen = PThreadLocked<Int?>(nil)
        try await withServer(token: "abc") { port, server in
            portSeen.withLock { $0 = port }
            #expect(server.boundPort == port)
            #expect(server.viewerURL(publicHost: "192.168.1.20") == "http://192.168.1.20:\(port)/?token=abc")
        }
        // The task group returned, so run() ended; the port is closed now.
        let port = try #require(portSeen.withLock { $0 })
        await #expect(throws: RawTCPConnection.Failure.self) {
            _ = try await httpRequest(port: port, method: "GET", path: "/")
        }
    }

    @Test("viewerURL: IPv6 brackets, no query when open, token percent-encoded")
    func viewerURL() {
        #expect(ViewerRoutes.viewerURL(publicHost: "fe80::1", port: 8080, token: nil) == "http://[fe80::1]:8080/")
        #expect(ViewerRoutes.viewerURL(publicHost: "cam.local", port: 9000, token: "a b&c") == "http://cam.local:9000/?token=a%20b%26c")
    }

    @Test("randomToken: 32 lowercase hex digits, different each time")
    func randomToken() {
        let tokens = (0..<50).map { _ in ViewerServerConfiguration.randomToken() }
        #expect(Set(tokens).count == 50)
        for token in tokens {
            #expect(token.utf8.count == 32)
            #expect(token.allSatisfy { "0123456789abcdef".contains($0) })
        }
    }

    @Test("constantTimeEquals")
    func compare() {
        #expect(constantTimeEquals(Array("abc".utf8), Array("abc".utf8)))
        #expect(!constantTimeEquals(Array("abc".utf8), Array("abd".utf8)))
        #expect(!constantTimeEquals(Array("abc".utf8), Array("abc\0".utf8)))
        #expect(!constantTimeEquals(Array("".utf8), Array("a".utf8)))
        #expect(constantTimeEquals(Array("".utf8), Array("".utf8)))
    }

    @Test("Prometheus numbers")
    func numbers() {
        #expect(PrometheusText.number(0) == "0")
        #expect(PrometheusText.number(2_500_000) == "2500000")
        #expect(PrometheusText.number(0.25) == "0.25")
        #expect(PrometheusText.number(.nan) == "NaN")
        #expect(PrometheusText.number(.infinity) == "+Inf")
        #expect(PrometheusText.number(-.infinity) == "-Inf")
    }

    /// Tests/Publish/viewer_page.py serves the page from the aiortc stand-in by
    /// reading the raw string out of ViewerPage.swift with this same rule.
    @Test("The page in ViewerPage.swift reads back exactly by the Python rule")
    func pageSourceOfTruth() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: root.appendingPathComponent("Sources/ViewerServer/ViewerPage.swift"), encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "let viewerPageHTML = #\"\"\""))
        let end = try #require(lines[(start + 1)...].firstIndex(of: "\"\"\"#"))
        #expect(lines[(start + 1)..<end].joined(separator: "\n") == viewerPageHTML)
        #expect(!viewerPageHTML.contains("\\#"))
    }
}

@Suite("Several cameras")
struct SeveralCamerasTests {
    @Test("camera 2 lives under /cameras/2/: its own viewers, stats and page; no camera 3; /metrics labels each")
    func secondCamera() async throws {
        let first = FakeSessionHost(), second = FakeSessionHost()
        try await withServer(host: first, moreCameras: [second]) { port, server in
            let created = try await httpRequest(port: port, method: "POST", path: "/cameras/2/whep", headers: [sdpType], body: offer)
            #expect(created.status == 201)
            #expect(created.header("Location") == "/cameras/2/whep/viewer-1")
            #expect(await second.viewers.count == 1)
            #expect(await first.viewers.isEmpty)
            // The first camera's viewer-1 does not exist: the ids are per camera.
            #expect(try await httpRequest(port: port, method: "DELETE", path: "/whep/viewer-1").status == 404)
            #expect(try await httpRequest(port: port, method: "DELETE", path: "/cameras/2/whep/viewer-1").status == 200)

            let missing = try await httpRequest(port: port, method: "POST", path: "/cameras/3/whep", headers: [sdpType], body: offer)
            #expect(missing.status == 404)
            #expect(try await httpRequest(port: port, method: "GET", path: "/cameras/0/").status == 404)

            // The page needs its trailing slash to find ./whep.
            let bare = try await httpRequest(port: port, method: "GET", path: "/cameras/2?token=x")
            #expect(bare.status == 308)
            #expect(bare.header("Location") == "/cameras/2/?token=x")
            let page = try await httpRequest(port: port, method: "GET", path: "/cameras/2/")
            #expect(page.status == 200 && page.text.contains("<html"))
            #expect(server.viewerURL(publicHost: "10.0.0.5", camera: 2).hasSuffix("/cameras/2/"))

            _ = try await httpRequest(port: port, method: "POST", path: "/whep", headers: [sdpType], body: offer)
            let metrics = try parseExposition(try await httpRequest(port: port, method: "GET", path: "/cameras/2/metrics").text)
            #expect(metrics.samples["camagent_viewers{camera=\"1\"}"] == 1)
            #expect(metrics.samples["camagent_viewers{camera=\"2\"}"] == 0)
            #expect(metrics.samples["camagent_viewers"] == nil)
        }
    }
}

@Suite("Limits")
struct ServerLimitsTests {
    /// Reads until the server closes the connection or `seconds` pass.
    static func closedWithin(_ connection: RawTCPConnection, seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            switch connection.read(timeout: 0.5) {
            case .closed: return true
            case .bytes, .nothing: continue
            }
        }
        return false
    }

    @Test("a connection whose request head never completes is closed, even when a byte comes now and then; others are served")
    func slowloris() async throws {
        let limits = ServerLimits(requestHeadTimeout: .seconds(1), idleTimeout: .seconds(60))
        try await withServer(limits: limits) { port, _ in
            let (dribblerClosed, silentClosed) = try await onOwnThread {
                let silent = try RawTCPConnection(port: port)
                _ = silent.send("GET / HTTP/1.1\r\nHost: x\r\n")
                let dribbler = try RawTCPConnection(port: port)
                _ = dribbler.send("GET / HTTP/1.1\r\n")
                // A header byte every 200 ms keeps the connection from being idle: only the head deadline can end it.
                var closed = false
                for byte in Array("X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".utf8) {
                    if case .closed = dribbler.read(timeout: 0.2) { closed = true; break }
                    if !dribbler.send([byte]) { closed = true; break }
                }
                return (closed, Self.closedWithin(silent, seconds: 20))
            }
            #expect(dribblerClosed, "the dribbling connection outlived its head deadline")
            #expect(silentClosed)
            let served = try await httpRequest(port: port, method: "GET", path: "/")
            #expect(served.status == 200)
        }
    }

    @Test("a head within the deadline is served, and the connection stays for the next request")
    func headInTime() async throws {
        try await withServer(limits: ServerLimits(requestHeadTimeout: .seconds(1))) { port, _ in
            let connection = try RawTCPConnection(port: port)
            let first = try await onOwnThread {
                _ = connection.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                return connection.read(timeout: 10)
            }
            guard case .bytes(let bytes) = first else { Issue.record("no answer: \(first)"); return }
            #expect(String(decoding: bytes.prefix(15), as: UTF8.self) == "HTTP/1.1 200 OK")
            // Past the head deadline the kept-alive connection still works (the deadline is the first head's).
            try await Task.sleep(for: .seconds(2))
            let second = try await onOwnThread {
                _ = connection.send("GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return connection.readToEnd(timeout: 10)
            }
            #expect(String(decoding: second.prefix(15), as: UTF8.self) == "HTTP/1.1 200 OK")
        }
    }

    @Test("on a kept-alive connection a later request head dribbled past its deadline is cut off")
    func slowSecondHead() async throws {
        try await withServer(limits: ServerLimits(requestHeadTimeout: .seconds(1), idleTimeout: .seconds(60))) { port, _ in
            let (firstAnswer, closed) = try await onOwnThread {
                let connection = try RawTCPConnection(port: port)
                _ = connection.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
                let first = connection.read(timeout: 10)
                // The next head a byte every 200 ms: never idle, never whole.
                for byte in Array("GET /stats HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".utf8) {
                    if case .closed = connection.read(timeout: 0.2) { return (first, true) }
                    if !connection.send([byte]) { return (first, true) }
                }
                return (first, false)
            }
            guard case .bytes(let bytes) = firstAnswer else { Issue.record("no answer to the first request: \(firstAnswer)"); return }
            #expect(String(decoding: bytes.prefix(15), as: UTF8.self) == "HTTP/1.1 200 OK")
            #expect(closed, "the second head outlived its deadline")
        }
    }

    @Test("a request body dribbled past its deadline is cut off; a body in time is read")
    func slowBody() async throws {
        try await withServer(limits: ServerLimits(requestBodyTimeout: .seconds(1), idleTimeout: .seconds(60))) { port, _ in
            let body = Array(offer.utf8)
            let head = "POST /whep HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\nContent-Length: \(body.count)\r\n\r\n"
            let (closed, inTime) = try await onOwnThread {
                let slow = try RawTCPConnection(port: port)
                _ = slow.send(head)
                var closed = false
                for byte in body {
                    if case .closed = slow.read(timeout: 0.2) { closed = true; break }
                    if !slow.send([byte]) { closed = true; break }
                }
                // The same body in halves, 300 ms apart: within the deadline.
                let fast = try RawTCPConnection(port: port)
                _ = fast.send(head)
                _ = fast.send(Array(body.prefix(body.count / 2)))
                Thread.sleep(forTimeInterval: 0.3)
                _ = fast.send(Array(body.dropFirst(body.count / 2)))
                return (closed, fast.read(timeout: 10))
            }
            #expect(closed, "a body a byte every 200 ms outlived the 1 s body deadline")
            guard case .bytes(let bytes) = inTime else { Issue.record("no answer to a body in time: \(inTime)"); return }
            #expect(String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 201")
        }
    }

    @Test("oversized headers get 400 and the connection closes; the server goes on")
    func headerLimit() async throws {
        try await withServer(limits: ServerLimits(maxHeaderBytes: 4096, maxHeaderFields: 20)) { port, _ in
            let answers = try await onOwnThread {
                let big = try RawTCPConnection(port: port)
                _ = big.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 8192) + "\r\n\r\n")
                let many = try RawTCPConnection(port: port)
                _ = many.send("GET / HTTP/1.1\r\nHost: x\r\n" + (0..<40).map { "X-\($0): y\r\n" }.joined() + "\r\n")
                return [big.readToEnd(timeout: 10), many.readToEnd(timeout: 10)]
            }
            for answer in answers { #expect(String(decoding: answer.prefix(12), as: UTF8.self) == "HTTP/1.1 400") }
            #expect(try await httpRequest(port: port, method: "GET", path: "/").status == 200)
        }
    }

    @Test("past the connection limit a new connection waits until one closes, then is served")
    func connectionLimit() async throws {
        try await withServer(limits: ServerLimits(maxConnections: 2)) { port, _ in
            let (heldAnswered, early, answer) = try await onOwnThread {
                var held: [RawTCPConnection] = []
                var answered = 0
                for _ in 0..<2 {
                    let connection = try RawTCPConnection(port: port)
                    _ = connection.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
                    if case .bytes = connection.read(timeout: 10) { answered += 1 }
                    held.append(connection)
                }
                let third = try RawTCPConnection(port: port)
                _ = third.send("GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let early = third.read(timeout: 2)
                held.removeFirst()  // closes it
                return (answered, early, third.readToEnd(timeout: 10))
            }
            #expect(heldAnswered == 2)
            #expect(early == .nothing, "served past the connection limit")
            #expect(String(decoding: answer.prefix(15), as: UTF8.self) == "HTTP/1.1 200 OK")
        }
    }
}
