import HummingbirdCore
import Logging
import NIOCore

/// A server channel whose connections must deliver their first request head
/// within `timeout`, wrapped around Hummingbird's own (plain HTTP/1, or HTTP/1
/// with the WebSocket upgrade).
///
/// The deadline is watched on the raw bytes, in front of the HTTP decoder, so
/// it holds before any request exists (and before a WebSocket upgrade is
/// decided). Once the head is complete the watcher leaves the pipeline.
public struct RequestHeadDeadlineChannel<Base: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Base.Value

    let base: Base
    let timeout: TimeAmount

    public init(_ base: Base, timeout: TimeAmount) {
        self.base = base
        self.timeout = timeout
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                RequestHeadDeadlineHandler(timeout: timeout, logger: logger), position: .first)
        }.flatMap { base.setup(channel: channel, logger: logger) }
    }

    public func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Closes the connection unless the bytes so far hold a whole request head
/// (the empty line that ends the header lines: CRLF CRLF, or LF LF) within the
/// timeout of the connection's start.
final class RequestHeadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    private let logger: Logger
    private var timer: Scheduled<Void>?
    /// The bytes since the last line feed were only carriage returns: the next LF ends an empty line.
    private var atLineStart = false
    private var headComplete = false

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
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !headComplete {
            for byte in unwrapInboundIn(data).readableBytesView {
                switch byte {
                case UInt8(ascii: "\n"):
                    if atLineStart { headComplete = true }
                    atLineStart = true
                case UInt8(ascii: "\r"):
                    continue
                default:
                    atLineStart = false
                }
                if headComplete { break }
            }
        }
        context.fireChannelRead(data)
        if headComplete {
            timer?.cancel()
            timer = nil
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, !headComplete else { return }
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
