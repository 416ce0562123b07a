import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers a request head carrying `Expect: 100-continue` with the interim
/// `100 Continue` (RFC 9110 § 10.1.1). A client that asks so (curl before a
/// large body, or when given the header) otherwise waits out a timeout of
/// its own (curl's: 1 s) before sending the body. The final answer follows
/// as usual, a refusal included. A body declared over `maxBodyBytes` gets
/// no 100: the server refuses it (413) from its head, without the body.
final class ExpectContinueHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private let maxBodyBytes: Int?

    init(maxBodyBytes: Int?) { self.maxBodyBytes = maxBodyBytes }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data),
           head.headerFields[.expect]?.lowercased() == "100-continue" {
            let declared = head.headerFields[.contentLength].flatMap { Int($0) }
            if let maxBodyBytes, let declared, declared > maxBodyBytes {
                // No 100: the refusal comes from the head alone.
            } else {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
        }
        context.fireChannelRead(data)
    }
}
