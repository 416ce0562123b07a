import Foundation
import Subscriber
import WHIP

/// A stream of a router session, as `GET /v2/sessions/{sid}/streams` lists it.
public struct SessionStream: Sendable, Codable, Equatable {
    public var streamId: String
    public var connectionId: String
    public var name: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    public var width: Int
    public var height: Int
}

/// The REST side of a camagent router session, for a subscriber: which
/// streams it has, and where each one's WHEP endpoint is.
public struct SessionStreams: Sendable {
    /// `http(s)://HOST:PORT/v2/sessions/SID`, without a trailing slash.
    public let sessionURL: String
    private let token: String
    private let timeout: Double

    public init(sessionURL: String, token: String, timeout: Double = 10) {
        var url = sessionURL
        while url.hasSuffix("/") { url.removeLast() }
        self.sessionURL = url
        self.token = token.trimmingCharacters(in: .whitespacesAndNewlines)
        self.timeout = timeout
    }

    /// The session's streams now. 401/403 and 404 are the WHEP client's
    /// errors (a refused token, no such session), so they read and exit alike.
    public func list() throws(SubscriberError) -> [SessionStream] {
        let url = sessionURL + "/streams"
        let response: PlainHTTPResponse
        do {
            response = try plainHTTPRequest(method: "GET", url: url, headers: [
                ("Authorization", "Bearer \(token)"), ("Accept", "application/json"),
            ], timeout: timeout)
        } catch {
            throw .signalling(error)
        }
        let detail = Self.message(response.body)
        switch response.status {
        case 200: break
        case 401, 403: throw .signalling(.unauthorized(status: response.status, detail: detail))
        case 404: throw .signalling(.notFound(url: "\(url) (\(detail))"))
        case 500...: throw .signalling(.serverError(status: response.status, detail: detail))
        default: throw .signalling(.rejected(status: response.status, detail: detail))
        }
        do { return try JSONDecoder().decode([SessionStream].self, from: Data(response.body)) } catch {
            throw .signalling(.badResponse("GET \(url): not a list of streams: \(error)"))
        }
    }

    /// The WHEP endpoint of one stream.
    public func subscribeURL(streamID: String) -> String { "\(sessionURL)/streams/\(streamID)/subscribe" }

    /// The router's `{"code","message"}`, or the start of whatever it said.
    private static func message(_ body: [UInt8]) -> String {
        struct Failure: Decodable { var message: String }
        if let failure = try? JSONDecoder().decode(Failure.self, from: Data(body)) { return failure.message }
        return String(decoding: body.prefix(200), as: UTF8.self)
    }
}
