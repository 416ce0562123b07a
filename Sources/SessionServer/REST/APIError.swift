import Hummingbird

/// A refusal as the REST API sends it: the status, and `{"code":N,"message":"..."}`.
struct APIError: Error, Equatable {
    var status: Int
    var message: String

    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    init(_ error: RegistryError) {
        self.init(error.status, error.description)
    }

    init(_ error: MediaEngineError) {
        switch error {
        case .badOffer(let why): self.init(400, "bad offer: \(why)")
        case .noCommonCodec(let why): self.init(400, "no codec in the offer that the router can forward: \(why)")
        case .unavailable(let why): self.init(503, "media unavailable: \(why)")
        }
    }

    struct Body: Encodable {
        var code: Int
        var message: String
    }

    var jsonBody: String { jsonText(Body(code: status, message: message)) }
}
