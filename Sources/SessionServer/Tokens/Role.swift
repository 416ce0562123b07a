/// A client token's role, as the `role` claim spells it. The role decides
/// what a connection may do (`capabilities`).
public enum Role: String, Sendable, Codable, CaseIterable {
    case subscriber
    case publisher
    case publisherOnly = "publisher-only"
    case moderator

    public var capabilities: Capabilities {
        Capabilities(
            publish: self != .subscriber,
            subscribe: self != .publisherOnly,
            forceDisconnect: self == .moderator,
            captions: self == .moderator
        )
    }
}

/// What a connection may do; sent as is in the `connected` message.
public struct Capabilities: Sendable, Equatable, Codable {
    public var publish: Bool
    public var subscribe: Bool
    public var forceDisconnect: Bool
    /// Starting and stopping live captions (a later issue builds the captions themselves).
    public var captions: Bool

    public init(publish: Bool, subscribe: Bool, forceDisconnect: Bool, captions: Bool) {
        self.publish = publish
        self.subscribe = subscribe
        self.forceDisconnect = forceDisconnect
        self.captions = captions
    }
}

/// One of the things a role may or may not do.
public enum Capability: Sendable {
    case publish, subscribe, forceDisconnect, captions

    /// "the role subscriber may not <verb>".
    var verb: String {
        switch self {
        case .publish: "publish"
        case .subscribe: "subscribe"
        case .forceDisconnect: "force a disconnect"
        case .captions: "control captions"
        }
    }
}

extension Capabilities {
    public func allows(_ capability: Capability) -> Bool {
        switch capability {
        case .publish: publish
        case .subscribe: subscribe
        case .forceDisconnect: forceDisconnect
        case .captions: captions
        }
    }
}
