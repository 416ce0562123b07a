import ICE
import Logging
import MediaTypes
import Networking
import RTP
import SDP
import SecureTransport
#if canImport(Glibc)
import Glibc
#endif

/// Why a connection did not come up, or went away.
public enum ConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    case noUsableInterface
    case socket(String)
    case iceFailed
    case dtls(DTLSError)
    case srtp(String)
    case timedOut(seconds: Double)
    case consentLost
    case peerClosed

    public var description: String {
        switch self {
        case .noUsableInterface: "no usable network interface for ICE host candidates"
        case .socket(let r): "UDP socket: \(r)"
        case .iceFailed: "ICE failed: no candidate pair answered connectivity checks"
        case .dtls(let e): e.description
        case .srtp(let r): "SRTP: \(r)"
        case .timedOut(let s): "the WebRTC connection did not come up within \(Int(s)) s"
        case .consentLost: "the peer stopped answering (ICE consent freshness expired)"
        case .peerClosed: "the peer closed the connection"
        }
    }
}

/// Where a receiving connection (the router's end of a publisher's WHIP
/// session) hands each RTP packet, decrypted, on the transport thread.
/// `feedback` is sent back to the publisher at once (PLI, REMB): the
/// transport keeps the array and empties it, so nothing is allocated per packet.
package protocol ReceivedRTPSink: AnyObject, Sendable {
    func receive(rtp packet: ArraySlice<UInt8>, now: Double, feedback: inout [RTCPPacket])
    /// The periodic receiver reports (about once a second): a sender that
    /// hears nothing back takes the connection for dead.
    func receiverReports() -> [RTCPPacket]
    /// The sender's RTCP (sender reports for A/V sync and round-trip time).
    func receive(rtcp packets: [RTCPPacket], now: Double)
}

extension ReceivedRTPSink {
    package func receive(rtcp packets: [RTCPPacket], now: Double) {}
}

/// One WebRTC connection of the publisher: UDP sockets on every usable
/// interface, the ICE agent, DTLS-SRTP, and the loop that paces RTP out and
/// reads RTCP in. Towards a WHIP server it is the offerer and a full,
/// controlling ICE agent; towards a viewer (WHEP) it is the answerer and
/// ICE-lite. It runs on one thread of its own, waiting in poll() on
/// its sockets and a wake-up event, with every timer (ICE, DTLS
/// retransmission, pacer, RTCP) folded into the poll timeout.
package final class PeerTransport: @unchecked Sendable {   // `run` state belongs to the transport thread
    package enum Phase: Sendable, Equatable {
        case checking, securing, connected
        case failed(ConnectionError)
        case closed
    }

    package struct Remote: Sendable {
        var ufrag: String
        var password: String
        var isLite: Bool
        var fingerprint: String
        /// The answer's a=setup: "active" makes us the DTLS server.
        var setup: String
        var candidates: [(ip: String, port: UInt16, priority: UInt32, type: String, foundation: String)]

        package init(ufrag: String, password: String, isLite: Bool, fingerprint: String, setup: String,
                     candidates: [(ip: String, port: UInt16, priority: UInt32, type: String, foundation: String)]) {
            self.ufrag = ufrag
            self.password = password
            self.isLite = isLite
            self.fingerprint = fingerprint
            self.setup = setup
            self.candidates = candidates
        }
    }

    package let iceUfrag: String
    package let icePassword: String
    private(set) var localCandidates: [ICELocalCandidate] = []
    package let cname: String

    private let logger: Logger
    private let certificate: DTLSCertificate
    private let media: MediaSenders
    private let sockets: [UDPSocket]
    private let agent: ICEAgent
    /// Stops the transport thread; its event also wakes it when packets are queued.
    private let signal = StopSignal()
    private let onPhase: @Sendable (Phase) -> Void
    private let connectTimeout: Double
    /// WHIP: a session whose consent checks go unanswered for a while is
    /// re-established at once. A viewer is only dropped when consent expires.
    private let failWhenDisconnected: Bool
    private let control = PThreadLocked<(thread: StoppableThread?, phase: Phase, selected: String?)>((nil, .checking, nil))
    /// Set on the router's receiving connections; nil on a sender's, which drops RTP.
    private let receiver: (any ReceivedRTPSink)?
    /// The outbound SRTP and the selected pair, shared with the threads that
    /// queue packets (they send through it without waking this one).
    private let sendPath: SecuredSendPath

    // Transport-thread state.
    private var dtls: DTLSTransport?
    private var inbound: SRTPSession?
    /// The pair `sendPath` sends on, as last given to it (`ICEAgent.selectedPairNumber`).
    private var routedPair: Int?
    private var rtcpBuffer: [UInt8] = []
    private var rtpBuffer: [UInt8] = []
    private var feedback: [RTCPPacket] = []
    private var nextRTCP = 0.0

    /// `lite`: the answering side of a viewer's offer (ICE-lite, controlled),
    /// given up when the viewer's consent checks stop for `consentTimeout` s.
    /// `receiver`: the connection receives RTP and hands it there.
    init(certificate: DTLSCertificate, media: MediaSenders, includeLoopback: Bool, stunServer: TransportAddress?,
         connectTimeout: Double = 30, lite: Bool = false, consentTimeout: Double = 30,
         receiver: (any ReceivedRTPSink)? = nil, logger: Logger,
         onPhase: @escaping @Sendable (Phase) -> Void) throws(ConnectionError) {
        self.certificate = certificate
        self.receiver = receiver
        self.media = media
        self.logger = logger
        self.onPhase = onPhase
        self.connectTimeout = connectTimeout
        sendPath = SecuredSendPath(logger: logger)
        cname = "camagent-\(UInt32.random(in: 0...UInt32.max))"
        let credentials = ICEAgent.randomCredentials()
        iceUfrag = credentials.ufrag
        icePassword = credentials.password
        if lite {
            agent = ICEAgent(role: .controlled, localUfrag: iceUfrag, localPassword: icePassword, lite: true, logger: logger)
            agent.timing.consentTimeout = consentTimeout
            agent.timing.disconnectedAfter = min(agent.timing.disconnectedAfter, consentTimeout / 2)
        } else {
            agent = ICEAgent(role: .controlling, localUfrag: iceUfrag, localPassword: icePassword, nomination: .regular,
                             logger: logger)
            agent.timing.disconnectedAfter = 8
        }
        failWhenDisconnected = !lite
        var addresses = HostInterfaces.addresses(includeLoopback: includeLoopback)
        if addresses.isEmpty { addresses = HostInterfaces.addresses(includeLoopback: true) }
        guard !addresses.isEmpty else { throw .noUsableInterface }
        var opened: [UDPSocket] = []
        for (index, address) in addresses.enumerated() {
            do {
                let socket = try UDPSocket(bindingTo: address.ip)
                agent.addHostCandidate(socket: opened.count, address: socket.local,
                                       localPreference: UInt32(65535 - index))
                opened.append(socket)
            } catch {
                logger.debug("no ICE candidate on \(address.interface) \(address.ip): \(error)")
            }
        }
        guard !opened.isEmpty else { throw .socket("could not bind a UDP socket on any interface") }
        sockets = opened
        if let stunServer, !lite {
            for index in sockets.indices where sockets[index].local.ip.contains(".") == stunServer.ip.contains(".") {
                agent.gatherServerReflexive(socket: index, stunServer: stunServer, now: Self.now())
            }
            // The offer (WHIP, WHEP: no trickle) carries every candidate there will be, so the
            // STUN server's answer must be in before it is written, not after the exchange.
            awaitGathering(seconds: Self.gatheringWait)
        }
        localCandidates = agent.localCandidates
        rtcpBuffer.reserveCapacity(1500)
        if receiver != nil {
            rtpBuffer.reserveCapacity(2048)
            feedback.reserveCapacity(4)
        }
    }

    /// A receive-only connection as a WHEP client (a subscriber): the
    /// offerer, a full controlling ICE agent, sending nothing but RTCP.
    package convenience init(receivingInto receiver: any ReceivedRTPSink, certificate: DTLSCertificate,
                             includeLoopback: Bool, stunServer: TransportAddress?, connectTimeout: Double,
                             logger: Logger, onPhase: @escaping @Sendable (Phase) -> Void) throws(ConnectionError) {
        let media = MediaHub(videoBitrateCeiling: 1).makeSenders([])
        try self.init(certificate: certificate, media: media, includeLoopback: includeLoopback, stunServer: stunServer,
                      connectTimeout: connectTimeout, receiver: receiver, logger: logger, onPhase: onPhase)
    }

    deinit {
        for socket in sockets { socket.close() }
    }

    /// The local candidates as SDP lines carry them.
    package var sdpCandidates: [ICECandidate] {
        localCandidates.map { c in
            ICECandidate(foundation: c.foundation, priority: c.priority, address: c.ip, port: Int(c.port), type: c.type,
                         relatedAddress: c.relatedAddress?.ip, relatedPort: c.relatedAddress.map { Int($0.port) })
        }
    }

    /// The candidates of a peer's SDP this transport can use: UDP, RTP component.
    package static func usable(_ candidates: [ICECandidate]) -> [(ip: String, port: UInt16, priority: UInt32, type: String, foundation: String)] {
        candidates.filter { $0.transport == "udp" && $0.component == 1 }.compactMap { c in
            guard let port = UInt16(exactly: c.port) else { return nil }
            return (c.address, port, c.priority, c.type, c.foundation)
        }
    }

    /// Where the connection is.
    package var phase: Phase { control.withLock { $0.phase } }
    /// "local ip:port -> remote ip:port" once ICE chose a pair.
    package var selectedPair: String? { control.withLock { $0.selected } }

    /// Starts checks towards the answer's candidates, on the transport thread.
    package func start(remote: Remote) {
        agent.setRemoteCredentials(ufrag: remote.ufrag, password: remote.password, isLite: remote.isLite)
        for c in remote.candidates {
            agent.addRemoteCandidate(ip: c.ip, port: c.port, priority: c.priority, type: c.type, foundation: c.foundation)
        }
        let role: DTLSTransport.Role = remote.setup == "passive" ? .client : .server
        do {
            dtls = try DTLSTransport(certificate: certificate, role: role, remoteFingerprint: remote.fingerprint)
        } catch {
            setPhase(.failed(.dtls(error)))
            return
        }
        media.setWake(signal.event)
        let thread = StoppableThread(name: "camagent-rtc", signal: signal) { [self] signal in run(signal) }
        control.withLock { $0.thread = thread }
    }

    /// Stops the loop (sending RTCP BYE first when connected) and waits for it.
    package func stop() {
        let thread: StoppableThread? = control.withLock { c in
            defer { c.thread = nil }
            return c.thread
        }
        if let thread { thread.stop() } else { signal.requestStop() }
        closeSendPath()
        media.setWake(nil)
        agent.close()
    }

    static func now() -> Double { MonotonicTimestamp.now().seconds }

    private func setPhase(_ phase: Phase) {
        let changed = control.withLock { c -> Bool in
            guard c.phase != phase else { return false }
            if case .failed = c.phase { return false }   // the first failure is the one reported
            if c.phase == .closed { return false }
            c.phase = phase
            return true
        }
        if changed { onPhase(phase) }
    }

    // MARK: The transport thread

    private func run(_ signal: StopSignal) {
        let received = DatagramBatch()
        var fds = sockets.map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        fds.append(pollfd(fd: signal.event.fd, events: Int16(POLLIN), revents: 0))
        let started = Self.now()
        agent.start(now: started)
        flushICE()
        while !signal.isStopRequested {
            var now = Self.now()
            var deadline = now + 0.25
            if let d = agent.nextDeadline { deadline = min(deadline, d) }
            if phase == .securing, let r = dtls?.retransmitDelay { deadline = min(deadline, now + r) }
            if phase == .connected {
                if let d = media.pacerDeadline(now: now) { deadline = min(deadline, d) }
                deadline = min(deadline, nextRTCP)
            }
            let timeout = Int32(max(0, ((deadline - now) * 1000).rounded(.up)))
            _ = poll(&fds, nfds_t(fds.count), timeout)
            if fds[fds.count - 1].revents != 0 { signal.event.drain() }
            now = Self.now()
            for index in sockets.indices where fds[index].revents & Int16(POLLIN) != 0 {
                drain(socket: index, into: received, now: now)
            }
            agent.tick(now: now)
            flushICE()
            advance(now: now, started: started)
            if phase == .connected {
                followSelectedPair()
                sendPaced(now: now)
                if now >= nextRTCP {
                    if let receiver {
                        let reports = receiver.receiverReports()
                        if !reports.isEmpty { sendRTCP(reports) }
                    } else {
                        sendSenderReports()
                    }
                    nextRTCP = now + Double.random(in: 0.5...1.5)   // RFC 3550 randomised interval around 1 s
                }
            }
        }
        if phase == .connected { sendBye() }
        setPhase(.closed)
    }

    private func advance(now: Double, started: Double) {
        switch (phase, agent.state) {
        case (.checking, .connected):
            if let selected = agent.selected {
                let local = sockets[selected.socket].local
                control.withLock { $0.selected = "\(local) -> \(selected.remote)" }
                logger.info("ICE connected: \(local) -> \(selected.remote)")
            }
            setPhase(.securing)
            guard let dtls else { return }
            do { send(try dtls.start()) } catch { setPhase(.failed(.dtls(error))) }
        case (.checking, .failed), (.securing, .failed):
            setPhase(.failed(.iceFailed))
        case (.connected, .failed), (.connected, .closed):
            setPhase(.failed(.consentLost))
        case (.connected, .disconnected) where failWhenDisconnected:
            // Nothing from the peer for a while: no consent answered, no
            // media, no reports. A WHIP publisher (or a subscriber) gains nothing
            // by waiting the full 30 s for consent to expire: the session is
            // treated as gone and re-established.
            setPhase(.failed(.consentLost))
        case (.securing, _):
            if let dtls, let delay = dtls.retransmitDelay, delay <= 0 { send(dtls.retransmit()) }
        default:
            break
        }
        if phase == .checking || phase == .securing, now - started > connectTimeout {
            setPhase(.failed(.timedOut(seconds: connectTimeout)))
        }
    }

    /// Handles every datagram pending on socket `index`, a batch at a time.
    private func drain(socket index: Int, into batch: DatagramBatch, now: Double) {
        while true {
            let count: Int
            do { count = try sockets[index].receive(into: batch) } catch {
                logger.debug("receive on \(sockets[index].local): \(error)")
                return
            }
            for position in 0..<count {
                guard let from = batch.sender(position) else { continue }   // not IPv4/IPv6: cannot happen
                handle(batch.datagram(position), from: from, socket: index, now: now)
            }
            if count < batch.capacity { return }   // nothing was left
        }
    }

    private func handle(_ datagram: UnsafeRawBufferPointer, from: TransportAddress, socket index: Int, now: Double) {
        if agent.receive(datagram, from: from, socket: index, now: now) { return }
        guard let first = datagram.first else { return }
        switch first {
        case 20...63:
            // Only from the peer's own addresses: a forged alert or record ended the connection.
            guard agent.isKnownRemote(from) else {
                logger.debug("DTLS from \(from), not a peer's address: dropped")
                return
            }
            handleDTLS(datagram)
        case 128...191 where datagram.count >= 2 && (192...223).contains(datagram[1]): handleRTCP(datagram, now: now)
        case 128...191 where receiver != nil: handleRTP(datagram, now: now)
        default: break   // RTP towards a send-only publisher, or noise
        }
    }

    private func handleDTLS(_ datagram: UnsafeRawBufferPointer) {
        guard let dtls else { return }
        if phase == .connected {
            // After the handshake an alert ends the connection (close_notify or
            // fatal); anything else is the peer's last flight again, sent because
            // ours was lost, which OpenSSL answers by resending ours.
            if datagram.first == 21 {
                setPhase(.failed(.peerClosed))
            } else {
                do { send(try dtls.receive(Array(datagram))) } catch {
                    logger.debug("DTLS record after the handshake: \(error)")
                }
            }
            return
        }
        do {
            send(try dtls.receive(Array(datagram)))
        } catch {
            setPhase(.failed(.dtls(error)))
            return
        }
        guard dtls.state == .connected, let profile = dtls.srtpProfile, let keys = dtls.srtpKeys,
              let selected = agent.selected else { return }
        do {
            let outbound = try SRTPSession(profile: profile, key: keys.localKey, salt: keys.localSalt, direction: .outbound)
            inbound = try SRTPSession(profile: profile, key: keys.remoteKey, salt: keys.remoteSalt, direction: .inbound)
            sendPath.open(srtp: outbound, socket: sockets[selected.socket], remote: selected.remote)
            routedPair = agent.selectedPairNumber
        } catch {
            setPhase(.failed(.srtp("\(error)")))
            return
        }
        media.setOutlet(sendPath)
        logger.info("DTLS connected (\(dtls.role == .client ? "client" : "server")), SRTP \(profile)")
        // Its first keyframe is asked for when its owner starts sending (`MediaSenders.setSending`),
        // of the layer it will receive: not here, of every layer.
        nextRTCP = Self.now() + 0.2
        setPhase(.connected)
    }

    private func handleRTCP(_ datagram: UnsafeRawBufferPointer, now: Double) {
        guard let inbound else { return }
        rtcpBuffer.removeAll(keepingCapacity: true)
        rtcpBuffer.append(contentsOf: datagram)
        do { try inbound.unprotectRTCP(&rtcpBuffer) } catch {
            logger.debug("RTCP dropped: \(error)")
            return
        }
        // A receive-only viewer's authenticated reports prove it is there, as a
        // publisher's media does: its consent checks alone come only every 4-6 s
        // (aioice), which a short --viewer-timeout could mistake for a departure.
        agent.peerProvedAlive(now: now)
        guard let packets = try? RTCPPacket.parseCompound(rtcpBuffer[...]) else { return }
        receiver?.receive(rtcp: packets, now: Self.now())
        let now = NTPTime.compact(NTPTime.now())
        if media.handle(packets, arrivedAtCompactNTP: now) { setPhase(.failed(.peerClosed)) }
    }

    /// A publisher's packet into the router: decrypted in place and handed
    /// to the receiver, whose feedback (keyframe requests, REMB) goes back at once.
    private func handleRTP(_ datagram: UnsafeRawBufferPointer, now: Double) {
        guard let inbound, let receiver else { return }
        rtpBuffer.removeAll(keepingCapacity: true)
        rtpBuffer.append(contentsOf: datagram)
        do { try inbound.unprotectRTP(&rtpBuffer) } catch {
            logger.debug("RTP dropped: \(error)")
            return
        }
        agent.peerProvedAlive(now: now)   // authenticated media: the publisher is there
        feedback.removeAll(keepingCapacity: true)
        receiver.receive(rtp: rtpBuffer[...], now: now, feedback: &feedback)
        if !feedback.isEmpty { sendRTCP(feedback) }
    }

    /// Sends what the pacer lets out now (what the queueing thread left: the
    /// pacer held it back).
    private func sendPaced(now: Double) {
        sendPath.sendDue(from: media, now: now)
    }

    /// Keeps the send path on the pair ICE selected: a controlling peer may
    /// nominate another, and when consent is lost there is none.
    private func followSelectedPair() {
        let number = agent.selectedPairNumber
        if number == routedPair { return }
        routedPair = number
        if let selected = agent.selected {
            sendPath.move(socket: sockets[selected.socket], remote: selected.remote)
        } else {
            closeSendPath()
        }
    }

    /// No thread sends through this transport any more.
    private func closeSendPath() {
        media.removeOutlet(sendPath)
        sendPath.close()
    }

    private func sendSenderReports() {
        let now = MonotonicTimestamp.now()
        let ntp = NTPTime.now()
        let packets = media.senderReports(at: now, ntp: ntp)
        guard case .senderReport(let first)? = packets.first else { return }
        sendRTCP(packets + [.sourceDescription(ssrc: first.ssrc, cname: cname)])
    }

    private func sendBye() {
        let ssrcs = media.allSSRCs
        guard let first = ssrcs.first else { return }
        sendRTCP([.receiverReport(ssrc: first, reports: []), .bye(ssrcs: ssrcs)])
    }

    private func sendRTCP(_ packets: [RTCPPacket]) {
        sendPath.sendRTCP(packets)
    }

    private func send(_ datagrams: [[UInt8]]) {
        guard let selected = agent.selected else { return }
        for datagram in datagrams {
            do { try datagram.withUnsafeBytes { try sockets[selected.socket].send($0, to: selected.remote) } } catch {
                logger.debug("DTLS datagram not sent: \(error)")
            }
        }
    }

    /// How long a STUN server may take to answer before the offer is made without it
    /// (the agent's own retransmissions would give up only after about 8 s).
    static let gatheringWait = 3.0

    /// Runs the STUN server's transactions (sends, retransmissions, answers) on the
    /// caller's thread until they are done or `seconds` have passed. Before the offer no
    /// peer knows these sockets, so any datagram that is not STUN is noise and dropped.
    private func awaitGathering(seconds: Double) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { buffer.deallocate() }
        var fds = sockets.map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        let giveUp = Self.now() + seconds
        flushICE()
        while agent.isGathering {
            var now = Self.now()
            guard now < giveUp else {
                logger.info("ICE: the STUN server did not answer within \(seconds) s; offering without a server-reflexive candidate")
                return
            }
            let deadline = min(giveUp, agent.nextDeadline ?? giveUp)
            _ = poll(&fds, nfds_t(fds.count), Int32(max(0, ((deadline - now) * 1000).rounded(.up))))
            now = Self.now()
            for index in sockets.indices where fds[index].revents & Int16(POLLIN) != 0 {
                while true {
                    let received: (count: Int, from: TransportAddress)?
                    do { received = try sockets[index].receive(into: buffer) } catch { break }
                    guard let (count, from) = received else { break }
                    _ = agent.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), from: from, socket: index, now: now)
                }
            }
            agent.tick(now: now)
            flushICE()
        }
    }

    private func flushICE() {
        for datagram in agent.takeOutgoing() {
            do { try datagram.bytes.withUnsafeBytes { try sockets[datagram.socket].send($0, to: datagram.to) } } catch {
                logger.debug("ICE datagram not sent to \(datagram.to): \(error)")
            }
        }
    }
}
