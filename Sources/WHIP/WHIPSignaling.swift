import Logging
import Publisher
import MediaTypes

/// WHIP (RFC 9725) as the publisher's signalling: POST the offer, DELETE the
/// resource on stop. WHIP's errors become the publisher's signalling errors.
public final class WHIPSignaling: PublisherSignaling {
    private let client: WHIPClient
    private let session = PThreadLocked<WHIPSession?>(nil)
    private let logger: Logger

    public init(client: WHIPClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func publish(offer: String, stop: StopSignal? = nil) throws(PublisherError) -> (answer: String, resource: String) {
        do {
            let s = try client.publish(offer: offer, stop: stop)
            session.withLock { $0 = s }
            return (s.answerSDP, s.resourceURL)
        } catch {
            throw .signaling(SignalingError(Self.kind(of: error), error.description))
        }
    }

    public func unpublish() {
        guard let s = session.withLock({ s in defer { s = nil }; return s }) else { return }
        do { try client.stop(s) } catch { logger.notice("WHIP DELETE \(s.resourceURL) failed: \(error)") }
    }

    public static func kind(of error: WHIPError) -> SignalingError.Kind {
        switch error {
        case .badURL: .badAddress
        case .unreachable, .refused, .timedOut, .tls: .unreachable
        case .stopped: .unreachable   // the publisher asked for it and does not report it
        case .unauthorized: .unauthorized
        case .notFound, .rejected, .serverError, .badResponse: .refused
        }
    }
}
