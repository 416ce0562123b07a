import Foundation
import Testing

@testable import SessionServer

/// A client whose signalling socket broke may come back to its connection
/// (`?connectionId=&rejoinKey=`) within the rejoin grace: streams, subscribers and ids
/// stay, the others hear nothing, and it hears what it missed.
@Suite("Registry: coming back to a connection")
struct RejoinTests {
    private struct Fixture {
        let registry: SessionRegistry
        let sid: String
        let watcher = Outbox()
        let socket = Outbox()
        let client: ConnectionInfo
        let streamID: String

        init(mediaMode: MediaMode = .routed, limits: RegistryLimits = RegistryLimits()) throws {
            registry = SessionRegistry(limits: limits)
            sid = try registry.createSession(mediaMode: mediaMode).sessionID
            _ = try registry.connect(sessionID: sid, role: .subscriber, data: "watcher", outbox: watcher, tokenID: "w")
            client = try registry.connect(sessionID: sid, role: .publisher, data: "kiosk", outbox: socket, tokenID: "k")
            streamID = try registry.reserveStream(sessionID: sid, connectionID: client.connectionId, mediaMode: mediaMode)
            _ = try registry.announceStream(sessionID: sid, streamID: streamID, publisher: .connection(client.connectionId),
                                            name: "front", hasAudio: true, hasVideo: true, videoType: .camera)
        }

        /// What the client shows to come back (its `connected` told it the key).
        var rejoin: SessionRegistry.Rejoin {
            SessionRegistry.Rejoin(connectionID: client.connectionId,
                                   rejoinKey: registry.rejoinKey(sessionID: sid, connectionID: client.connectionId) ?? "")
        }
    }

    @Test("a broken socket keeps the connection; its client comes back to it, hears connected as it was, then what it missed")
    func comesBack() async throws {
        let f = try Fixture()
        guard case .kept = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId, outbox: f.socket,
                                                   reason: .networkDisconnected) else {
            Issue.record("not kept")
            return
        }
        #expect(f.registry.isAway(sessionID: f.sid, connectionID: f.client.connectionId))
        // Meanwhile someone joins and signals everyone.
        let late = try f.registry.connect(sessionID: f.sid, role: .subscriber, data: "late", outbox: Outbox(), tokenID: "l")
        try f.registry.signal(sessionID: f.sid, from: late.connectionId, to: nil, signalType: "chat", data: .string("hi"))

        let joined = try f.registry.join(sessionID: f.sid, role: .publisher, data: "kiosk", outbox: Outbox(), tokenID: "k",
                                         resuming: f.rejoin)
        #expect(joined.resumed && joined.info == f.client)
        #expect(!f.registry.isAway(sessionID: f.sid, connectionID: f.client.connectionId))
        // `connected` first, listing what the client knew when it broke, then what happened since.
        let first = try #require(joined.first)
        let connected = try #require(messages([.text(first)]).first)
        #expect(connected["type"] as? String == "connected" && connected["connectionId"] as? String == f.client.connectionId)
        #expect((connected["connections"] as? [[String: Any]])?.map { $0["data"] as? String } == ["watcher"])
        #expect((connected["streams"] as? [[String: Any]])?.map { $0["streamId"] as? String } == [f.streamID])
        let backlog = try #require(joined.outbox)
        #expect(types(await drain(backlog)) == ["connectionCreated", "signal"])
        // Its stream is still there, and the others heard nothing of the break.
        #expect(try f.registry.streams(sessionID: f.sid).map(\.streamId) == [f.streamID])
        #expect(types(await drain(f.watcher)) == ["connected", "connectionCreated", "streamCreated", "connectionCreated", "signal"])
    }

    @Test("only its client (its rejoin key and token) takes the connection back (403); an id no longer there gives a new connection")
    func onlyItsOwnClient() throws {
        let f = try Fixture()
        _ = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId, outbox: f.socket, reason: .networkDisconnected)
        #expect(throws: RegistryError.self) {
            try f.registry.checkCanConnect(sessionID: f.sid, resuming: f.rejoin, tokenID: "someone else")
        }
        do {
            _ = try f.registry.join(sessionID: f.sid, role: .publisher, data: "", outbox: Outbox(), tokenID: "someone else",
                                    resuming: f.rejoin)
            Issue.record("another token took the connection back")
        } catch {
            #expect(error.status == 403)
        }
        // The right token without the key will not do either: connection ids are everyone's to see.
        let guessed = SessionRegistry.Rejoin(connectionID: f.client.connectionId, rejoinKey: "guess")
        #expect(throws: RegistryError.self) { try f.registry.checkCanConnect(sessionID: f.sid, resuming: guessed, tokenID: "k") }
        let gone = SessionRegistry.Rejoin(connectionID: "gone", rejoinKey: "old")
        try f.registry.checkCanConnect(sessionID: f.sid, resuming: gone, tokenID: "k")
        let fresh = try f.registry.join(sessionID: f.sid, role: .publisher, data: "", outbox: Outbox(), tokenID: "k", resuming: gone)
        #expect(!fresh.resumed && fresh.info.connectionId != f.client.connectionId)
        #expect(f.registry.rejoinKey(sessionID: f.sid, connectionID: fresh.info.connectionId) != nil)
    }

    @Test("past the grace the connection ends as networkDisconnected, its stream first; a later expiry of an earlier absence does nothing")
    func graceRunsOut() async throws {
        let f = try Fixture()
        guard case .kept(let first) = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId,
                                                             outbox: f.socket, reason: .networkDisconnected) else {
            Issue.record("not kept")
            return
        }
        // It comes back, and breaks again: the first absence's expiry is stale.
        let joined = try f.registry.join(sessionID: f.sid, role: .publisher, data: "", outbox: Outbox(), tokenID: "k",
                                         resuming: f.rejoin)
        #expect(f.registry.expireAway(sessionID: f.sid, connectionID: f.client.connectionId, awayID: first) == nil)
        guard case .kept(let second) = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId,
                                                              outbox: try #require(joined.outbox), reason: .networkDisconnected) else {
            Issue.record("not kept the second time")
            return
        }
        #expect(first != second)
        let release = try #require(f.registry.expireAway(sessionID: f.sid, connectionID: f.client.connectionId, awayID: second))
        #expect(release.streamIDs == [f.streamID])
        let seen = messages(await drain(f.watcher)).suffix(2)
        #expect(seen.map { $0["type"] as? String } == ["streamDestroyed", "connectionDestroyed"])
        #expect(seen.map { $0["reason"] as? String } == ["networkDisconnected", "networkDisconnected"])
        #expect(try f.registry.streams(sessionID: f.sid).isEmpty)
    }

    @Test("a client that closed (or was cut off for not reading), or a router without a grace, ends the connection at once")
    func endsAtOnce() async throws {
        let closed = try Fixture()
        guard case .ended(let release?) = closed.registry.socketEnded(
            sessionID: closed.sid, connectionID: closed.client.connectionId, outbox: closed.socket, reason: .clientDisconnected) else {
            Issue.record("a closed socket's connection was not ended")
            return
        }
        #expect(release.streamIDs == [closed.streamID])

        let noGrace = try Fixture(limits: RegistryLimits(rejoinGrace: nil))
        guard case .ended(_?) = noGrace.registry.socketEnded(
            sessionID: noGrace.sid, connectionID: noGrace.client.connectionId, outbox: noGrace.socket, reason: .networkDisconnected) else {
            Issue.record("kept without a grace")
            return
        }
        #expect(types(await drain(noGrace.watcher)).suffix(2) == ["streamDestroyed", "connectionDestroyed"])
    }

    @Test("taken back while its old socket is still open here: the old one is closed and ends nothing when it goes")
    func oldSocketStillOpen() async throws {
        let f = try Fixture()
        let next = Outbox()
        let joined = try f.registry.join(sessionID: f.sid, role: .publisher, data: "", outbox: next, tokenID: "k",
                                         resuming: f.rejoin)
        #expect(joined.resumed && joined.first == nil && joined.outbox === next)
        #expect(await drain(f.socket).last == .close(reason: "resumed"))
        #expect(f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId, outbox: f.socket,
                                       reason: .clientDisconnected) == .replaced)
        #expect(try f.registry.streams(sessionID: f.sid).map(\.streamId) == [f.streamID])
        #expect(types(await drain(next)) == ["connected"])
        #expect(!types(await drain(f.watcher)).contains("connectionDestroyed"))
    }

    @Test("a connection a moderator forced out while it was away is not taken back; its client (and only it) is told so")
    func forcedOutStaysOut() throws {
        let f = try Fixture()
        let rejoin = f.rejoin
        _ = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId, outbox: f.socket, reason: .networkDisconnected)
        #expect(f.registry.disconnect(sessionID: f.sid, connectionID: f.client.connectionId, reason: .forceDisconnected) != nil)
        // Let in (checkCanConnect) to be told: wasForcedOut, which its signalling says with a close frame.
        try f.registry.checkCanConnect(sessionID: f.sid, resuming: rejoin, tokenID: "k")
        #expect(f.registry.wasForcedOut(sessionID: f.sid, rejoin))
        #expect(!f.registry.wasForcedOut(sessionID: f.sid, SessionRegistry.Rejoin(connectionID: rejoin.connectionID, rejoinKey: "guess")))
        #expect(throws: RegistryError.self) {
            try f.registry.join(sessionID: f.sid, role: .publisher, data: "", outbox: Outbox(), tokenID: "k", resuming: rejoin)
        }
    }

    @Test("away for more than its backlog holds: taken back all the same, with connected as things are now")
    func backlogOverflowed() async throws {
        let f = try Fixture()
        _ = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId, outbox: f.socket, reason: .networkDisconnected)
        let talker = try f.registry.connect(sessionID: f.sid, role: .subscriber, data: "talker", outbox: Outbox(), tokenID: "t")
        for n in 0...Outbox.defaultCapacity {
            try f.registry.signal(sessionID: f.sid, from: talker.connectionId, to: nil, signalType: nil, data: .number(Double(n)))
        }
        let next = Outbox()
        let joined = try f.registry.join(sessionID: f.sid, role: .publisher, data: "", outbox: next, tokenID: "k",
                                         resuming: f.rejoin)
        #expect(joined.resumed && joined.first == nil && joined.outbox === next)
        let connected = try #require(messages(await drain(next)).first)
        #expect((connected["connections"] as? [[String: Any]])?.map { $0["data"] as? String } == ["watcher", "talker"])
        #expect(!f.registry.isAway(sessionID: f.sid, connectionID: f.client.connectionId))
    }

    @Test("a relayed subscriber's offer to a publisher that is away is refused at once as such")
    func relayedOfferWhileAway() throws {
        let f = try Fixture(mediaMode: .relayed)
        _ = f.registry.socketEnded(sessionID: f.sid, connectionID: f.client.connectionId, outbox: f.socket, reason: .networkDisconnected)
        let subscriberID = try f.registry.reserveSubscriber(sessionID: f.sid, streamID: f.streamID)
        #expect(f.registry.sendRelayedOffer(sessionID: f.sid, streamID: f.streamID, subscriberID: subscriberID, sdp: "v=0")
                == .publisherAway)
    }
}
