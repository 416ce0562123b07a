import Logging
import MediaTypes
import Networking
import RTP
import SecureTransport

/// Where a connected transport's packets leave: the outbound SRTP session and
/// the selected candidate pair, behind one lock.
///
/// The transport thread sends RTCP and paced RTP through it. In the router
/// (`MediaHub.sendsOnQueueingThread`) the thread that queues packets, the
/// publisher's receiving connection, sends what the pacer lets out at once
/// through it too, instead of waking the transport thread for each frame:
/// with 50 subscribers, that wake-up was 4 000 thread switches a second.
final class SecuredSendPath: PacketOutlet {
    private struct Route {
        var srtp: SRTPSession
        var socket: UDPSocket
        var remote: TransportAddress
        /// RTP is copied out of the history into this buffer and encrypted in place.
        var buffer: [UInt8]
    }

    private let route = PThreadLocked<Route?>(nil)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Opens the path once SRTP is keyed, on the pair ICE selected.
    func open(srtp: SRTPSession, socket: UDPSocket, remote: TransportAddress) {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(PacketHistory.packetCapacity + SRTPSession.maximumTrailer)
        route.withLock { $0 = Route(srtp: srtp, socket: socket, remote: remote, buffer: buffer) }
    }

    /// Another pair, same keys (ICE nominated another).
    func move(socket: UDPSocket, remote: TransportAddress) {
        route.withLock { r in
            r?.socket = socket
            r?.remote = remote
        }
    }

    /// Nothing more is sent.
    func close() { route.withLock { $0 = nil } }

    /// Sends what `media`'s pacer lets out now. Each packet is copied from
    /// the history into the send buffer (SRTP encrypts in place; the history
    /// keeps the clear packet for NACKs) and leaves on the selected pair.
    func sendDue(from media: MediaSenders, now: Double) {
        route.withLock { r in
            guard let (srtp, socket, remote) = r.map({ ($0.srtp, $0.socket, $0.remote) }) else { return }
            while media.takeNextPacket(now: now, into: &r!.buffer) {
                do {
                    try srtp.protectRTP(&r!.buffer)
                    try r!.buffer.withUnsafeBytes { try socket.send($0, to: remote) }
                } catch {
                    logger.debug("RTP not sent: \(error)")
                }
            }
        }
    }

    /// Sends a compound RTCP packet (nothing when the path is not open).
    func sendRTCP(_ packets: [RTCPPacket]) {
        var compound: [UInt8] = []
        for packet in packets { packet.write(to: &compound) }
        route.withLock { r in
            guard let r else { return }
            do {
                try r.srtp.protectRTCP(&compound)
                try compound.withUnsafeBytes { try r.socket.send($0, to: r.remote) }
            } catch {
                logger.debug("RTCP not sent: \(error)")
            }
        }
    }
}
