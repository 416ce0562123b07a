import MediaTypes

/// Subscribers' offers in relayed sessions, each waiting for the answer of
/// the client that publishes the stream. The WHEP request that made the
/// offer waits here (at most `timeout`); the publisher's `subscribeAnswer`
/// or `subscribeError` on its signalling connection ends the wait, and so
/// does that connection closing.
final class RelayedOffers: Sendable {
    enum Outcome: Sendable, Equatable {
        case answer(sdp: String)
        /// `subscribeError`: 400 (the offer) or 503 (no room), with the publisher's words.
        case refused(code: Int, message: String)
        /// The offer could not be sent, or the publisher's connection closed before answering.
        case publisherGone
        /// The publisher's signalling broke and it has not come back yet (the router keeps its connection).
        case publisherAway
        case timedOut
    }

    /// What became of an offer handed to the publisher's connection.
    enum Delivery: Sendable, Equatable {
        case sent(to: String)
        case publisherGone
        case publisherAway
    }

    /// How long a subscriber's WHEP request waits for the publisher.
    static let timeout: Duration = .seconds(10)

    private struct Waiting {
        let continuation: CheckedContinuation<Outcome, Never>
        /// The publisher's connection, once the offer went to it.
        var connectionID: String?
    }
    private let waiting = PThreadLocked([String: Waiting]())

    /// Waits for the outcome of `subscriberID`'s offer. `send` passes the
    /// offer on and says where it went. It names the publisher's connection
    /// to `sendingTo` before the offer can reach it: a publisher that leaves
    /// as soon as it has the offer then fails the wait at once, not at the timeout.
    func awaitAnswer(subscriberID: String, timeout: Duration = RelayedOffers.timeout,
                     send: @Sendable (_ sendingTo: (String) -> Void) -> Delivery) async -> Outcome {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0[subscriberID] = Waiting(continuation: continuation) }
            let connectionID: String
            switch send({ to in waiting.withLock { $0[subscriberID]?.connectionID = to } }) {
            case .sent(let to): connectionID = to
            case .publisherGone:
                resolve(subscriberID, .publisherGone)
                return
            case .publisherAway:
                resolve(subscriberID, .publisherAway)
                return
            }
            waiting.withLock { $0[subscriberID]?.connectionID = connectionID }
            Task { [self] in
                try? await Task.sleep(for: timeout)
                resolve(subscriberID, .timedOut)
            }
        }
    }

    /// Ends one wait; false when it had already ended (answered, timed out).
    @discardableResult
    func resolve(_ subscriberID: String, _ outcome: Outcome) -> Bool {
        guard let entry = waiting.withLock({ $0.removeValue(forKey: subscriberID) }) else { return false }
        entry.continuation.resume(returning: outcome)
        return true
    }

    /// Whether `subscriberID`'s offer has gone to its publisher and waits (for tests).
    func hasSentOffer(_ subscriberID: String) -> Bool { waiting.withLock { $0[subscriberID]?.connectionID != nil } }

    /// A publisher's socket closed: every offer waiting for it fails now, not at the
    /// timeout, as `outcome` (publisherGone, or publisherAway while the router keeps its connection).
    func publisherLeft(connectionID: String, as outcome: Outcome = .publisherGone) {
        let ended = waiting.withLock { waiting -> [Waiting] in
            let ids = waiting.filter { $0.value.connectionID == connectionID }.map(\.key)
            return ids.compactMap { waiting.removeValue(forKey: $0) }
        }
        for entry in ended { entry.continuation.resume(returning: outcome) }
    }
}
