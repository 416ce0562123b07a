#if canImport(Glibc)
import Glibc
#endif
import ICE
import Logging
import Networking
import Testing

/// A logger for one agent; set ICE_TEST_LOG=debug (or trace) to see what the agents do.
func testLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    if let level = getenv("ICE_TEST_LOG").map({ String(cString: $0) }), let parsed = Logger.Level(rawValue: level) {
        logger.logLevel = parsed
    } else {
        logger.logLevel = .warning
    }
    return logger
}

/// CLOCK_MONOTONIC in seconds.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// An agent with its real UDP sockets (socket index = position), and the
/// non-STUN datagrams that reached it.
final class LoopbackPeer {
    let agent: ICEAgent
    let sockets: [UDPSocket]
    var application: [[UInt8]] = []

    init(role: ICEAgent.Role, nomination: ICEAgent.Nomination = .regular, lite: Bool = false,
         socketCount: Int = 1, label: String) throws {
        let credentials = ICEAgent.randomCredentials()
        agent = ICEAgent(role: role, localUfrag: credentials.ufrag, localPassword: credentials.password,
                         nomination: nomination, lite: lite, logger: testLogger(label))
        sockets = try (0..<socketCount).map { _ in try UDPSocket(bindingTo: "127.0.0.1") }
        for (i, socket) in sockets.enumerated() {
            agent.addHostCandidate(socket: i, address: socket.local, localPreference: UInt32(65535 - i))
        }
    }

    /// Gives each side the other's credentials and candidates, as the SDP exchange would.
    static func introduce(_ a: LoopbackPeer, _ b: LoopbackPeer) {
        for (x, y) in [(a, b), (b, a)] {
            x.agent.setRemoteCredentials(ufrag: y.agent.localUfrag, password: y.agent.localPassword, isLite: y.agent.lite)
            for c in y.agent.localCandidates {
                x.agent.addRemoteCandidate(ip: c.ip, port: c.port, priority: c.priority, type: c.type, foundation: c.foundation)
            }
        }
    }

    func flush() throws {
        for datagram in agent.takeOutgoing() {
            try datagram.bytes.withUnsafeBytes { try sockets[datagram.socket].send($0, to: datagram.to) }
        }
    }

    func sendApplication(_ bytes: [UInt8]) throws {
        guard let selected = agent.selected else { return }
        try bytes.withUnsafeBytes { try sockets[selected.socket].send($0, to: selected.remote) }
    }

    func drain(now: Double) throws {
        var buffer = [UInt8](repeating: 0, count: 2048)
        for (i, socket) in sockets.enumerated() {
            while let (count, from) = try buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
                let consumed = buffer.withUnsafeBytes {
                    agent.receive(UnsafeRawBufferPointer(rebasing: $0[0..<count]), from: from, socket: i, now: now)
                }
                if !consumed { application.append(Array(buffer[0..<count])) }
            }
        }
    }
}

/// Drives the peers with poll() on their sockets until `done` holds or `timeout` seconds
/// pass; returns whether `done` held.
func runLoop(_ peers: [LoopbackPeer], timeout: Double, until done: () -> Bool) throws -> Bool {
    let end = monotonicNow() + timeout
    while true {
        var now = monotonicNow()
        for peer in peers {
            peer.agent.tick(now: now)
            try peer.flush()
        }
        if done() { return true }
        if now >= end { return false }
        let next = peers.compactMap(\.agent.nextDeadline).min() ?? now + 0.05
        let wait = max(0, min(next - now, 0.05, end - now))
        var fds = peers.flatMap(\.sockets).map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        _ = poll(&fds, nfds_t(fds.count), Int32((wait * 1000).rounded(.up)))
        now = monotonicNow()
        for peer in peers {
            try peer.drain(now: now)
            try peer.flush()
        }
    }
}

/// An in-memory network on a fake clock: datagrams are delivered at once to the agent
/// that owns the destination address; the clock jumps from deadline to deadline.
final class FakeNetwork {
    struct Node {
        let agent: ICEAgent
        let addresses: [TransportAddress]
    }

    var now = 0.0
    var nodes: [Node] = []
    /// Datagrams for which this returns true are lost.
    var drop: (_ from: TransportAddress, _ datagram: ICEAgent.Datagram) -> Bool = { _, _ in false }
    /// Every datagram sent (lost or not), with its source.
    var sent: [(from: TransportAddress, datagram: ICEAgent.Datagram)] = []
    /// States seen after each step, per agent.
    var stateHistory: [ObjectIdentifier: [ICEAgent.State]] = [:]

    @discardableResult
    func add(role: ICEAgent.Role, nomination: ICEAgent.Nomination = .regular, lite: Bool = false,
             addresses: [TransportAddress], label: String) -> ICEAgent {
        let credentials = ICEAgent.randomCredentials()
        let agent = ICEAgent(role: role, localUfrag: credentials.ufrag, localPassword: credentials.password,
                             nomination: nomination, lite: lite, logger: testLogger(label))
        for (i, address) in addresses.enumerated() {
            agent.addHostCandidate(socket: i, address: address, localPreference: UInt32(65535 - i))
        }
        nodes.append(Node(agent: agent, addresses: addresses))
        return agent
    }

    func deliver() {
        var rounds = 0
        while rounds < 1000 {
            rounds += 1
            var any = false
            for node in nodes {
                for datagram in node.agent.takeOutgoing() {
                    any = true
                    let source = node.addresses[datagram.socket]
                    sent.append((source, datagram))
                    if drop(source, datagram) { continue }
                    for target in nodes {
                        guard let socket = target.addresses.firstIndex(of: datagram.to) else { continue }
                        let consumed = datagram.bytes.withUnsafeBytes {
                            target.agent.receive($0, from: source, socket: socket, now: now)
                        }
                        precondition(consumed, "only STUN travels on the fake network")
                    }
                }
            }
            if !any { break }
        }
        for node in nodes { stateHistory[ObjectIdentifier(node.agent), default: []].append(node.agent.state) }
    }

    /// Runs until `done` holds or the fake clock reaches `limit`; returns whether `done` held.
    func run(until limit: Double, _ done: () -> Bool = { false }) -> Bool {
        var stalled = 0
        while true {
            deliver()
            if done() { return true }
            let next = nodes.compactMap(\.agent.nextDeadline).min()
            if let next, next <= now {
                stalled += 1
                if stalled > 1000 {
                    Issue.record("the agents' deadlines do not advance: now \(now), deadlines \(nodes.map { ($0.agent.state, $0.agent.nextDeadline as Double?) })")
                    return false
                }
            } else {
                stalled = 0
            }
            guard let next, next <= limit else {
                now = limit
                for node in nodes { node.agent.tick(now: now) }
                deliver()
                return done()
            }
            now = max(now, next)
            for node in nodes { node.agent.tick(now: now) }
        }
    }

    func states(of agent: ICEAgent) -> [ICEAgent.State] { stateHistory[ObjectIdentifier(agent)] ?? [] }

    static func introduce(_ a: ICEAgent, _ b: ICEAgent, candidates: Bool = true) {
        for (x, y) in [(a, b), (b, a)] {
            x.setRemoteCredentials(ufrag: y.localUfrag, password: y.localPassword, isLite: y.lite)
            guard candidates else { continue }
            for c in y.localCandidates {
                x.addRemoteCandidate(ip: c.ip, port: c.port, priority: c.priority, type: c.type, foundation: c.foundation)
            }
        }
    }
}
