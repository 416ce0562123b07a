import NIOCore
import NIOHTTP1
import NIOWebSocket
import Synchronization

/// Tells a client that closed its signalling WebSocket (a close frame: it
/// left) from one whose connection broke (the socket ended without one: a
/// network drop, a killed process). hummingbird-websocket ends the inbound
/// messages the same way for both, so this handler, right after the frame
/// decoder, notes the close frame as it passes.
final class CloseFrameWatcher: ChannelInboundHandler, Sendable {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let sawCloseFrame = Atomic<Bool>(false)
    private let installed = Atomic<Bool>(false)

    /// Whether the client said it was leaving. Without a watcher in place
    /// (it could not be put there) a socket that ended counts as closed by
    /// its client, as before the router kept connections.
    var clientClosed: Bool { sawCloseFrame.load(ordering: .relaxed) || !installed.load(ordering: .relaxed) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if unwrapInboundIn(data).opcode == .connectionClose { sawCloseFrame.store(true, ordering: .relaxed) }
        context.fireChannelRead(data)
    }

    /// A watcher for `channel`, which is about to be upgraded: it goes in
    /// after the frame decoder when the upgrade completes, before any byte
    /// that came behind the request is read as a frame.
    static func install(on channel: any Channel) async -> CloseFrameWatcher {
        let watcher = CloseFrameWatcher()
        try? await channel.pipeline.addHandler(Installer(watcher), position: .last).get()
        return watcher
    }

    /// Waits at the end of the HTTP pipeline for the upgrade, which adds
    /// the WebSocket handlers behind it and then says so with an event.
    private final class Installer: ChannelInboundHandler, RemovableChannelHandler, Sendable {
        typealias InboundIn = Never
        let watcher: CloseFrameWatcher

        init(_ watcher: CloseFrameWatcher) { self.watcher = watcher }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.fireChannelRead(data)
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is HTTPServerUpgradeEvents {
                let operations = context.pipeline.syncOperations
                if let decoder = try? operations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self),
                   (try? operations.addHandler(watcher, position: .after(decoder))) != nil {
                    watcher.installed.store(true, ordering: .relaxed)
                }
                operations.removeHandler(self, promise: nil)
            }
            context.fireUserInboundEventTriggered(event)
        }
    }
}
