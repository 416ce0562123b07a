import HummingbirdCore
import Logging
import NIOCore

/// What camagent's HTTP servers (the built-in viewer and the router) allow a
/// client, so that clients holding connections, sending slowly or sending
/// huge headers cannot take the server away from everyone else. Bodies and
/// WebSocket messages have their own limits where they are read.
public struct ServerLimits: Sendable, Equatable {
    /// Open connections at most; past it, new ones wait in the listen backlog
    /// until one closes (the server stops accepting, it does not refuse).
    public var maxConnections: Int
    /// A request head must arrive whole within this time (the first of a
    /// connection from its start, later ones from their first byte), or the
    /// connection is closed (a slowloris sends a header byte now and then).
    public var requestHeadTimeout: TimeAmount
    /// A request body must arrive whole within this time of its head.
    public var requestBodyTimeout: TimeAmount
    /// An HTTP connection with nothing coming or going for this long is closed.
    /// Upgraded WebSocket connections have their own pings instead.
    public var idleTimeout: TimeAmount
    /// All header lines of a request together, at most.
    public var maxHeaderBytes: Int
    /// Header lines of a request, at most.
    public var maxHeaderFields: Int

    public init(
        maxConnections: Int = 256, requestHeadTimeout: TimeAmount = .seconds(10), requestBodyTimeout: TimeAmount = .seconds(10),
        idleTimeout: TimeAmount = .seconds(60), maxHeaderBytes: Int = 16 * 1024, maxHeaderFields: Int = 100
    ) {
        self.maxConnections = maxConnections
        self.requestHeadTimeout = requestHeadTimeout
        self.requestBodyTimeout = requestBodyTimeout
        self.idleTimeout = idleTimeout
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderFields = maxHeaderFields
    }

    /// The HTTP/1 decoder's share of the limits.
    public var decoder: HTTP1Channel.Configuration.DecoderConfiguration {
        .init(maxHeaderFieldSize: maxHeaderBytes, maxHeaderListSize: maxHeaderBytes, maxHeaderFieldCount: maxHeaderFields)
    }

    /// The HTTP/1 configuration of both servers: the decoder's limits, the idle
    /// timeout, the body deadline behind the decoder, and `100 Continue` for
    /// clients that wait for it. Use it inside a
    /// `RequestDeadlineChannel`, which watches the heads.
    /// `maxBodyBytes`: the largest body the server reads (a larger one is
    /// refused from its head, without a `100 Continue` first).
    public func http1Configuration(logger: Logger, maxBodyBytes: Int? = nil) -> HTTP1Channel.Configuration {
        let bodyTimeout = requestBodyTimeout
        return HTTP1Channel.Configuration(
            additionalChannelHandlers: [RequestBodyDeadlineHandler(timeout: bodyTimeout, logger: logger),
                                        ExpectContinueHandler(maxBodyBytes: maxBodyBytes)],
            idleTimeout: idleTimeout, httpDecoderConfiguration: decoder)
    }

    /// The connection limit, as the server configuration takes it.
    public var availableConnections: MaximumAvailableConnections { MaximumAvailableConnections(maxConnections) }
}
