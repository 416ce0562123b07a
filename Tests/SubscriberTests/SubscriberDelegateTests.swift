import MediaTypes
import Testing
@testable import Subscriber

/// The delegate hears what `onEvent` hears, under OpenTok's method names.
@Suite("Subscriber delegate")
struct SubscriberDelegateTests {
    final class Recorder: SubscriberDelegate {
        let calls = PThreadLocked<[String]>([])
        func subscriber(_ subscriber: Subscriber, videoDisabledReason reason: VideoChangeReason) {
            calls.withLock { $0.append("videoDisabled \(reason.rawValue)") }
        }
        func subscriber(_ subscriber: Subscriber, videoEnabledReason reason: VideoChangeReason) {
            calls.withLock { $0.append("videoEnabled \(reason.rawValue)") }
        }
        func subscriberVideoDisableWarning(_ subscriber: Subscriber) { calls.withLock { $0.append("warning") } }
        func subscriber(_ subscriber: Subscriber, captionReceived text: String, isFinal: Bool) {
            calls.withLock { $0.append("caption \(text) \(isFinal)") }
        }
    }

    @Test("each event reaches the delegate's method for it, after the closure; none once the delegate is gone")
    func delegateHearsEvents() throws {
        let closure = PThreadLocked<[String]>([])
        // Never started: nothing connects; the events below are the ones said without the network.
        let subscriber = try Subscriber(endpoint: "http://127.0.0.1:1/whep", token: nil, streamId: "s1", video: nil, audio: nil,
                                        logger: .init(label: "test")) { event in closure.withLock { $0.append("\(event)") } }
        #expect(subscriber.streamId == "s1")
        var recorder: Recorder? = Recorder()
        subscriber.delegate = recorder
        subscriber.subscribeToVideo = false
        subscriber.routerSaid(.videoDisableWarning)
        subscriber.routerSaid(.captionReceived(text: "not wanted", isFinal: true))   // subscribeToCaptions is off
        subscriber.subscribeToCaptions = true
        subscriber.routerSaid(.captionReceived(text: "hello", isFinal: true))
        subscriber.subscribeToVideo = true
        #expect(recorder?.calls.withLock { $0 } == [
            "videoDisabled subscribeToVideo", "warning", "caption hello true", "videoEnabled subscribeToVideo",
        ])
        #expect(closure.withLock { $0.count } == 4)
        recorder = nil   // held weakly: gone, and nothing is called
        subscriber.subscribeToVideo = false
        #expect(closure.withLock { $0.count } == 5)
    }
}
