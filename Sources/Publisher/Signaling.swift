import Logging
import WHIP

/// How the publisher hands its offer to a server and gets the answer.
public protocol PublisherSignaling: Sendable {
    /// Sends the SDP offer; returns the answer and the stream's resource name.
    func publish(offer: String) throws(PublisherError) -> (answer: String, resource: String)
    /// Ends the stream on the server (best effort).
    func unpublish()
}

/// WHIP (RFC 9725): POST the offer, DELETE the resource on stop.
public final class WHIPSignaling: PublisherSignaling {
    private let client: WHIPClient
    private let session = Mutex<WHIPSession?>(nil)
    private let logger: Logger

    public init(client: WHIPClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func publish(offer: String) throws(PublisherError) -> (answer: String, resource: String) {
        do {
            let s = try client.publish(offer: offer)
            session.withLock { $0 = s }
            return (s.answerSDP, s.resourceURL)
        } catch {
            throw .signaling(error)
        }
    }

    public func unpublish() {
        guard let s = session.withLock({ s in defer { s = nil }; return s }) else { return }
        do { try client.stop(s) } catch { logger.notice("WHIP DELETE \(s.resourceURL) failed: \(error)") }
    }
}

import Synchronization
