import Foundation
import Logging
import MediaTypes
import Publisher
import Subscriber
import Testing
import VideoSources
@testable import WHIP

/// A stop asked while the first WHIP or WHEP exchange is stalled ends it at
/// once, instead of after the client's 120 s timeout: `Publisher.unpublish()`
/// from another thread makes `publish()` throw `unpublished`, and
/// `Subscriber.stop()` returns with the subscriber stopped. (The CLI's Ctrl-C
/// goes through these: test_cli.py.)
@Suite("A stop while the first exchange is under way")
struct StopWhileConnectingTests {
    static func publisher(port: Int) throws -> (Publisher, TestPatternCapture) {
        var settings = PublisherSettings()
        settings.audioTrack = false
        let camera = TestPatternCapture(size: FrameSize(width: 160, height: 120), framesPerSecond: 10,
                                        logger: Logger(label: "test"))
        let client = try WHIPClient(endpoint: "http://127.0.0.1:\(port)/whip", timeout: 120, logger: Logger(label: "test"))
        let publisher = try Publisher(settings: settings, videoCapture: camera, audioDevice: nil,
                                      signaling: WHIPSignaling(client: client, logger: Logger(label: "test")),
                                      logger: Logger(label: "test"))
        return (publisher, camera)
    }

    /// Several times over: `publish()` waits on the event the stop signals too, and once took
    /// the wake-up the stalled exchange needed (about one run in six of the CLI's test).
    @Test("unpublish() ends publish() while its WHIP POST is stalled", arguments: [Stall.tcpConnect, .request])
    func unpublishEndsTheWHIPExchange(stall: Stall) throws {
        for _ in 0..<(stall == .request ? 12 : 3) { try unpublishWhileStalled(stall) }
    }

    func unpublishWhileStalled(_ stall: Stall) throws {
        let server = try StallingServer(stall: stall)
        let (publisher, camera) = try Self.publisher(port: server.port)
        let outcome = PThreadLocked<PublisherError?>(nil)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do throws(PublisherError) { try publisher.publish() } catch { outcome.withLock { $0 = error } }
            ended.signal()
        }
        #expect(server.reached.wait(timeout: .now() + 30) == .success, "the publisher never got to the stall")
        // The server sees nothing of a stalled TCP connect: leave the client a moment to get into it.
        if stall == .tcpConnect { Thread.sleep(forTimeInterval: 0.3) }
        #expect(publisher.state == .connecting)
        let unpublished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            publisher.unpublish()   // joins the control thread, which is in the stalled POST
            unpublished.signal()
        }
        // Bounds for the test, not measurements: the POST would otherwise last its 120 s timeout.
        #expect(unpublished.wait(timeout: .now() + 60) == .success, "unpublish() did not return")
        #expect(ended.wait(timeout: .now() + 60) == .success, "publish() did not return after unpublish()")
        #expect(outcome.withLock { $0 } == .unpublished)
        #expect(publisher.state == .closed)
        #expect(!camera.isCaptureStarted)
    }

    @Test("publish() after unpublish() throws unpublished and starts nothing")
    func unpublishedBeforePublishing() throws {
        let server = try StallingServer(stall: .request)
        let (publisher, camera) = try Self.publisher(port: server.port)
        publisher.unpublish()
        #expect(throws: PublisherError.unpublished) { try publisher.publish() }
        #expect(!camera.isCaptureStarted)
        #expect(server.reached.wait(timeout: .now() + 1) == .timedOut, "nothing should have been posted")
    }

    @Test("stop() ends a subscriber whose WHEP POST is stalled", arguments: [Stall.tcpConnect, .request])
    func stopEndsTheWHEPExchange(stall: Stall) throws {
        let server = try StallingServer(stall: stall)
        var settings = SubscriberSettings()
        settings.httpTimeout = 120
        let subscriber = try Subscriber(endpoint: "http://127.0.0.1:\(server.port)/whep", token: nil, settings: settings,
                                        video: nil, audio: nil, logger: Logger(label: "test")) { _ in }
        subscriber.start()
        #expect(server.reached.wait(timeout: .now() + 30) == .success, "the subscriber never got to the stall")
        if stall == .tcpConnect { Thread.sleep(forTimeInterval: 0.5) }
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            subscriber.stop()
            stopped.signal()
        }
        #expect(stopped.wait(timeout: .now() + 60) == .success, "stop() did not return")
        let outcome = subscriber.wait(seconds: 5)
        #expect(outcome.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: outcome))")
        #expect(subscriber.state == .stopped)
    }
}
