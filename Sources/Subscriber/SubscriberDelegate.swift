/// OpenTok's subscriber delegate, by its names: the same events as the
/// `onEvent` closure, one method each (every one has an empty default). Called
/// on the subscriber's threads, after `onEvent`.
public protocol SubscriberDelegate: AnyObject, Sendable {
    /// Media flows (ICE and DTLS done).
    func subscriberDidConnect(_ subscriber: Subscriber)
    /// The media stopped (consent lost); the subscriber reconnects.
    func subscriberDidDisconnect(_ subscriber: Subscriber, reason: String)
    /// Media flows again after a disconnect.
    func subscriberDidReconnect(_ subscriber: Subscriber)
    func subscriber(_ subscriber: Subscriber, videoDisabledReason reason: VideoChangeReason)
    func subscriber(_ subscriber: Subscriber, videoEnabledReason reason: VideoChangeReason)
    /// Audio fallback's warning of heavy loss, and its lifting.
    func subscriberVideoDisableWarning(_ subscriber: Subscriber)
    func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber)
    func subscriber(_ subscriber: Subscriber, videoDimensionsWidth width: Int, height: Int)
    func subscriber(_ subscriber: Subscriber, captionReceived text: String, isFinal: Bool)
    /// The stream ended (its sender closed it) or could not be reached again: the subscriber stops.
    func subscriber(_ subscriber: Subscriber, streamEndedReason reason: String)
}

extension SubscriberDelegate {
    public func subscriberDidConnect(_ subscriber: Subscriber) {}
    public func subscriberDidDisconnect(_ subscriber: Subscriber, reason: String) {}
    public func subscriberDidReconnect(_ subscriber: Subscriber) {}
    public func subscriber(_ subscriber: Subscriber, videoDisabledReason reason: VideoChangeReason) {}
    public func subscriber(_ subscriber: Subscriber, videoEnabledReason reason: VideoChangeReason) {}
    public func subscriberVideoDisableWarning(_ subscriber: Subscriber) {}
    public func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber) {}
    public func subscriber(_ subscriber: Subscriber, videoDimensionsWidth width: Int, height: Int) {}
    public func subscriber(_ subscriber: Subscriber, captionReceived text: String, isFinal: Bool) {}
    public func subscriber(_ subscriber: Subscriber, streamEndedReason reason: String) {}

    /// One event, to its method.
    func deliver(_ event: SubscriberEvent, from subscriber: Subscriber) {
        switch event {
        case .connected: subscriberDidConnect(subscriber)
        case .disconnected(let reason): subscriberDidDisconnect(subscriber, reason: reason)
        case .reconnected: subscriberDidReconnect(subscriber)
        case .videoDimensions(let width, let height): self.subscriber(subscriber, videoDimensionsWidth: width, height: height)
        case .videoDisabled(let reason): self.subscriber(subscriber, videoDisabledReason: reason)
        case .videoEnabled(let reason): self.subscriber(subscriber, videoEnabledReason: reason)
        case .videoDisableWarning: subscriberVideoDisableWarning(subscriber)
        case .videoDisableWarningLifted: subscriberVideoDisableWarningLifted(subscriber)
        case .captionReceived(let text, let isFinal): self.subscriber(subscriber, captionReceived: text, isFinal: isFinal)
        case .streamEnded(let reason), .streamDestroyed(let reason): self.subscriber(subscriber, streamEndedReason: reason)
        }
    }
}
