import NIOCore
import NIOWebSocket
import Synchronization

/// Tells a client that closed its signalling WebSocket (a close frame: it
/// left) from one whose connection broke (the socket ended without one: a
/// network drop, a killed process). hummingbird-websocket ends the inbound
/// messages the same way for both, so this handler, put right after the
/// frame decoder, notes the close frame as it passes.
final class CloseFrameWatcher: ChannelInboundHandler, Sendable {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let sawCloseFrame = Atomic<Bool>(false)
    private let installed = Atomic<Bool>(false)

    /// Whether the client said it was leaving. Without a watcher in place
    /// (the channel went before it could be put there) a socket that ended
    /// counts as closed by its client, as before the router kept connections.
    var clientClosed: Bool { sawCloseFrame.load(ordering: .relaxed) || !installed.load(ordering: .relaxed) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if unwrapInboundIn(data).opcode == .connectionClose { sawCloseFrame.store(true, ordering: .relaxed) }
        context.fireChannelRead(data)
    }

    /// A watcher on `channel`, after its WebSocket frame decoder.
    static func install(on channel: any Channel) async -> CloseFrameWatcher {
        let watcher = CloseFrameWatcher()
        do {
            try await channel.eventLoop.submit {
                let operations = channel.pipeline.syncOperations
                let decoder = try operations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
                try operations.addHandler(watcher, position: .after(decoder))
            }.get()
            watcher.installed.store(true, ordering: .relaxed)
        } catch {
            // The channel closed first: nothing more will come through it.
        }
        return watcher
    }
}
