import ICE
import Networking
import Testing

/// Agents on an in-memory network and a fake clock: timeouts without waiting.
@Suite("ICE agent timers and error paths (fake clock)", .timeLimit(.minutes(1)))
struct ICEFakeClockTests {
    static let aAddress = TransportAddress(ip: "10.0.0.1", port: 5000)
    static let bAddress = TransportAddress(ip: "10.0.0.2", port: 6000)

    static func parsed(_ d: ICEAgent.Datagram) -> STUNMessage? { try? STUNMessage(parsing: d.bytes) }

    @Test func aPeerThatNeverAnswersFails() {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        a.setRemoteCredentials(ufrag: "peer", password: "peerpasswordpeerpassword", isLite: false)
        a.addRemoteCandidate(ip: "192.0.2.1", port: 9, priority: 2_130_706_431, type: "host", foundation: "1")
        a.start(now: 0)
        #expect(a.state == .checking)
        #expect(net.run(until: 100) { a.state == .failed })
        // Every pair failed once its check was sent seven times (about 8 s), before the 20 s timeout.
        #expect(net.now > 5 && net.now < 20)
        let checks = net.sent.filter { $0.datagram.to.ip == "192.0.2.1" }
        #expect(checks.count == 7)
        #expect(checks.allSatisfy { Self.parsed($0.datagram)?.messageClass == .request })
        #expect(a.nextDeadline == nil && a.selected == nil)
    }

    @Test func noPairAtAllFailsAtTheGlobalTimeout() {
        let net = FakeNetwork()
        let a = net.add(role: .controlled, addresses: [Self.aAddress], label: "ice.a")
        a.setRemoteCredentials(ufrag: "peer", password: "peerpasswordpeerpassword", isLite: false)
        a.start(now: 0)
        #expect(net.run(until: 100) { a.state == .failed })
        #expect(net.now == 20)
    }

    @Test(arguments: [false, true])
    func consentLostFailsAfterThirtySeconds(liteSide: Bool) {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, lite: liteSide, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        b.start(now: 0)
        #expect(net.run(until: 5) { a.state == .connected && b.state == .connected })
        #expect(a.selected?.remote == Self.bAddress && b.selected?.remote == Self.aAddress)

        // A minute with the network up: consent requests every 4 to 6 s keep both connected.
        let before = net.sent.count
        #expect(!net.run(until: 60) { a.state != .connected || b.state != .connected })
        let consentRequests = net.sent[before...].filter {
            $0.datagram.to == Self.bAddress && Self.parsed($0.datagram)?.messageClass == .request
        }
        #expect((10...15).contains(consentRequests.count), "\(consentRequests.count) consent requests in 60 s")
        #expect(a.lastConsent.map { net.now - $0 <= 6.1 } == true)
        #expect(a.roundTripTime == 0)

        // The network goes away: disconnected first, failed 30 s after the last consent.
        let cut = net.now
        let lastConsent = a.lastConsent ?? 0
        net.drop = { _, _ in true }
        #expect(net.run(until: cut + 60) { a.state == .failed && b.state == .failed })
        #expect(net.states(of: a).contains(.disconnected))
        #expect(a.lastConsent == lastConsent)
        #expect(a.selected == nil)
    }

    /// Under heavy loss a consent transaction can go unanswered for 8 s while media
    /// still flows (at 30 % loss each way, in 2 fault-link test runs of 17):
    /// authenticated media keeps a full agent from `disconnected`, which a
    /// subscriber or publisher treats as a dropped connection. Consent still rules
    /// `failed`: 30 s without an answered check ends it, media or not (RFC 7675).
    @Test func mediaKeepsAFullAgentConnectedButNotPastConsent() {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        b.start(now: 0)
        #expect(net.run(until: 5) { a.state == .connected })
        // Every STUN message lost from here on; media from b reaches a every half second.
        net.drop = { _, _ in true }
        let cut = net.now
        let lastConsent = a.lastConsent ?? 0
        let seen = net.states(of: a).count
        var t = cut
        while t < cut + 25 {
            t += 0.5
            net.run(until: t)
            a.peerProvedAlive(now: net.now)
        }
        #expect(!net.states(of: a)[seen...].contains(.disconnected), "media flowed: never disconnected")
        #expect(a.state == .connected && a.lastConsent == lastConsent && a.lastHeard == net.now)
        while a.state != .failed && t < cut + 40 {
            t += 0.5
            net.run(until: t)
            a.peerProvedAlive(now: net.now)
        }
        #expect(a.state == .failed)
        #expect(net.now - lastConsent >= 30 && net.now - lastConsent <= 30.5, "failed \(net.now - lastConsent) s after the last consent")

        // Without the media, the same loss is `disconnected` after 8 s, as before.
        let net2 = FakeNetwork()
        let c = net2.add(role: .controlling, addresses: [Self.aAddress], label: "ice.c")
        let d = net2.add(role: .controlled, addresses: [Self.bAddress], label: "ice.d")
        c.timing.disconnectedAfter = 8
        FakeNetwork.introduce(c, d)
        c.start(now: 0)
        d.start(now: 0)
        #expect(net2.run(until: 5) { c.state == .connected })
        net2.drop = { _, _ in true }
        let heard = c.lastHeard ?? 0
        #expect(net2.run(until: net2.now + 20) { c.state == .disconnected })
        #expect(net2.now - heard >= 8 && net2.now - heard <= 8.01)
    }

    @Test func aWrongPasswordGets401AndNeverConnects() {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.setRemoteCredentials(ufrag: b.localUfrag, password: "not-the-password-of-b-at-all", isLite: false)
        a.start(now: 0)
        b.start(now: 0)
        #expect(net.run(until: 100) { a.state == .failed && b.state == .failed })
        let fromB = net.sent.filter { $0.from == Self.bAddress }.compactMap { Self.parsed($0.datagram) }
        let errors = fromB.filter { $0.messageClass == .error }
        #expect(!errors.isEmpty)
        #expect(errors.allSatisfy { $0.attributes.contains(.errorCode(code: 401, reason: "Unauthorized")) })
        #expect(!net.states(of: a).contains(.connected) && !net.states(of: b).contains(.connected))
        // a fails as soon as its only pair got the 401, well before the global timeout.
        #expect(a.candidatePairs.allSatisfy { $0.state == .failed })
    }

    @Test func badRequestsGet400() throws {
        let net = FakeNetwork()
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        b.start(now: 0)
        let password = Array(b.localPassword.utf8)
        let cases: [(STUNMessage, [UInt8]?)] = [
            // No USERNAME.
            (STUNMessage(.request, transactionID: STUNMessage.randomTransactionID(),
                         attributes: [.priority(1), .iceControlling(tieBreaker: 1)]), password),
            // No MESSAGE-INTEGRITY.
            (STUNMessage(.request, transactionID: STUNMessage.randomTransactionID(),
                         attributes: [.username("\(b.localUfrag):x"), .priority(1), .iceControlling(tieBreaker: 1)]), nil),
            // No PRIORITY.
            (STUNMessage(.request, transactionID: STUNMessage.randomTransactionID(),
                         attributes: [.username("\(b.localUfrag):x"), .iceControlling(tieBreaker: 1)]), password),
        ]
        for (request, key) in cases {
            let consumed = request.encoded(integrityKey: key).withUnsafeBytes {
                b.receive($0, from: Self.aAddress, socket: 0, now: 0.1)
            }
            #expect(consumed)
            let out = b.takeOutgoing()
            #expect(out.count == 1 && out.first?.to == Self.aAddress)
            let response = try #require(out.first.flatMap(Self.parsed))
            #expect(response.messageClass == .error && response.transactionID == request.transactionID)
            #expect(response.attributes.contains(.errorCode(code: 400, reason: "Bad Request")))
        }
        // A right password for another ufrag is 401.
        let other = STUNMessage(.request, transactionID: STUNMessage.randomTransactionID(),
                                attributes: [.username("someone-else:x"), .priority(1), .iceControlling(tieBreaker: 1)])
        _ = other.encoded(integrityKey: password).withUnsafeBytes { b.receive($0, from: Self.aAddress, socket: 0, now: 0.2) }
        let response = try #require(b.takeOutgoing().first.flatMap(Self.parsed))
        #expect(response.attributes.contains(.errorCode(code: 401, reason: "Unauthorized")))
        #expect(b.remoteCandidates.isEmpty && b.candidatePairs.isEmpty)
        // Not STUN: the caller's.
        #expect(![UInt8]([0x80, 0x60, 0, 1]).withUnsafeBytes { b.receive($0, from: Self.aAddress, socket: 0, now: 0.3) })
    }

    @Test(arguments: [ICEAgent.Role.controlling, .controlled])
    func aRoleConflictResolves(bothAre role: ICEAgent.Role) {
        let net = FakeNetwork()
        let a = net.add(role: role, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: role, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        b.start(now: 0)
        #expect(net.run(until: 20) { a.state == .connected && b.state == .connected })
        #expect(a.role != b.role)
        let conflicts = net.sent.compactMap { Self.parsed($0.datagram) }.filter {
            $0.attributes.contains(.errorCode(code: 487, reason: "Role Conflict"))
        }
        #expect(!conflicts.isEmpty)
        #expect(a.selected?.remote == Self.bAddress && b.selected?.remote == Self.aAddress)
    }

    @Test func aCheckFromAnUnknownAddressMakesAPeerReflexiveCandidate() {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b, candidates: false)
        // Only a learns b's candidate (as behind a NAT, where b's own address is useless to a).
        for c in b.localCandidates {
            a.addRemoteCandidate(ip: c.ip, port: c.port, priority: c.priority, type: c.type, foundation: c.foundation)
        }
        a.start(now: 0)
        b.start(now: 0)
        #expect(b.candidatePairs.isEmpty)
        #expect(net.run(until: 10) { a.state == .connected && b.state == .connected })
        let learned = b.remoteCandidates.filter { $0.type == "prflx" }
        #expect(learned.map(\.address) == [Self.aAddress])
        // Its priority is the one the check carried: a's prflx priority for that host candidate.
        #expect(learned.first?.priority == ICELocalCandidate.priority(type: "prflx", localPreference: 65535))
        #expect(b.selected?.remote == Self.aAddress)

        // When the SDP later names that address, the signalled candidate replaces the prflx one.
        let host = a.localCandidates[0]
        b.addRemoteCandidate(ip: host.ip, port: host.port, priority: host.priority, type: "host", foundation: host.foundation)
        #expect(b.remoteCandidates.map(\.type) == ["host"])
    }

    @Test func aLiteAgentNominatedBeforeItStartedConnectsWhenStarted() {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, lite: true, addresses: [Self.bAddress], label: "ice.lite")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        #expect(net.run(until: 5) { a.state == .connected })
        #expect(b.state == .new && b.selected == nil)
        b.start(now: net.now)
        #expect(b.state == .connected && b.selected?.remote == Self.aAddress)
        // The lite side takes the peer's consent checks as its sign of life: 30 s without them, failed.
        #expect(!net.run(until: net.now + 45) { b.state != .connected })
        net.drop = { _, _ in true }
        #expect(net.run(until: net.now + 60) { b.state == .failed })
    }

    @Test func pairsAreMadeWithinAnAddressFamilyOnly() {
        let net = FakeNetwork()
        let v6 = TransportAddress(ip: "2001:db8::1", port: 5002)
        let a = net.add(role: .controlling, addresses: [Self.aAddress, v6], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        // Non-canonical IPv6 text and an mDNS name: the first is normalised, the second ignored.
        b.addRemoteCandidate(ip: "2001:0db8:0:0::1", port: 5002, priority: 1, type: "host", foundation: "9")
        b.addRemoteCandidate(ip: "5f1c0e2a.local", port: 5003, priority: 1, type: "host", foundation: "8")
        #expect(b.remoteCandidates.map(\.address) == [v6])
        FakeNetwork.introduce(a, b)
        #expect(a.candidatePairs.map(\.remote) == [Self.bAddress])
        #expect(a.candidatePairs.map(\.local) == [Self.aAddress])
        #expect(b.candidatePairs.map(\.remote) == [Self.aAddress])
        a.start(now: 0)
        b.start(now: 0)
        #expect(net.run(until: 5) { a.state == .connected && b.state == .connected })
    }

    @Test func aggressiveNominationConnectsWithoutANominationRound() {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, nomination: .aggressive, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        b.start(now: 0)
        #expect(net.run(until: 5) { a.state == .connected && b.state == .connected })
        let requestsFromA = net.sent.filter { $0.from == Self.aAddress }.compactMap { Self.parsed($0.datagram) }
            .filter { $0.messageClass == .request }
        #expect(requestsFromA.first?.attributes.contains(.useCandidate) == true)
    }

    @Test func checksCarryTheICEAttributes() throws {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        let check = try #require(a.takeOutgoing().first)
        #expect(check.to == Self.bAddress && check.socket == 0)
        // Integrity with b's password; USERNAME is b's ufrag then a's.
        let message = try STUNMessage(parsing: check.bytes, integrityKey: Array(b.localPassword.utf8))
        #expect(message.attributes.contains(.username("\(b.localUfrag):\(a.localUfrag)")))
        #expect(message.attributes.contains(.priority(ICELocalCandidate.priority(type: "prflx", localPreference: 65535))))
        #expect(message.attributes.contains { if case .iceControlling = $0 { true } else { false } })
        #expect(!message.attributes.contains(.useCandidate))
        #expect(throws: STUNError.integrityMismatch) {
            try STUNMessage(parsing: check.bytes, integrityKey: Array(a.localPassword.utf8))
        }
    }

    @Test func aForgedOrAsymmetricResponseDoesNotValidate() throws {
        let net = FakeNetwork()
        let a = net.add(role: .controlling, addresses: [Self.aAddress], label: "ice.a")
        let b = net.add(role: .controlled, addresses: [Self.bAddress], label: "ice.b")
        FakeNetwork.introduce(a, b)
        a.start(now: 0)
        let check = try #require(a.takeOutgoing().first.flatMap(Self.parsed))
        let mapped = STUNAddress(address: [10, 0, 0, 1], port: 5000)
        let success = STUNMessage(.success, transactionID: check.transactionID, attributes: [.xorMappedAddress(mapped)])
        // Signed with the wrong password: dropped.
        _ = success.encoded(integrityKey: Array("wrong".utf8)).withUnsafeBytes {
            a.receive($0, from: Self.bAddress, socket: 0, now: 0.01)
        }
        #expect(a.candidatePairs.first?.state == .inProgress)
        // Signed right but from another address: the pair fails (not symmetric).
        _ = success.encoded(integrityKey: Array(b.localPassword.utf8)).withUnsafeBytes {
            a.receive($0, from: TransportAddress(ip: "10.0.0.3", port: 6000), socket: 0, now: 0.02)
        }
        #expect(a.candidatePairs.first?.state == .failed)
        #expect(a.state == .failed)
    }
}
