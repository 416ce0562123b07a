import HTTPLimits
import Hummingbird
import HummingbirdCore
import Logging
import ServiceLifecycle
import MediaTypes

/// The embedded viewer's HTTP server: `GET /` the viewer page, WHEP
/// (`POST /whep`, `DELETE /whep/<id>`), `GET /stats` and `GET /metrics`, all
/// answered from a `WHEPSessionHost`. Run it with `run()` in a task of its
/// own, or as a `Service` in a `ServiceGroup`.
public final class ViewerServer: Service, Sendable {
    public let configuration: ViewerServerConfiguration
    /// One WHEP host per camera: the first at /, /whep, /stats; camera N also at /cameras/N/.
    private let cameras: [any WHEPSessionHost]
    private let logger: Logger
    private let onServerRunning: @Sendable (_ port: Int) async -> Void
    private let port = PThreadLocked<Int?>(nil)

    /// One camera's server, as before several cameras.
    public convenience init(
        configuration: ViewerServerConfiguration,
        sessions: any WHEPSessionHost,
        logger: Logger,
        onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) {
        self.init(configuration: configuration, cameras: [sessions], logger: logger, onServerRunning: onServerRunning)
    }

    /// - Parameter onServerRunning: called once the socket is bound, with the
    ///   port it is bound to (the useful one when port 0 was asked for).
    public init(
        configuration: ViewerServerConfiguration,
        cameras: [any WHEPSessionHost],
        logger: Logger,
        onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) {
        precondition(!cameras.isEmpty, "a viewer server serves at least one camera")
        self.configuration = configuration
        self.cameras = cameras
        self.logger = logger
        self.onServerRunning = onServerRunning
    }

    /// The port the server is listening on; nil until it runs.
    public var boundPort: Int? { port.withLock { $0 } }

    /// Serves until the calling task is cancelled or, inside a `ServiceGroup`,
    /// until graceful shutdown; either way it stops gracefully: the listening
    /// socket closes, requests in flight are finished (at most 5 s), idle
    /// keep-alive connections are closed. Throws when the address cannot be bound.
    public func run() async throws {
        let responder = ViewerResponder(
            cameras: cameras,
            token: configuration.token,
            maxBodySize: configuration.maxBodySize
        )
        let limits = configuration.serverLimits
        let http1 = limits.http1Configuration(logger: logger)
        let app = Application(
            responder: responder,
            server: HTTPServerBuilder { responder in
                RequestDeadlineChannel(
                    HTTP1Channel(responder: responder, configuration: http1),
                    headTimeout: limits.requestHeadTimeout)
            },
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "camagent",
                availableConnectionsDelegate: limits.availableConnections
            ),
            onServerRunning: { [self] channel in
                let bound = channel.localAddress?.port ?? configuration.port
                port.withLock { $0 = bound }
                await onServerRunning(bound)
            },
            logger: logger
        )
        defer { port.withLock { $0 = nil } }
        // Cancelling Hummingbird's server task aborts its accept loop (it logs that
        // as an error); a graceful shutdown ends it cleanly. So the server runs in
        // a task that is not cancelled with ours, and our cancellation becomes a
        // graceful shutdown, which ServiceLifecycle escalates to cancellation if
        // it takes too long. (An unstructured task keeps our task-locals, so a
        // graceful shutdown from an enclosing ServiceGroup still reaches it.)
        var groupConfiguration = ServiceGroupConfiguration(services: [app], logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(5)
        let group = ServiceGroup(configuration: groupConfiguration)
        let serving = Task { try await group.run() }
        try await withTaskCancellationHandler {
            try await serving.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
    }

    /// The link to print: `http://HOST:PORT/?token=TOKEN` (without the query
    /// when the server is open), and `/cameras/N/` for camera N after the first.
    /// The port is the bound one once running.
    public func viewerURL(publicHost: String, camera: Int = 1) -> String {
        var host = publicHost
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        var url = "http://\(host):\(boundPort ?? configuration.port)" + Self.cameraPath(camera)
        if let token = configuration.token { url += "?token=\(percentEncoded(token))" }
        return url
    }

    /// Where camera N's page, WHEP endpoint and stats are: `/` for the first, `/cameras/N/` for the others.
    public static func cameraPath(_ camera: Int) -> String { camera == 1 ? "/" : "/cameras/\(camera)/" }
}

/// Query-safe form of a token: RFC 3986 unreserved characters kept, every
/// other byte as %XX.
public func percentEncoded(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.append(byte)
        default:
            out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
        }
    }
    return String(decoding: out, as: UTF8.self)
}
