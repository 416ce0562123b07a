/// How the publisher hands its offer to a server and gets the answer. The
/// publisher knows no signalling protocol: WHIP (RFC 9725) sits behind this
/// in the agent (`WHIPSignaling`), a session router's client can too.
public protocol PublisherSignaling: Sendable {
    /// Sends the SDP offer; returns the answer and the stream's resource name.
    func publish(offer: String) throws(PublisherError) -> (answer: String, resource: String)
    /// Ends the stream on the server (best effort).
    func unpublish()
}
