import HTTPLimits
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import ServiceLifecycle
import MediaTypes

/// The router (`camagent router`): sessions, tokens, the REST API, the
/// signalling WebSocket, and routed media through the `SessionMediaEngine`
/// it is given (DESIGN.md "Sessions"). Run it with `run()` in a task of its
/// own, or as a `Service` in a `ServiceGroup`.
public final class SessionServer: Service, Sendable {
    public let configuration: SessionServerConfiguration
    public let registry: SessionRegistry
    public let tokens: TokenAuthority
    let services: RouterServices
    let logger: Logger
    private let onServerRunning: @Sendable (_ port: Int) async -> Void
    private let port = PThreadLocked<Int?>(nil)

    /// - Parameters:
    ///   - secret: the HS256 key every token is checked against.
    ///   - mediaEngine: answers WHIP and WHEP offers of routed sessions.
    ///   - onServerRunning: called once the socket is bound, with the port it
    ///     is bound to (the useful one when port 0 was asked for).
    public init(
        configuration: SessionServerConfiguration,
        secret: RouterSecret,
        mediaEngine: any SessionMediaEngine,
        logger: Logger,
        onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        registry = SessionRegistry(limits: configuration.limits)
        tokens = TokenAuthority(secret: secret)
        services = RouterServices(registry: registry, tokens: tokens, media: mediaEngine, logger: logger)
        // Audio fallback's steps go to the session of the subscriber they are about.
        mediaEngine.onSubscriberVideoQuality { [registry] subscriberID, messageType in
            registry.subscriberVideoQuality(subscriberID: subscriberID, messageType: messageType)
        }
        self.logger = logger
        self.onServerRunning = onServerRunning
    }

    /// The port the server is listening on; nil until it runs.
    public var boundPort: Int? { port.withLock { $0 } }

    /// Serves until the calling task is cancelled or, inside a `ServiceGroup`,
    /// until graceful shutdown; either way it stops gracefully (open
    /// WebSockets are closed, requests in flight get at most 5 s). Throws
    /// when the address cannot be bound.
    public func run() async throws {
        let app = try makeApplication()
        defer { port.withLock { $0 = nil } }
        // As in ViewerServer: cancelling Hummingbird's server task aborts its
        // accept loop, so the server runs in a group of its own whose graceful
        // shutdown our cancellation triggers. (The unstructured task keeps our
        // task-locals, so an enclosing ServiceGroup's graceful shutdown reaches it too.)
        var groupConfiguration = ServiceGroupConfiguration(services: [app], logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(5)
        let group = ServiceGroup(configuration: groupConfiguration)
        let serving = Task { try await group.run() }
        // Sessions left empty are let go (RegistryLimits.sessionIdleTimeout), looked at every minute.
        let expiry = Task { [registry, logger] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(60))
                for id in registry.expireIdleSessions() {
                    logger.notice("session expired: no connection for its idle time", metadata: ["session": "\(id)"])
                }
            }
        }
        defer { expiry.cancel() }
        try await withTaskCancellationHandler {
            try await serving.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
    }

    /// The HTTP responder alone (every route but the WebSocket), for tests.
    func makeResponder() -> RESTResponder {
        RESTResponder(services: services, maxBodySize: configuration.maxBodySize,
                      additionalRoutes: configuration.additionalRoutes)
    }

    func makeApplication() throws -> some ApplicationProtocol {
        let upgrade = SignallingUpgrade(services: services)
        let webSocket = WebSocketServerConfiguration(
            // Well above the 64 KiB the router reads, so a larger message is
            // answered with an `error` rather than a dropped connection.
            maxFrameSize: SignallingConnection.maxReadBytes,
            autoPing: .enabled(timePeriod: .seconds(30)),
            closeTimeout: .seconds(10)
        )
        let limits = configuration.serverLimits
        // The idle timeout and the body deadline hold for plain HTTP connections
        // only: a connection upgraded to signalling lasts as long as its session,
        // and WebSocket pings watch it. The head deadline covers the handshake
        // (and, with TLS, the TLS handshake before it).
        let http1 = limits.http1Configuration(logger: logger, maxBodyBytes: configuration.maxBodySize)
        let security = configuration.transportSecurity
        return Application(
            responder: makeResponder(),
            server: HTTPServerBuilder { responder in
                let plain = RequestDeadlineChannel(
                    HTTP1WebSocketUpgradeChannel(
                        responder: responder, configuration: .init(http1: http1, ws: webSocket)
                    ) { head, channel, logger in
                        await upgrade.shouldUpgrade(head, channel: channel, logger: logger)
                    },
                    limits: limits)
                guard let security else { return plain }
                return try security.secure(plain)
            },
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: "camagent-router",
                availableConnectionsDelegate: limits.availableConnections),
            onServerRunning: { [self] channel in
                let bound = channel.localAddress?.port ?? configuration.port
                port.withLock { $0 = bound }
                await onServerRunning(bound)
            },
            logger: logger
        )
    }
}
