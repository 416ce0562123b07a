import Glibc
import MediaTypes
@testable import Publisher
import RTP
import Testing

/// The queueing thread sends what the pacer lets out itself, through the
/// connected transport's outlet; the transport thread is woken only for
/// what the pacer held back, or when no outlet is set.
@Suite("Packets leave from the thread that queues them (PacketOutlet)")
struct PacketOutletTests {
    /// An outlet that takes what is due, as `SecuredSendPath` does, and keeps the packets.
    final class RecordingOutlet: PacketOutlet {
        let taken = PThreadLocked<[RTPPacket]>([])

        func sendDue(from media: MediaSenders, now: Double) {
            var buffer: [UInt8] = []
            while media.takeNextPacket(now: now, into: &buffer) {
                let packet = try? RTPPacket(parsing: buffer[...])
                taken.withLock { $0.append(contentsOf: packet.map { [$0] } ?? []) }
            }
        }
    }

    /// Whether the event was signalled since the last look (and clears it).
    static func wasSignalled(_ event: WakeEvent) -> Bool {
        var fds = [pollfd(fd: event.fd, events: Int16(POLLIN), revents: 0)]
        let ready = poll(&fds, 1, 0) == 1
        if ready { event.drain() }
        return ready
    }

    static func connection() -> (MediaHub, MediaSenders, WakeEvent) {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000, sendsOnQueueingThread: true)
        let senders = hub.makeSenders([(.audio, 111), (.video, 96)])
        hub.attach(senders)
        senders.setSending([.audio, .video])
        let wake = WakeEvent()
        senders.setWake(wake)
        return (hub, senders, wake)
    }

    @Test func aFrameTheBudgetAllowsLeavesAtOnceWithoutWakingTheTransport() throws {
        let (hub, senders, wake) = Self.connection()
        let outlet = RecordingOutlet()
        senders.setOutlet(outlet)
        hub.send(MediaHubTests.batch(bytes: 2500), kind: .video, rtpTimestamp: 7, isKeyframe: true)
        hub.send(MediaHubTests.batch(bytes: 80), kind: .audio, rtpTimestamp: 9, isKeyframe: true)
        let taken = outlet.taken.withLock { $0 }
        #expect(taken.map(\.header.payloadType) == [96, 96, 96, 111])
        #expect(taken.map(\.header.timestamp) == [7, 7, 7, 9])
        #expect(!Self.wasSignalled(wake))
        #expect(senders.pacerDeadline(now: MonotonicTimestamp.now().seconds) == nil)   // nothing left queued
    }

    @Test func whatThePacerHoldsBackWakesTheTransport() throws {
        let (hub, senders, wake) = Self.connection()
        let outlet = RecordingOutlet()
        senders.setOutlet(outlet)
        // A keyframe of 31 packets: more than the pacer's burst budget (about 6 KB here).
        let keyframe = MediaHubTests.batch(bytes: 33_000)
        #expect(keyframe.count == 31)
        hub.send(keyframe, kind: .video, rtpTimestamp: 7, isKeyframe: true)
        let sentAtOnce = outlet.taken.withLock { $0.count }
        #expect(sentAtOnce > 0 && sentAtOnce < 31)
        #expect(Self.wasSignalled(wake))
        // The transport thread sends the rest later, in order, as the budget refills.
        var rest: [RTPPacket] = []
        var buffer: [UInt8] = []
        var now = MonotonicTimestamp.now().seconds
        while let deadline = senders.pacerDeadline(now: now), rest.count < 31 {
            now = max(now, deadline) + 0.01
            while senders.takeNextPacket(now: now, into: &buffer) { rest.append(try RTPPacket(parsing: buffer[...])) }
        }
        #expect(sentAtOnce + rest.count == 31)
        let sequences = outlet.taken.withLock { $0 }.map(\.header.sequenceNumber) + rest.map(\.header.sequenceNumber)
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $1 == $0 &+ 1 })
    }

    @Test func withoutAnOutletTheTransportIsWokenAndOnlyItsOwnOutletIsRemoved() throws {
        let (hub, senders, wake) = Self.connection()
        hub.send(MediaHubTests.batch(bytes: 80), kind: .audio, rtpTimestamp: 1, isKeyframe: true)
        #expect(Self.wasSignalled(wake))
        #expect(try MediaHubTests.drain(senders).count == 1)

        // A WHIP reconnect: the next transport's outlet is set before the old one goes.
        let old = RecordingOutlet(), next = RecordingOutlet()
        senders.setOutlet(old)
        senders.setOutlet(next)
        senders.removeOutlet(old)
        hub.send(MediaHubTests.batch(bytes: 80), kind: .audio, rtpTimestamp: 2, isKeyframe: true)
        #expect(old.taken.withLock { $0.isEmpty } && next.taken.withLock { $0.count } == 1)
        #expect(!Self.wasSignalled(wake))

        senders.removeOutlet(next)
        hub.send(MediaHubTests.batch(bytes: 80), kind: .audio, rtpTimestamp: 3, isKeyframe: true)
        #expect(next.taken.withLock { $0.count } == 1)
        #expect(Self.wasSignalled(wake))
    }

    @Test func anEncodersHubKeepsSendingOnTheTransportThread() throws {
        // The encoder thread allocates nothing per frame, and SRTP would.
        let hub = MediaHub(videoBitrateCeiling: 1_000_000)
        let senders = hub.makeSenders([(.audio, 111)])
        hub.attach(senders)
        senders.setSending([.audio])
        let wake = WakeEvent()
        senders.setWake(wake)
        let outlet = RecordingOutlet()
        senders.setOutlet(outlet)
        hub.send(MediaHubTests.batch(bytes: 80), kind: .audio, rtpTimestamp: 1, isKeyframe: true)
        #expect(outlet.taken.withLock { $0.isEmpty })
        #expect(Self.wasSignalled(wake))
        #expect(try MediaHubTests.drain(senders).count == 1)
    }
}
