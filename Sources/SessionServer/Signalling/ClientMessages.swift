import FoundationEssentials

/// The messages a client may send on the signalling WebSocket, decoded and
/// checked. Anything else becomes a `SignallingRefusal`, answered with an
/// `error` message; the connection stays open either way.
enum ClientMessage: Equatable {
    /// To every other connection, or to `to` alone.
    case signal(signalType: String?, data: JSONValue, to: String?)
    case publisherProperty(streamID: String, hasAudio: Bool?, hasVideo: Bool?, publishCaptions: Bool?)
    case subscriberSettings(subscriberID: String, settings: SubscriberSettings)
    case ping
    /// Relayed sessions: the publisher's answer to a `subscribeOffer`.
    case subscribeAnswer(subscriberID: String, sdp: String)
    /// Relayed sessions: the publisher refuses a `subscribeOffer`; `code` 400
    /// (an offer it cannot answer) or 503 (no room), passed to the subscriber.
    case subscribeError(subscriberID: String, code: Int, message: String)
    /// Relayed sessions: the publisher's connection to that subscriber ended
    /// (its ICE consent stopped: a closed tab never sends its DELETE).
    case subscriberLeft(subscriberID: String)

    /// Largest text message read; a larger one gets an `error` (413).
    static let maxMessageBytes = 64 * 1024
    /// Largest `signal` data, as JSON text.
    static let maxSignalDataBytes = 8 * 1024
    static let maxSignalTypeLength = 128
    static let maxVideoWidth = 7680, maxVideoHeight = 4320
    static let frameRates = 1.0...120.0
    /// A subscriber's preferredResolution, in `subscriberSettings` or its WHEP offer's URL.
    static func acceptsPreferredResolution(width: Int, height: Int) -> Bool {
        (1...maxVideoWidth).contains(width) && (1...maxVideoHeight).contains(height)
    }
    static let preferredResolutionBounds = "1x1 to \(maxVideoWidth)x\(maxVideoHeight)"
    static let preferredFrameRateBounds = "\(Int(frameRates.lowerBound)) to \(Int(frameRates.upperBound))"

    private struct Envelope: Decodable { var type: String? }

    private struct SignalFields: Decodable {
        var signalType: String?
        var data: JSONValue?
        var to: String?
    }

    private struct PublisherPropertyFields: Decodable {
        var streamId: String
        var hasAudio: Bool?
        var hasVideo: Bool?
        var publishCaptions: Bool?
    }

    private struct Resolution: Decodable {
        var width: Int
        var height: Int
    }

    private struct SubscriberSettingsFields: Decodable {
        var subscriberId: String
        var subscribeToAudio: Bool?
        var subscribeToVideo: Bool?
        var subscribeToCaptions: Bool?
        var preferredResolution: Resolution?
        var preferredFrameRate: Double?
    }

    private struct SubscribeAnswerFields: Decodable {
        var subscriberId: String
        var sdp: String
    }

    private struct SubscriberLeftFields: Decodable {
        var subscriberId: String
    }

    private struct SubscribeErrorFields: Decodable {
        var subscriberId: String
        var code: Int?
        var message: String
    }

    /// Decodes and checks one text message.
    static func parse(_ text: String) throws(SignallingRefusal) -> ClientMessage {
        let bytes = Data(text.utf8)
        guard bytes.count <= maxMessageBytes else {
            throw SignallingRefusal(413, "message of \(bytes.count) bytes; at most \(maxMessageBytes) are read")
        }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: bytes)
        } catch {
            throw SignallingRefusal(400, "not a JSON object: messages are JSON objects with a \"type\"")
        }
        guard let type = envelope.type else { throw SignallingRefusal(400, "the message has no \"type\"") }
        switch type {
        case "ping":
            return .ping
        case "signal":
            let fields = try decode(SignalFields.self, bytes, type)
            let data = fields.data ?? .string("")
            let size = jsonText(data).utf8.count
            guard size <= maxSignalDataBytes else {
                throw SignallingRefusal(413, "signal data of \(size) bytes; at most \(maxSignalDataBytes) are sent")
            }
            // In bytes: one character can hold any number of combining marks.
            if let signalType = fields.signalType, signalType.utf8.count > maxSignalTypeLength {
                throw SignallingRefusal(400, "signalType longer than \(maxSignalTypeLength) bytes")
            }
            return .signal(signalType: fields.signalType, data: data, to: fields.to)
        case "publisherProperty":
            let fields = try decode(PublisherPropertyFields.self, bytes, type)
            guard fields.hasAudio != nil || fields.hasVideo != nil || fields.publishCaptions != nil else {
                throw SignallingRefusal(400, "publisherProperty needs hasAudio, hasVideo or publishCaptions")
            }
            return .publisherProperty(streamID: fields.streamId, hasAudio: fields.hasAudio, hasVideo: fields.hasVideo,
                                      publishCaptions: fields.publishCaptions)
        case "subscriberSettings":
            let fields = try decode(SubscriberSettingsFields.self, bytes, type)
            if let r = fields.preferredResolution {
                guard acceptsPreferredResolution(width: r.width, height: r.height) else {
                    throw SignallingRefusal(400, "preferredResolution must be \(preferredResolutionBounds)")
                }
            }
            if let rate = fields.preferredFrameRate {
                guard frameRates.contains(rate) else {
                    throw SignallingRefusal(400, "preferredFrameRate must be \(preferredFrameRateBounds)")
                }
            }
            let settings = SubscriberSettings(
                subscribeToAudio: fields.subscribeToAudio, subscribeToVideo: fields.subscribeToVideo,
                subscribeToCaptions: fields.subscribeToCaptions,
                preferredResolution: fields.preferredResolution.map { ($0.width, $0.height) },
                preferredFrameRate: fields.preferredFrameRate)
            return .subscriberSettings(subscriberID: fields.subscriberId, settings: settings)
        case "subscribeAnswer":
            let fields = try decode(SubscribeAnswerFields.self, bytes, type)
            guard fields.sdp.hasPrefix("v=0") else { throw SignallingRefusal(400, "subscribeAnswer: sdp is not an SDP answer") }
            return .subscribeAnswer(subscriberID: fields.subscriberId, sdp: fields.sdp)
        case "subscribeError":
            let fields = try decode(SubscribeErrorFields.self, bytes, type)
            // Only what a WHEP client can act on: its offer (400) or no room (503).
            let code = fields.code == 400 ? 400 : 503
            return .subscribeError(subscriberID: fields.subscriberId, code: code, message: String(fields.message.prefix(500)))
        case "subscriberLeft":
            return .subscriberLeft(subscriberID: try decode(SubscriberLeftFields.self, bytes, type).subscriberId)
        default:
            throw SignallingRefusal(400, "unknown message type \"\(type.unicodeScalars.prefix(40))\"; the types are signal, publisherProperty, "
                                    + "subscriberSettings, subscribeAnswer, subscribeError, subscriberLeft, ping")
        }
    }

    private static func decode<T: Decodable>(_ fields: T.Type, _ bytes: Data, _ type: String) throws(SignallingRefusal) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: bytes)
        } catch let error as DecodingError {
            throw SignallingRefusal(400, "\(type): \(describe(error))")
        } catch {
            throw SignallingRefusal(400, "\(type): \(error)")
        }
    }
}

/// A client message refused: sent back as `{"type":"error","code":N,"message":"..."}`.
struct SignallingRefusal: Error, Equatable {
    var code: Int
    var message: String

    init(_ code: Int, _ message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: RegistryError) {
        self.init(error.status, error.description)
    }

    /// The `error` message as sent.
    var messageText: String { jsonText(ServerMessage.Error(code: code, message: message)) }
}
