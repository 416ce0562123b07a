#if canImport(Glibc)
import Glibc
#endif
import ICE
import Networking
import Testing

@Suite("ICE agents over real UDP sockets on 127.0.0.1", .timeLimit(.minutes(1)))
struct ICELoopbackTests {
    /// Both sides agree on the selected pair, and application datagrams pass through
    /// `receive` as "not mine" in both directions.
    func expectConnectedAndCarrying(_ a: LoopbackPeer, _ b: LoopbackPeer) throws {
        let connected = try runLoop([a, b], timeout: 10) { a.agent.state == .connected && b.agent.state == .connected }
        #expect(connected, "states: \(a.agent.state) and \(b.agent.state)")
        guard connected, let sa = a.agent.selected, let sb = b.agent.selected else { return }
        #expect(sa.remote == b.sockets[sb.socket].local)
        #expect(sb.remote == a.sockets[sa.socket].local)
        #expect(a.agent.roundTripTime != nil)

        let rtpLike: [UInt8] = [0x80, 0x60, 0x00, 0x01] + [UInt8](repeating: 0xab, count: 40)
        let dtlsLike: [UInt8] = [0x16, 0xfe, 0xfd] + [UInt8](repeating: 0x01, count: 30)
        try a.sendApplication(rtpLike)
        try b.sendApplication(dtlsLike)
        let delivered = try runLoop([a, b], timeout: 5) { !a.application.isEmpty && !b.application.isEmpty }
        #expect(delivered)
        #expect(b.application == [rtpLike])
        #expect(a.application == [dtlsLike])
    }

    @Test(arguments: [ICEAgent.Nomination.regular, .aggressive])
    func controllingAndControlledConnect(nomination: ICEAgent.Nomination) throws {
        let a = try LoopbackPeer(role: .controlling, nomination: nomination, socketCount: 2, label: "ice.a")
        let b = try LoopbackPeer(role: .controlled, socketCount: 2, label: "ice.b")
        LoopbackPeer.introduce(a, b)
        #expect(a.agent.candidatePairs.count == 4 && b.agent.candidatePairs.count == 4)
        a.agent.start(now: monotonicNow())
        b.agent.start(now: monotonicNow())
        try expectConnectedAndCarrying(a, b)
        // The best pair wins: both sides' first sockets (highest local preference).
        #expect(a.agent.selected?.socket == 0 && b.agent.selected?.socket == 0)
        #expect(a.agent.candidatePairs.filter(\.nominated).count >= 1)
        a.agent.close()
        b.agent.close()
        #expect(a.agent.state == .closed && a.agent.nextDeadline == nil)
    }

    @Test func controllingAgainstALiteAgent() throws {
        // Aggressive is asked for, but an ICE-lite peer gets regular nomination.
        let a = try LoopbackPeer(role: .controlling, nomination: .aggressive, label: "ice.full")
        let b = try LoopbackPeer(role: .controlled, lite: true, label: "ice.lite")
        LoopbackPeer.introduce(a, b)
        #expect(b.agent.candidatePairs.isEmpty)   // a lite agent forms pairs only from checks it answers
        a.agent.start(now: monotonicNow())
        b.agent.start(now: monotonicNow())
        try expectConnectedAndCarrying(a, b)
        #expect(a.agent.role == .controlling && b.agent.role == .controlled)
    }

    @Test func aControlledFullAgentBecomesControllingAgainstLite() throws {
        let a = try LoopbackPeer(role: .controlled, label: "ice.full")
        let b = try LoopbackPeer(role: .controlled, lite: true, label: "ice.lite")
        LoopbackPeer.introduce(a, b)
        #expect(a.agent.role == .controlling)
        a.agent.start(now: monotonicNow())
        b.agent.start(now: monotonicNow())
        try expectConnectedAndCarrying(a, b)
    }

    @Test func serverReflexiveCandidateFromATinySTUNServer() throws {
        let agentSocket = try UDPSocket(bindingTo: "127.0.0.1")
        let server = try UDPSocket(bindingTo: "127.0.0.1")
        let agent = ICEAgent(role: .controlling, localUfrag: "abcd", localPassword: "0123456789012345678901",
                             logger: testLogger("ice.srflx"))
        agent.addHostCandidate(socket: 0, address: agentSocket.local, localPreference: 65535)
        agent.gatherServerReflexive(socket: 0, stunServer: server.local, now: monotonicNow())
        #expect(agent.isGathering)
        // The server pretends a NAT sits in between: it reports 203.0.113.7:50000.
        let natAddress = STUNAddress(address: [203, 0, 113, 7], port: 50000)
        var buffer = [UInt8](repeating: 0, count: 1500)
        var requestsSeen = 0
        let end = monotonicNow() + 10
        while agent.isGathering && monotonicNow() < end {
            for datagram in agent.takeOutgoing() {
                try datagram.bytes.withUnsafeBytes { try agentSocket.send($0, to: datagram.to) }
            }
            var fds = [pollfd(fd: server.fileDescriptor, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: agentSocket.fileDescriptor, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 2, 50)
            while let (count, from) = try buffer.withUnsafeMutableBytes({ try server.receive(into: $0) }) {
                let request = try STUNMessage(parsing: Array(buffer[0..<count]))
                #expect(request.messageClass == .request && from == agentSocket.local)
                requestsSeen += 1
                let response = STUNMessage(.success, transactionID: request.transactionID,
                                           attributes: [.xorMappedAddress(natAddress)])
                try response.encoded().withUnsafeBytes { try server.send($0, to: from) }
            }
            while let (count, from) = try buffer.withUnsafeMutableBytes({ try agentSocket.receive(into: $0) }) {
                let consumed = buffer.withUnsafeBytes {
                    agent.receive(UnsafeRawBufferPointer(rebasing: $0[0..<count]), from: from, socket: 0, now: monotonicNow())
                }
                #expect(consumed)
            }
            agent.tick(now: monotonicNow())
        }
        #expect(!agent.isGathering && requestsSeen >= 1)
        let srflx = agent.localCandidates.filter { $0.type == "srflx" }
        #expect(srflx.count == 1)
        #expect(srflx.first?.address == TransportAddress(ip: "203.0.113.7", port: 50000))
        #expect(srflx.first?.relatedAddress == agentSocket.local)
        #expect(srflx.first?.socket == 0)
        let host = agent.localCandidates.first { $0.type == "host" }
        #expect((srflx.first?.priority ?? .max) < (host?.priority ?? 0))
        #expect(srflx.first?.foundation != host?.foundation)
    }
}

@Suite("ICE credentials and candidate priorities")
struct ICECredentialsAndPriorityTests {
    @Test func credentialsAreICEChars() {
        let (ufrag, password) = ICEAgent.randomCredentials()
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        #expect(ufrag.count >= 4 && password.count >= 22)
        #expect(ufrag.allSatisfy(allowed.contains) && password.allSatisfy(allowed.contains))
        #expect(ICEAgent.randomCredentials().password != password)
    }

    @Test func candidatePriorityAsRFC8445() {
        // (2^24)*126 + (2^8)*65535 + (256 - 1)
        #expect(ICELocalCandidate.priority(type: "host", localPreference: 65535) == 2_130_706_431)
        #expect(ICELocalCandidate.priority(type: "srflx", localPreference: 65535) == 1_694_498_815)
        #expect(ICELocalCandidate.priority(type: "prflx", localPreference: 0, component: 1) == 110 << 24 | 255)
    }
}
