import Logging
import Networking

/// A sans-IO ICE agent (RFC 8445) for one data stream with one component, UDP only,
/// with consent freshness (RFC 7675). It performs no I/O and reads no clock: the caller
/// hands it every datagram that arrived on its sockets (`receive`), runs `tick` at
/// `nextDeadline`, and sends what `takeOutgoing` returns. Times are monotonic seconds
/// of any origin.
///
/// Simplifications allowed by a single stream and component: all pairs start Waiting
/// (no frozen state between foundations), a pair's check in progress is not restarted
/// by a triggered check, server-reflexive candidates are signalled but never paired
/// (their base, the host candidate, already is), and a peer-reflexive local candidate
/// learned from XOR-MAPPED-ADDRESS is only logged (the pair sends from the same socket).
///
/// After anything that can change the schedule (`start`, `receive`, `tick`, adding candidates
/// or credentials), send `takeOutgoing()` and read `nextDeadline` again.
///
/// Not thread-safe: one thread drives it.
public final class ICEAgent {
    public enum Role: Sendable { case controlling, controlled }
    public enum Nomination: Sendable { case aggressive, regular }
    public enum State: Sendable, Equatable { case new, checking, connected, disconnected, failed, closed }

    /// A datagram to send: `socket` is the index the caller gave for that local socket.
    public struct Datagram: Sendable, Equatable {
        public var socket: Int
        public var to: TransportAddress
        public var bytes: [UInt8]

        public init(socket: Int, to: TransportAddress, bytes: [UInt8]) {
            self.socket = socket
            self.to = to
            self.bytes = bytes
        }
    }

    /// The agent's timers, in seconds. The defaults follow RFC 8445 and RFC 7675.
    public struct Timing: Sendable {
        /// Pacing: one new check per Ta.
        public var ta: Double = 0.05
        /// First retransmission timeout; it doubles up to `maxRTO`.
        public var initialRTO: Double = 0.25
        public var maxRTO: Double = 1.6
        /// Transmissions of one request before its transaction fails (about 8 s in all).
        public var maxTransmissions: Int = 7
        /// Without a selected pair this long after `start`, the agent fails.
        public var checkingTimeout: Double = 20
        /// Regular nomination waits at most this long after the first valid pair for better ones.
        public var nominationWait: Double = 0.5
        /// Consent requests go out at a random interval in this range (RFC 7675 §5.1: 5 s ± 20 %).
        public var consentInterval: ClosedRange<Double> = 4...6
        /// With nothing heard from the peer for this long (no consent confirmed, no
        /// authenticated media: see `peerProvedAlive`) the agent reports `disconnected`...
        public var disconnectedAfter: Double = 12
        /// ...and for this long, `failed` (RFC 7675: 30 s).
        public var consentTimeout: Double = 30

        public init() {}
    }

    // MARK: Configuration

    public private(set) var role: Role
    public let nomination: Nomination
    /// An ICE-lite agent (RFC 8445 §2.5): always controlled, host candidates only; it answers
    /// checks and selects the pair the controlling peer nominates, and never sends a check.
    public let lite: Bool
    public let localUfrag: String
    public let localPassword: String
    /// May be changed before `start`.
    public var timing = Timing()

    private var logger: Logger
    private let tieBreaker: UInt64
    private var remoteUfrag: String?
    private var remotePassword: [UInt8]?
    private var remoteIsLite = false

    // MARK: Candidates, pairs, transactions

    public private(set) var localCandidates: [ICELocalCandidate] = []
    public private(set) var remoteCandidates: [ICERemoteCandidate] = []
    private var foundations: [String: String] = [:]
    private var pairs: [Pair] = []
    private var triggered: [Int] = []
    private var transactions: [[UInt8]: Transaction] = [:]
    private var outgoing: [Datagram] = []
    private var pendingGathers = 0

    // MARK: Progress

    public private(set) var state: State = .new
    private var startTime: Double?
    private var nextCheckTime = 0.0
    private var firstValidTime: Double?
    private var nominatingPair: Int?
    /// Set once regular nomination stopped waiting for better pairs (so the wait is no deadline any more).
    private var nominationWaitOver = false
    private var selectedPair: Int?
    /// Once a pair is selected, no more ordinary checks are started.
    private var concluded = false
    private var nextConsentTime = 0.0
    /// When consent on the selected pair was last confirmed (an authenticated response;
    /// for a lite agent, an authenticated check from the peer). Nil until connected.
    public private(set) var lastConsent: Double?
    /// When a full agent last had authenticated media or reports from the peer (`peerProvedAlive`).
    private var lastMedia: Double?
    /// When the peer was last heard on the selected pair: consent confirmed, or authenticated
    /// media or reports. It decides `disconnected`; consent alone decides `failed` (RFC 7675).
    /// Nil until connected.
    public var lastHeard: Double? { lastConsent.map { max($0, lastMedia ?? $0) } }
    /// Seconds, from the last check or consent transaction answered without a retransmission.
    public private(set) var roundTripTime: Double?

    struct Pair {
        var socket: Int
        var local: TransportAddress
        var localPreference: UInt32
        var localPriority: UInt32
        var remote: TransportAddress
        var remotePriority: UInt32
        var priority: UInt64 = 0
        var state: ICECandidatePairInfo.State
        var nominated = false
        /// Controlled: USE-CANDIDATE arrived before our own check on this pair succeeded.
        var nominateOnSuccess = false
        var transaction: [UInt8]?
    }

    enum Purpose {
        case check(pair: Int, useCandidate: Bool, role: Role)
        case consent(pair: Int)
        case gather(socket: Int)
    }

    struct Transaction {
        var purpose: Purpose
        var socket: Int
        var to: TransportAddress
        var bytes: [UInt8]
        var lastSent: Double
        var nextTime: Double
        var rto: Double
        var transmissions: Int
    }

    public init(role: Role, localUfrag: String, localPassword: String, nomination: Nomination = .regular,
                lite: Bool = false, logger: Logger) {
        self.role = lite ? .controlled : role
        self.localUfrag = localUfrag
        self.localPassword = localPassword
        self.nomination = nomination
        self.lite = lite
        var logger = logger
        logger[metadataKey: "ice.ufrag"] = "\(localUfrag)"
        self.logger = logger
        var rng = SystemRandomNumberGenerator()
        tieBreaker = rng.next()
    }

    /// Fresh credentials from the system CSPRNG: an 8-character ufrag and a 24-character
    /// password, both from the ice-char set (ALPHA / DIGIT / "+" / "/").
    public static func randomCredentials() -> (ufrag: String, password: String) {
        let chars = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var rng = SystemRandomNumberGenerator()
        func word(_ n: Int) -> String { String((0..<n).map { _ in chars.randomElement(using: &rng)! }) }
        return (word(8), word(24))
    }

    // MARK: Candidates

    /// A host candidate: `address` is what `socket` is bound to (numeric, not a wildcard).
    /// `localPreference` (0...65535) ranks it among ours, higher first.
    public func addHostCandidate(socket: Int, address: TransportAddress, localPreference: UInt32) {
        guard let address = address.canonical else {
            logger.warning("ICE: host candidate \(address) is not a numeric address; ignored")
            return
        }
        guard !localCandidates.contains(where: { $0.type == "host" && $0.address == address }) else { return }
        let candidate = ICELocalCandidate(
            foundation: foundation(type: "host", baseIP: address.ip), component: 1, transport: "udp",
            priority: ICELocalCandidate.priority(type: "host", localPreference: localPreference),
            ip: address.ip, port: address.port, type: "host", relatedAddress: nil, socket: socket)
        localCandidates.append(candidate)
        logger.debug("ICE: host candidate \(address) priority \(candidate.priority) on socket \(socket)")
        for remote in remoteCandidates { addPair(local: candidate, remote: remote.address, remotePriority: remote.priority) }
    }

    /// Sends a Binding request to a STUN server from `socket`; a server-reflexive candidate
    /// is added to `localCandidates` when the answer differs from the host address.
    /// Call `addHostCandidate` for that socket first.
    public func gatherServerReflexive(socket: Int, stunServer: TransportAddress, now: Double) {
        guard state != .closed && state != .failed else { return }
        guard let server = stunServer.canonical else {
            logger.warning("ICE: STUN server \(stunServer) is not a numeric address; not asked")
            return
        }
        guard let host = hostCandidate(socket: socket), host.address.isIPv6 == server.isIPv6 else {
            logger.warning("ICE: no host candidate of the STUN server's family on socket \(socket); \(server) not asked")
            return
        }
        let request = STUNMessage(.request, transactionID: STUNMessage.randomTransactionID())
        pendingGathers += 1
        logger.debug("ICE: asking STUN server \(server) for the reflexive address of \(host.address)")
        startTransaction(request.encoded(), id: request.transactionID, purpose: .gather(socket: socket),
                         socket: socket, to: server, now: now)
    }

    /// True while a STUN server has not answered yet (nor timed out).
    public var isGathering: Bool { pendingGathers > 0 }

    public func setRemoteCredentials(ufrag: String, password: String, isLite: Bool) {
        remoteUfrag = ufrag
        remotePassword = Array(password.utf8)
        remoteIsLite = isLite
        if isLite && !lite && role == .controlled {
            logger.info("ICE: the peer is ICE-lite, so this agent takes the controlling role")
            switchRole(to: .controlling)
        }
    }

    /// A candidate from the peer's SDP (UDP only: the caller drops TCP candidates).
    /// Non-numeric addresses (mDNS `.local` names) are ignored.
    public func addRemoteCandidate(ip: String, port: UInt16, priority: UInt32, type: String, foundation: String) {
        guard let address = TransportAddress(ip: ip, port: port).canonical else {
            logger.debug("ICE: remote candidate \(ip):\(port) is not a numeric address; ignored")
            return
        }
        let candidate = ICERemoteCandidate(foundation: foundation, priority: priority, address: address, type: type)
        if let i = remoteCandidates.firstIndex(where: { $0.address == address }) {
            // A signalled candidate replaces a peer-reflexive one learned earlier (RFC 8445 §7.3.1.3).
            guard remoteCandidates[i].type == "prflx" else { return }
            remoteCandidates[i] = candidate
            for p in pairs.indices where pairs[p].remote == address {
                pairs[p].remotePriority = priority
                pairs[p].priority = pairPriority(local: pairs[p].localPriority, remote: priority)
            }
            return
        }
        remoteCandidates.append(candidate)
        logger.debug("ICE: remote candidate \(address) \(type) priority \(priority)")
        if lite { return }
        for local in localCandidates where local.type == "host" {
            addPair(local: local, remote: address, remotePriority: priority)
        }
    }

    /// The check list, for stats and logs.
    public var candidatePairs: [ICECandidatePairInfo] {
        pairs.map {
            ICECandidatePairInfo(socket: $0.socket, local: $0.local, remote: $0.remote, priority: $0.priority,
                                 state: $0.state, nominated: $0.nominated)
        }
    }

    // MARK: Driving

    /// Begins connectivity checks (a lite agent only starts waiting for them).
    public func start(now: Double) {
        guard state == .new else { return }
        startTime = now
        nextCheckTime = now
        for p in pairs.indices where pairs[p].state == .frozen { pairs[p].state = .waiting }
        setState(.checking)
        if selectedPair != nil {
            // A lite agent may have been nominated by checks that arrived before it started.
            lastConsent = now
            setState(.connected)
        }
        if !lite && remotePassword == nil {
            logger.warning("ICE: started without the peer's credentials; checks wait for them")
        }
        service(now: now)
    }

    /// A datagram arrived on local socket `socket`. Returns true if it was STUN and the agent consumed it
    /// (checks answered, responses matched, peer-reflexive candidates learned); false for anything else
    /// (DTLS, RTP), which the caller handles.
    public func receive(_ bytes: UnsafeRawBufferPointer, from: TransportAddress, socket: Int, now: Double) -> Bool {
        guard bytes.count >= 20, bytes[0] < 4,
              UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7]) == STUNMessage.magicCookie
        else { return false }
        guard state != .closed && state != .failed else { return true }
        let raw = Array(bytes)
        let message: STUNMessage
        do {
            message = try STUNMessage(parsing: raw)
        } catch {
            logger.trace("ICE: dropped a STUN message from \(from): \(error)")
            return true
        }
        guard message.method == STUNMessage.bindingMethod else { return true }
        let from = from.canonical ?? from
        switch message.messageClass {
        case .request: handleRequest(message, raw: raw, from: from, socket: socket, now: now)
        case .success, .error: handleResponse(message, raw: raw, from: from, socket: socket, now: now)
        case .indication: break   // keepalive
        }
        service(now: now)
        return true
    }

    /// The peer proved alive another way: authenticated media or reports
    /// (SRTP, SRTCP) arrived on the selected pair. It keeps any agent from
    /// `disconnected`: under heavy loss a consent transaction may go
    /// unanswered for 8 s while media still flows (at 30 % loss each way: in
    /// 2 fault-link test runs of 17), and that is no reason to drop the connection.
    /// For a lite agent it counts as consent too: some full agents (libnice, in
    /// GStreamer's webrtcbin) send a lite peer no consent checks, only media.
    /// A full agent still needs its consent answered within `consentTimeout`.
    public func peerProvedAlive(now: Double) {
        guard selectedPair != nil else { return }
        if lite { lastConsent = now } else { lastMedia = now }
    }

    /// Pacing (Ta), retransmissions (RTO), nomination, consent freshness, timeouts.
    public func tick(now: Double) { service(now: now) }

    /// When `tick` should next run; nil when nothing is pending (new without gathering, failed, closed).
    public var nextDeadline: Double? {
        guard state != .closed && state != .failed else { return nil }
        var deadline = transactions.values.map(\.nextTime).min()
        func consider(_ t: Double) { deadline = min(deadline ?? t, t) }
        guard let startTime, state != .new else { return deadline }
        if !lite && remotePassword != nil && hasCheckToSend { consider(nextCheckTime) }
        if selectedPair != nil, let lastConsent, let lastHeard {
            if !lite { consider(nextConsentTime) }
            if state == .connected { consider(lastHeard + timing.disconnectedAfter) }
            consider(lastConsent + timing.consentTimeout)
        } else {
            consider(startTime + timing.checkingTimeout)
            if let firstValidTime, role == .controlling, nominatingPair == nil, !nominationWaitOver {
                consider(firstValidTime + timing.nominationWait)
            }
        }
        return deadline
    }

    /// What to send now; the agent forgets it.
    public func takeOutgoing() -> [Datagram] {
        // Called on every turn of a transport loop: nothing to send must cost
        // nothing (emptying a buffer the caller still shares would copy it).
        guard !outgoing.isEmpty else { return [] }
        defer { outgoing = [] }
        return outgoing
    }

    /// True for an address the peer is known by: one of its signalled candidates, or an
    /// address an authenticated check came from (peer-reflexive). What is not STUN may
    /// only be taken from these: DTLS carries no proof of its own before the handshake,
    /// and a one-byte alert from anywhere would otherwise end the connection.
    public func isKnownRemote(_ address: TransportAddress) -> Bool {
        remoteCandidates.contains { $0.address == address }
    }

    /// The selected pair: the local socket to send from and the peer's address.
    public var selected: (socket: Int, remote: TransportAddress)? {
        guard let p = selectedPair, state == .connected || state == .disconnected else { return nil }
        return (pairs[p].socket, pairs[p].remote)
    }

    /// Which pair `selected` is, as a number that changes when it does: a
    /// transport loop can see whether to look again without copying the address.
    public var selectedPairNumber: Int? {
        guard let p = selectedPair, state == .connected || state == .disconnected else { return nil }
        return p
    }

    /// Stops everything; nothing more is sent and STUN that arrives is ignored.
    public func close() {
        guard state != .closed else { return }
        transactions.removeAll()
        outgoing.removeAll()
        setState(.closed)
    }

    // MARK: Internals: pairs

    private func foundation(type: String, baseIP: String) -> String {
        let key = "\(type) \(baseIP)"
        if let f = foundations[key] { return f }
        let f = String(foundations.count + 1)
        foundations[key] = f
        return f
    }

    private func hostCandidate(socket: Int) -> ICELocalCandidate? {
        localCandidates.first { $0.socket == socket && $0.type == "host" }
    }

    /// RFC 8445 §6.1.2.3: 2^32·MIN(G,D) + 2·MAX(G,D) + (G>D ? 1 : 0), G the controlling side's priority.
    private func pairPriority(local: UInt32, remote: UInt32) -> UInt64 {
        let (g, d) = role == .controlling ? (UInt64(local), UInt64(remote)) : (UInt64(remote), UInt64(local))
        return (min(g, d) << 32) + 2 * max(g, d) + (g > d ? 1 : 0)
    }

    @discardableResult
    private func addPair(local: ICELocalCandidate, remote: TransportAddress, remotePriority: UInt32) -> Int? {
        guard local.address.isIPv6 == remote.isIPv6 else { return nil }
        if let existing = pairs.firstIndex(where: { $0.socket == local.socket && $0.remote == remote }) { return existing }
        var pair = Pair(socket: local.socket, local: local.address, localPreference: (local.priority >> 8) & 0xffff,
                        localPriority: local.priority, remote: remote, remotePriority: remotePriority,
                        state: startTime == nil ? .frozen : .waiting)
        pair.priority = pairPriority(local: local.priority, remote: remotePriority)
        pairs.append(pair)
        logger.debug("ICE: pair \(local.address) -> \(remote) priority \(pair.priority)")
        return pairs.count - 1
    }

    private var hasCheckToSend: Bool {
        triggered.contains { pairs[$0].state == .waiting }
            || (!concluded && pairs.contains { $0.state == .waiting })
    }

    private func switchRole(to newRole: Role) {
        guard role != newRole else { return }
        role = newRole
        logger.info("ICE: role is now \(newRole)")
        for p in pairs.indices { pairs[p].priority = pairPriority(local: pairs[p].localPriority, remote: pairs[p].remotePriority) }
        if newRole == .controlled { nominatingPair = nil }
    }

    private func setState(_ newState: State) {
        guard state != newState else { return }
        logger.info("ICE: \(state) -> \(newState)")
        state = newState
    }

    private func fail(_ reason: String, now: Double) {
        logger.info("ICE: failed: \(reason)")
        transactions.removeAll()
        triggered.removeAll()
        setState(.failed)
    }

    // MARK: Internals: sending

    private func startTransaction(_ bytes: [UInt8], id: [UInt8], purpose: Purpose, socket: Int,
                                  to: TransportAddress, now: Double) {
        outgoing.append(Datagram(socket: socket, to: to, bytes: bytes))
        transactions[id] = Transaction(purpose: purpose, socket: socket, to: to, bytes: bytes, lastSent: now,
                                       nextTime: now + timing.initialRTO, rto: timing.initialRTO, transmissions: 1)
    }

    /// A Binding request on pair `p`: USERNAME, PRIORITY, the role with our tie-breaker,
    /// USE-CANDIDATE when nominating, MESSAGE-INTEGRITY with the peer's password, FINGERPRINT.
    private func request(on p: Int, useCandidate: Bool) -> STUNMessage? {
        guard let remoteUfrag else { return nil }
        var attributes: [STUNAttribute] = [
            .username("\(remoteUfrag):\(localUfrag)"),
            .priority(ICELocalCandidate.priority(type: "prflx", localPreference: pairs[p].localPreference)),
            role == .controlling ? .iceControlling(tieBreaker: tieBreaker) : .iceControlled(tieBreaker: tieBreaker),
        ]
        if useCandidate { attributes.append(.useCandidate) }
        return STUNMessage(.request, transactionID: STUNMessage.randomTransactionID(), attributes: attributes)
    }

    private func sendCheck(_ p: Int, useCandidate: Bool, now: Double) {
        guard let remotePassword, let message = request(on: p, useCandidate: useCandidate) else { return }
        if let old = pairs[p].transaction { transactions[old] = nil }
        pairs[p].transaction = message.transactionID
        if pairs[p].state != .succeeded { pairs[p].state = .inProgress }
        logger.trace("ICE: check \(pairs[p].local) -> \(pairs[p].remote)\(useCandidate ? " with USE-CANDIDATE" : "")")
        startTransaction(message.encoded(integrityKey: remotePassword), id: message.transactionID,
                         purpose: .check(pair: p, useCandidate: useCandidate, role: role),
                         socket: pairs[p].socket, to: pairs[p].remote, now: now)
    }

    private func sendConsent(_ p: Int, now: Double) {
        guard let remotePassword, let message = request(on: p, useCandidate: false) else { return }
        startTransaction(message.encoded(integrityKey: remotePassword), id: message.transactionID,
                         purpose: .consent(pair: p), socket: pairs[p].socket, to: pairs[p].remote, now: now)
    }

    private func respond(to request: STUNMessage, from: TransportAddress, socket: Int,
                         error: (code: Int, reason: String)? = nil, authenticated: Bool) {
        let response: STUNMessage
        if let error {
            response = STUNMessage(.error, transactionID: request.transactionID,
                                   attributes: [.errorCode(code: error.code, reason: error.reason)])
        } else {
            guard let mapped = from.stunAddress else { return }
            response = STUNMessage(.success, transactionID: request.transactionID, attributes: [.xorMappedAddress(mapped)])
        }
        outgoing.append(Datagram(socket: socket, to: from,
                                 bytes: response.encoded(integrityKey: authenticated ? Array(localPassword.utf8) : nil)))
    }

    // MARK: Internals: the timers

    private func service(now: Double) {
        guard state != .closed && state != .failed else { return }
        retransmit(now: now)
        guard startTime != nil, state != .new, state != .failed else { return }
        if !lite && remotePassword != nil && now >= nextCheckTime, let p = nextPairToCheck() {
            let aggressive = role == .controlling && nomination == .aggressive && !remoteIsLite
            sendCheck(p, useCandidate: aggressive, now: now)
            nextCheckTime = now + timing.ta
        }
        nominateIfReady(now: now)
        if !lite, let p = selectedPair, remotePassword != nil, now >= nextConsentTime {
            sendConsent(p, now: now)
            nextConsentTime = now + Double.random(in: timing.consentInterval)
        }
        evaluate(now: now)
    }

    private func nextPairToCheck() -> Int? {
        while !triggered.isEmpty {
            let p = triggered.removeFirst()
            if pairs[p].state == .waiting { return p }
        }
        guard !concluded else { return nil }
        return pairs.indices.filter { pairs[$0].state == .waiting }.max { pairs[$0].priority < pairs[$1].priority }
    }

    private func retransmit(now: Double) {
        for (id, t) in transactions where t.nextTime <= now {
            if t.transmissions < timing.maxTransmissions {
                outgoing.append(Datagram(socket: t.socket, to: t.to, bytes: t.bytes))
                let rto = min(t.rto * 2, timing.maxRTO)
                transactions[id]?.rto = rto
                transactions[id]?.lastSent = now
                transactions[id]?.nextTime = now + rto
                transactions[id]?.transmissions += 1
                continue
            }
            transactions[id] = nil
            switch t.purpose {
            case .check(let p, _, _):
                if pairs[p].transaction == id { pairs[p].transaction = nil }
                if pairs[p].state == .inProgress || nominatingPair == p {
                    pairs[p].state = .failed
                    logger.debug("ICE: pair \(pairs[p].local) -> \(pairs[p].remote) failed: no answer")
                }
                if nominatingPair == p { nominatingPair = nil }
            case .consent(let p):
                logger.debug("ICE: consent request to \(pairs[p].remote) got no answer")
            case .gather(let socket):
                pendingGathers -= 1
                logger.info("ICE: STUN server \(t.to) did not answer (socket \(socket)); no server-reflexive candidate")
            }
        }
    }

    /// Controlling: nominate the best valid pair once no better pair is still being checked,
    /// or `nominationWait` after the first valid pair (regular nomination, RFC 8445 §8.1.1).
    private func nominateIfReady(now: Double) {
        guard role == .controlling, !lite, selectedPair == nil, nominatingPair == nil, let firstValidTime else { return }
        if now >= firstValidTime + timing.nominationWait { nominationWaitOver = true }
        let valid = pairs.indices.filter { pairs[$0].state == .succeeded }
        guard let best = valid.max(by: { pairs[$0].priority < pairs[$1].priority }), !pairs[best].nominated else { return }
        let betterPending = pairs.contains {
            ($0.state == .waiting || $0.state == .inProgress || $0.state == .frozen) && $0.priority > pairs[best].priority
        }
        guard !betterPending || now >= firstValidTime + timing.nominationWait else { return }
        nominatingPair = best
        logger.info("ICE: nominating \(pairs[best].local) -> \(pairs[best].remote)")
        sendCheck(best, useCandidate: true, now: now)
    }

    /// The selected pair: the highest-priority nominated valid pair.
    private func updateSelection(now: Double) {
        let nominated = pairs.indices.filter { pairs[$0].nominated && pairs[$0].state == .succeeded }
        guard let best = nominated.max(by: { pairs[$0].priority < pairs[$1].priority }), best != selectedPair else { return }
        selectedPair = best
        concluded = true
        lastConsent = now
        if selectedPair != nil { nextConsentTime = now + Double.random(in: timing.consentInterval) }
        logger.info("ICE: selected pair \(pairs[best].local) -> \(pairs[best].remote) (socket \(pairs[best].socket))")
        if state == .checking || state == .disconnected { setState(.connected) }
    }

    private func evaluate(now: Double) {
        guard let startTime else { return }
        switch state {
        case .checking:
            if now >= startTime + timing.checkingTimeout {
                fail("no pair was selected within \(timing.checkingTimeout) s", now: now)
            } else if !lite && !pairs.isEmpty && pairs.allSatisfy({ $0.state == .failed }) {
                fail("every candidate pair failed (\(pairs.count))", now: now)
            }
        case .connected, .disconnected:
            guard let lastConsent, let lastHeard else { return }
            // Compared as the deadlines are computed, so that a tick at exactly a deadline acts.
            if now >= lastConsent + timing.consentTimeout {
                let peer = selected.map { "\($0.remote)" } ?? "the peer"
                fail("consent lost: \(peer) \(lite ? "sent nothing" : "answered no consent check") for \(timing.consentTimeout) s", now: now)
            } else if now >= lastHeard + timing.disconnectedAfter {
                setState(.disconnected)
            } else {
                setState(.connected)
            }
        default:
            break
        }
    }

    // MARK: Internals: what arrives

    private func handleRequest(_ message: STUNMessage, raw: [UInt8], from: TransportAddress, socket: Int, now: Double) {
        guard let local = hostCandidate(socket: socket) else {
            logger.debug("ICE: a check arrived on socket \(socket), which has no candidate; ignored")
            return
        }
        var username: String?, priority: UInt32?, useCandidate = false
        var peerControlling: UInt64?, peerControlled: UInt64?
        for attribute in message.attributes {
            switch attribute {
            case .username(let u): username = u
            case .priority(let p): priority = p
            case .useCandidate: useCandidate = true
            case .iceControlling(let t): peerControlling = t
            case .iceControlled(let t): peerControlled = t
            default: break
            }
        }
        // RFC 8489 §9.1.3: no USERNAME or no MESSAGE-INTEGRITY is 400; a wrong one is 401.
        guard let username else {
            respond(to: message, from: from, socket: socket, error: (400, "Bad Request"), authenticated: false)
            return
        }
        do {
            _ = try STUNMessage(parsing: raw, integrityKey: Array(localPassword.utf8))
        } catch .integrityMissing {
            respond(to: message, from: from, socket: socket, error: (400, "Bad Request"), authenticated: false)
            return
        } catch {
            logger.debug("ICE: check from \(from) failed authentication; answered 401")
            respond(to: message, from: from, socket: socket, error: (401, "Unauthorized"), authenticated: false)
            return
        }
        guard username.hasPrefix("\(localUfrag):") else {
            logger.debug("ICE: check from \(from) for another ufrag; answered 401")
            respond(to: message, from: from, socket: socket, error: (401, "Unauthorized"), authenticated: false)
            return
        }
        guard let priority else {
            respond(to: message, from: from, socket: socket, error: (400, "Bad Request"), authenticated: true)
            return
        }
        // Role conflict, RFC 8445 §7.3.1.1.
        if role == .controlling, let theirs = peerControlling {
            if tieBreaker >= theirs {
                logger.debug("ICE: role conflict with \(from): we stay controlling; answered 487")
                respond(to: message, from: from, socket: socket, error: (487, "Role Conflict"), authenticated: true)
                return
            }
            switchRole(to: .controlled)
        } else if role == .controlled, let theirs = peerControlled {
            if lite || tieBreaker < theirs {
                logger.debug("ICE: role conflict with \(from): we stay controlled; answered 487")
                respond(to: message, from: from, socket: socket, error: (487, "Role Conflict"), authenticated: true)
                return
            }
            switchRole(to: .controlling)
        }
        respond(to: message, from: from, socket: socket, authenticated: true)

        if !remoteCandidates.contains(where: { $0.address == from }) {
            let candidate = ICERemoteCandidate(foundation: "prflx\(remoteCandidates.count + 1)", priority: priority,
                                               address: from, type: "prflx")
            remoteCandidates.append(candidate)
            logger.debug("ICE: peer-reflexive remote candidate \(from) priority \(priority)")
        }
        guard let p = addPair(local: local, remote: from, remotePriority: priority) else { return }

        if lite {
            pairs[p].state = .succeeded
            if useCandidate && !pairs[p].nominated {
                pairs[p].nominated = true
                logger.debug("ICE: the peer nominated \(pairs[p].local) -> \(from)")
            }
            if p == selectedPair { lastConsent = now }
            updateSelection(now: now)
            return
        }
        // Triggered check, RFC 8445 §7.3.1.4.
        switch pairs[p].state {
        case .succeeded, .inProgress:
            break
        case .frozen, .waiting, .failed:
            pairs[p].state = .waiting
            if !triggered.contains(p) { triggered.append(p) }
        }
        if useCandidate && role == .controlled {
            if pairs[p].state == .succeeded {
                if !pairs[p].nominated { logger.debug("ICE: the peer nominated \(pairs[p].local) -> \(from)") }
                pairs[p].nominated = true
                updateSelection(now: now)
            } else {
                pairs[p].nominateOnSuccess = true
            }
        }
    }

    private func handleResponse(_ message: STUNMessage, raw: [UInt8], from: TransportAddress, socket: Int, now: Double) {
        guard let t = transactions[message.transactionID] else { return }
        var mapped: STUNAddress?, errorCode: Int?
        for attribute in message.attributes {
            switch attribute {
            case .xorMappedAddress(let a): mapped = a
            case .errorCode(let code, _): errorCode = code
            default: break
            }
        }
        if case .gather(let gatherSocket) = t.purpose {
            guard from == t.to && socket == t.socket else { return }
            transactions[message.transactionID] = nil
            pendingGathers -= 1
            guard message.messageClass == .success, let mapped else {
                logger.info("ICE: STUN server \(from) answered with an error \(errorCode ?? 0); no server-reflexive candidate")
                return
            }
            addServerReflexive(socket: gatherSocket, mapped: TransportAddress(mapped))
            return
        }
        // Checks and consent: a success must carry MESSAGE-INTEGRITY with the peer's password.
        // An error may lack it (400 and 401 cannot be signed by a peer that could not check us);
        // it then counts only if it matches our transaction and comes back the way we sent.
        let authenticated = remotePassword.map { (try? STUNMessage(parsing: raw, integrityKey: $0)) != nil } ?? false
        let unsignedError = message.messageClass == .error && from == t.to && socket == t.socket
            && (errorCode == 400 || errorCode == 401)
        guard authenticated || unsignedError else {
            logger.debug("ICE: response from \(from) failed authentication; dropped")
            return
        }
        transactions[message.transactionID] = nil
        let rtt = t.transmissions == 1 ? now - t.lastSent : nil
        switch t.purpose {
        case .gather:
            break
        case .consent(let p):
            guard message.messageClass == .success, from == t.to, socket == t.socket else {
                logger.debug("ICE: consent request to \(pairs[p].remote) answered with error \(errorCode ?? 0)")
                return
            }
            if let rtt { roundTripTime = rtt }
            if p == selectedPair { lastConsent = now }
        case .check(let p, let useCandidate, let roleAtSend):
            if pairs[p].transaction == message.transactionID { pairs[p].transaction = nil }
            if message.messageClass == .error {
                if errorCode == 487 {
                    // RFC 8445 §7.2.5.1: switch roles (unless that already happened) and check the pair again.
                    if roleAtSend == role {
                        logger.debug("ICE: role conflict answered by \(from)")
                        switchRole(to: role == .controlling ? .controlled : .controlling)
                    }
                    if pairs[p].state != .succeeded { pairs[p].state = .waiting }
                    if nominatingPair == p { nominatingPair = nil }
                    if !triggered.contains(p) { triggered.append(p) }
                } else {
                    logger.debug("ICE: pair \(pairs[p].local) -> \(pairs[p].remote) failed: error \(errorCode ?? 0)")
                    pairs[p].state = .failed
                    if nominatingPair == p { nominatingPair = nil }
                }
                return
            }
            // RFC 8445 §7.2.5.2.1: the response must come from where the request went, to where it came from.
            guard from == t.to && socket == t.socket else {
                logger.debug("ICE: pair \(pairs[p].local) -> \(pairs[p].remote) failed: answer from \(from) is not symmetric")
                pairs[p].state = .failed
                if nominatingPair == p { nominatingPair = nil }
                return
            }
            if let rtt { roundTripTime = rtt }
            if let mapped, TransportAddress(mapped) != pairs[p].local {
                logger.debug("ICE: peer-reflexive local address \(TransportAddress(mapped)) for \(pairs[p].local)")
            }
            if pairs[p].state != .succeeded {
                logger.debug("ICE: pair \(pairs[p].local) -> \(pairs[p].remote) succeeded")
            }
            pairs[p].state = .succeeded
            if firstValidTime == nil { firstValidTime = now }
            if (useCandidate && roleAtSend == .controlling && role == .controlling)
                || (pairs[p].nominateOnSuccess && role == .controlled) {
                pairs[p].nominated = true
            }
            if nominatingPair == p { nominatingPair = nil }
            if p == selectedPair { lastConsent = now }
            updateSelection(now: now)
        }
    }

    private func addServerReflexive(socket: Int, mapped: TransportAddress) {
        guard let host = hostCandidate(socket: socket) else { return }
        guard mapped != host.address else {
            logger.debug("ICE: the STUN server sees \(host.address) as it is; no server-reflexive candidate needed")
            return
        }
        guard !localCandidates.contains(where: { $0.type == "srflx" && $0.address == mapped }) else { return }
        let candidate = ICELocalCandidate(
            foundation: foundation(type: "srflx", baseIP: host.ip), component: 1, transport: "udp",
            priority: ICELocalCandidate.priority(type: "srflx", localPreference: (host.priority >> 8) & 0xffff),
            ip: mapped.ip, port: mapped.port, type: "srflx", relatedAddress: host.address, socket: socket)
        localCandidates.append(candidate)
        logger.info("ICE: server-reflexive candidate \(mapped) for \(host.address)")
    }
}
