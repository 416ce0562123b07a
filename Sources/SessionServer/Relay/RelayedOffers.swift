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
        case timedOut
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
    /// offer on and returns the publisher's connection id (nil: it could not).
    func awaitAnswer(subscriberID: String, timeout: Duration = RelayedOffers.timeout,
                     send: @Sendable () -> String?) async -> Outcome {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0[subscriberID] = Waiting(continuation: continuation) }
            guard let connectionID = send() else {
                resolve(subscriberID, .publisherGone)
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

    /// A publisher's connection closed: every offer waiting for it fails now, not at the timeout.
    func publisherLeft(connectionID: String) {
        let ended = waiting.withLock { waiting -> [Waiting] in
            let ids = waiting.filter { $0.value.connectionID == connectionID }.map(\.key)
            return ids.compactMap { waiting.removeValue(forKey: $0) }
        }
        for entry in ended { entry.continuation.resume(returning: .publisherGone) }
    }
}
