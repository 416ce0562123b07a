import MediaTypes

/// How the publisher hands its offer to a server and gets the answer. The
/// publisher knows no signalling protocol: WHIP (RFC 9725) sits behind this
/// (`WHIPSignaling`, in the WHIP target), and so does a router session's
/// publish endpoint (`Session.makePublisher`).
public protocol PublisherSignaling: Sendable {
    /// Sends the SDP offer; returns the answer and the stream's resource name.
    /// A request of `stop` (the publisher's `unpublish()`) ends the exchange at
    /// once, with any error: the publisher knows it asked.
    func publish(offer: String, stop: StopSignal?) throws(PublisherError) -> (answer: String, resource: String)
    /// Ends the stream on the server (best effort).
    func unpublish()
}
