import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes

/// A server channel whose requests must each arrive whole in time, wrapped
/// around Hummingbird's own (plain HTTP/1, or HTTP/1 with the WebSocket upgrade).
///
/// Two deadlines, so that a client sending slowly cannot hold a connection:
/// - the head: a connection's first request head within `headTimeout` of
///   connecting, and every later head within `headTimeout` of its first byte.
///   It is watched on the raw bytes, in front of the HTTP decoder, so it holds
///   before any request exists (and before a WebSocket upgrade is decided);
/// - the body: within the body timeout of its head (`RequestBodyDeadlineHandler`,
///   which `ServerLimits.http1Configuration` puts behind the decoder).
///
/// Between requests the HTTP idle timeout applies; an upgraded WebSocket
/// connection has its own pings instead.
public struct RequestDeadlineChannel<Base: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Base.Value

    let base: Base
    let headTimeout: TimeAmount

    public init(_ base: Base, headTimeout: TimeAmount) {
        self.base = base
        self.headTimeout = headTimeout
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                RequestHeadDeadlineHandler(timeout: headTimeout, logger: logger), position: .first)
        }.flatMap { base.setup(channel: channel, logger: logger) }
    }

    public func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Closes the connection unless each request head (up to the empty line that
/// ends the header lines: CRLF CRLF, or LF LF) arrives within the timeout: the
/// first counted from the connection's start, later ones from their first byte.
///
/// After a head it waits, reading nothing, until `RequestBodyDeadlineHandler`
/// says the request has ended; the next byte starts the next head. A connection
/// upgraded to WebSocket never says so, and its frames pass untouched.
final class RequestHeadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        /// A head is under way: its bytes are scanned and the timer runs.
        case readingHead
        /// The head is whole; the request's body (or a WebSocket) follows.
        case afterHead
        /// The last request ended; the next byte starts a head.
        case betweenRequests
    }

    private let timeout: TimeAmount
    private let logger: Logger
    private var state = State.readingHead
    private var timer: Scheduled<Void>?
    /// The bytes since the last line feed were only carriage returns: the next LF ends an empty line.
    private var atLineStart = false

    init(timeout: TimeAmount, logger: Logger) {
        self.timeout = timeout
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if state == .betweenRequests {
            state = .readingHead
            atLineStart = false
            arm(context)
        }
        if state == .readingHead {
            for byte in unwrapInboundIn(data).readableBytesView {
                switch byte {
                case UInt8(ascii: "\n"):
                    if atLineStart { headRead() }
                    atLineStart = true
                case UInt8(ascii: "\r"):
                    continue
                default:
                    atLineStart = false
                }
                if state != .readingHead { break }
            }
        }
        context.fireChannelRead(data)
    }

    /// The head is whole: seen here, or decoded behind (which is authoritative
    /// when a head's last line ending straddled two reads in an odd way).
    func headRead() {
        cancelTimer()
        if state == .readingHead { state = .afterHead }
    }

    /// The request (head and body) has been read whole.
    func requestEnded() {
        cancelTimer()
        state = .betweenRequests
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, state == .readingHead else { return }
        let timeout = self.timeout
        let logger = self.logger
        let remote = context.channel.remoteAddress.map { "\($0)" } ?? "?"
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) {
            logger.notice("closing a connection that sent no whole request head in time",
                          metadata: ["remote": "\(remote)", "seconds": "\(timeout.nanoseconds / 1_000_000_000)"])
            channel.close(promise: nil)
        }
    }
}

/// Behind the HTTP decoder: closes the connection unless a request's body has
/// arrived whole (its end) within the timeout of its head, and tells the head
/// watcher in front when a head and a request are done.
final class RequestBodyDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let timeout: TimeAmount
    private let logger: Logger
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount, logger: Logger) {
        self.timeout = timeout
        self.logger = logger
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            headWatcher(context)?.headRead()
            timer?.cancel()
            let timeout = self.timeout
            let logger = self.logger
            let path = head.path ?? ""
            let channel = context.channel
            timer = context.eventLoop.scheduleTask(in: timeout) {
                logger.notice("closing a connection whose request body did not arrive whole in time",
                              metadata: ["path": "\(path)", "seconds": "\(timeout.nanoseconds / 1_000_000_000)"])
                channel.close(promise: nil)
            }
        case .body:
            break
        case .end:
            timer?.cancel()
            timer = nil
            headWatcher(context)?.requestEnded()
        }
        context.fireChannelRead(data)
    }

    private func headWatcher(_ context: ChannelHandlerContext) -> RequestHeadDeadlineHandler? {
        try? context.pipeline.syncOperations.handler(type: RequestHeadDeadlineHandler.self)
    }
}
