import FoundationEssentials
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// A server channel whose requests must each arrive whole in time, wrapped
/// around Hummingbird's own (plain HTTP/1, or HTTP/1 with the WebSocket upgrade).
///
/// Two deadlines, so that a client sending slowly cannot hold a connection:
/// - the head: a connection's first request head within `headTimeout` of
///   connecting, and every later head within `headTimeout` of its first byte.
///   The watcher sits on the raw bytes, in front of the HTTP decoder, so it
///   holds before any request exists, and before a WebSocket upgrade is
///   decided (the router adds its HTTP handlers only then);
/// - the body: within the body timeout of its head (`RequestBodyDeadlineHandler`,
///   which `ServerLimits.http1Configuration` puts behind the decoder and which
///   tells the watcher when a head is decoded and when a request ends).
///
/// Between requests the HTTP idle timeout applies; an upgraded WebSocket
/// connection has its own pings instead.
public struct RequestDeadlineChannel<Base: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Base.Value

    let base: Base
    let limits: ServerLimits

    /// `limits`: the head deadline, and the header limits a refusal names.
    public init(_ base: Base, limits: ServerLimits) {
        self.base = base
        self.limits = limits
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                RequestHeadDeadlineHandler(timeout: limits.requestHeadTimeout, limits: limits, logger: logger), position: .first)
        }.flatMap { base.setup(channel: channel, logger: logger) }.flatMapThrowing { value in
            try channel.pipeline.syncOperations.addHandler(MalformedHeadHandler(), position: .last)
            return value
        }
    }

    public func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
        // A connection whose upgrade never resolved (a head the decoder refused
        // while the upgrade handler waited) ends here: it must not stay open.
        value.channel.close(promise: nil)
    }
}

/// Closes the connection unless each request head is decoded in time: the
/// first within the timeout of the connection's start, later ones within the
/// timeout of their first byte. `RequestBodyDeadlineHandler`, behind the
/// decoder, says when a head has been decoded and when a request has ended.
///
/// A connection upgraded to WebSocket never says so: its head goes to the
/// upgrade handler, which then removes the HTTP decoder. When the timer fires
/// on a connection without that decoder, it is left alone.
final class RequestHeadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        /// A head is due; the timer runs.
        case awaitingHead
        /// The head is decoded; its body (or, upgraded, a WebSocket) follows.
        case inRequest
        /// The last request ended; the next byte that is not part of an empty
        /// line (which HTTP allows between requests) starts the next head.
        case betweenRequests
    }

    private let timeout: TimeAmount
    private let limits: ServerLimits
    private let logger: Logger
    private var state = State.awaitingHead
    private var timer: Scheduled<Void>?
    /// This handler's place, next to the socket: where a raw answer is written.
    private var context: ChannelHandlerContext?
    private var refused = false

    init(timeout: TimeAmount, limits: ServerLimits, logger: Logger) {
        self.timeout = timeout
        self.limits = limits
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { arm(context) }
    }

    /// A head the decoder refused (too large, too many fields, not HTTP):
    /// 400 and close, written as bytes in front of the HTTP encoder, with the
    /// body every other refusal has (`{"code","message"}`). The WebSocket
    /// upgrade pipeline leaves decoder errors unanswered.
    func refuseMalformedHead(_ error: any Error) {
        guard let context, !refused else { return }
        refused = true
        cancelTimer()
        logger.debug("refusing a malformed request head", metadata: ["error": "\(error)"])
        let message = (error as? HTTPParserError) == .headerOverflow
            ? "the request's header lines are over the limit (\(limits.maxHeaderBytes) bytes, \(limits.maxHeaderFields) lines)"
            : "not an HTTP/1.1 request head (\(error))"
        struct Refusal: Encodable { var code = 400; var message: String }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(Refusal(message: message))).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let text = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: text))).whenComplete { _ in
            context.close(promise: nil)
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if state == .betweenRequests,
           unwrapInboundIn(data).readableBytesView.contains(where: { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }) {
            state = .awaitingHead
            arm(context)
        }
        context.fireChannelRead(data)
    }

    /// The decoder behind has handed on a request head.
    func headDecoded() {
        cancelTimer()
        state = .inRequest
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
        guard timer == nil, state == .awaitingHead else { return }
        let timeout = self.timeout
        let logger = self.logger
        let remote = context.channel.remoteAddress.map { "\($0)" } ?? "?"
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) {
            // Upgraded to WebSocket: no HTTP decoder any more, and no head to wait for.
            let decoder = try? channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            guard decoder != nil else { return }
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
            headWatcher(context)?.headDecoded()
            timer?.cancel()
            let timeout = self.timeout
            let logger = self.logger
            // The path without its query: a token there (`?token=`) must not reach the log.
            let path = (head.path ?? "").split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
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

/// At the end of the pipeline: a request head the HTTP decoder refused is
/// answered 400 by the head watcher, unless the decoder is gone (upgraded
/// to WebSocket, where such errors are not HTTP's).
final class MalformedHeadHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError,
           let watcher = try? context.pipeline.syncOperations.handler(type: RequestHeadDeadlineHandler.self) {
            watcher.refuseMalformedHead(error)
        }
        context.fireErrorCaught(error)
    }
}
