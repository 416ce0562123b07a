import MediaTypes
@testable import Publisher
import RTP
import SDP
import Testing

/// preferredResolution: which simulcast layer each receiver gets, and when it switches.
@Suite("Choosing a simulcast layer (SpatialLayerChoice)")
struct SpatialLayerChoiceTests {
    static let small = FrameSize(width: 320, height: 180), large = FrameSize(width: 640, height: 360)

    /// Two layers whose sizes the hub has learnt.
    static var known: SimulcastLayers {
        var layers = SimulcastLayers(count: 2)
        layers[0] = small
        layers[1] = large
        return layers
    }

    /// A receiver that got its first keyframe of the layer it wanted.
    static func started(_ preferred: FrameSize?) -> SpatialLayerChoice {
        var choice = SpatialLayerChoice()
        choice.preferred = preferred
        _ = choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 3000, layers: known)
        _ = choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 6000, layers: known)
        return choice
    }

    @Test func withoutAPreferenceTheLargestLayerGoes() {
        #expect(Self.started(nil).current == 1)
        // Sizes not known yet: the largest too, not the first that comes.
        var choice = SpatialLayerChoice()
        do { let admitted = choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 9000, layers: SimulcastLayers(count: 2)); #expect(admitted == nil) }
        do { let admitted = choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 12000, layers: SimulcastLayers(count: 2)); #expect(admitted != nil) }
    }

    static let preferences: [(FrameSize, UInt8)] = [
        (FrameSize(width: 320, height: 240), 0), (FrameSize(width: 640, height: 360), 1),
        (FrameSize(width: 1920, height: 1080), 1), (FrameSize(width: 100, height: 100), 0), (FrameSize(width: 640, height: 200), 0),
    ]

    @Test func theLargestLayerThatFitsOrElseTheSmallest() {
        for (preferred, layer) in Self.preferences {
            #expect(Self.started(preferred).current == layer, "\(preferred)")
            #expect(Self.started(preferred).target == layer, "\(preferred)")
        }
    }

    @Test func aSwitchWaitsForTheNewLayersKeyframeAndTheOldLayerGoesOnUntilThen() {
        var choice = Self.started(nil)
        #expect(choice.awaitedLayer == nil)
        choice.preferred = Self.small
        #expect(choice.awaitedLayer == 0)
        do { let admitted = choice.admit(layer: 0, isKeyframe: false, rtpTimestamp: 15000, layers: Self.known); #expect(admitted == nil) }   // does not follow on from layer 1
        do { let admitted = choice.admit(layer: 1, isKeyframe: false, rtpTimestamp: 18000, layers: Self.known); #expect(admitted != nil) }    // the picture goes on meanwhile
        do { let admitted = choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 21000, layers: Self.known); #expect(admitted != nil) }
        #expect(choice.current == 0 && choice.awaitedLayer == nil)
        do { let admitted = choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 24000, layers: Self.known); #expect(admitted == nil) }
        do { let admitted = choice.admit(layer: 0, isKeyframe: false, rtpTimestamp: 27000, layers: Self.known); #expect(admitted != nil) }
    }

    /// At a stream's start a layer's size may not be known yet: one that
    /// is not is taken for smaller than the known ones above it.
    @Test func aReceiverPreferringASmallPictureDoesNotStartOnTheLargeLayerWhileTheSmallOnesSizeIsUnknown() {
        var onlyLarge = SimulcastLayers(count: 2)
        onlyLarge[1] = Self.large
        var choice = SpatialLayerChoice()
        choice.preferred = Self.small
        do { let admitted = choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 0, layers: onlyLarge); #expect(admitted == nil) }
        do { let admitted = choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 0, layers: Self.known); #expect(admitted != nil) }
        #expect(choice.current == 0)
    }

    /// The new layer's keyframe may be the same picture as the old layer's
    /// last frame (a source sends a frame's layers one after the other), or
    /// older (each layer has its own jitter buffer at the router): its time
    /// is moved on so that time never goes back for the receiver, and moved
    /// back at the next switch that needs no move.
    @Test func aSwitchNeverGoesBackInTime() {
        var choice = Self.started(nil)
        #expect(choice.admit(layer: 1, isKeyframe: false, rtpTimestamp: 9000, layers: Self.known) == 9000)
        choice.preferred = Self.small
        #expect(choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 9000, layers: Self.known) == 9001)
        #expect(choice.current == 0 && choice.awaitedLayer == nil)
        #expect(choice.admit(layer: 0, isKeyframe: false, rtpTimestamp: 12000, layers: Self.known) == 12001)
        choice.preferred = nil
        #expect(choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 9000, layers: Self.known) == 12002)   // older still
        #expect(choice.admit(layer: 1, isKeyframe: false, rtpTimestamp: 15000, layers: Self.known) == 18002)
        choice.preferred = Self.small
        #expect(choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 21000, layers: Self.known) == 21000)
    }

    /// What a receiver is sent may change (audio on or off) and video then
    /// starts again at a keyframe, on the same stream: its time goes on.
    @Test func timeDoesNotGoBackAfterARestartOnTheSameStream() {
        var choice = Self.started(nil)
        #expect(choice.admit(layer: 1, isKeyframe: false, rtpTimestamp: 9000, layers: Self.known) == 9000)
        choice.restart()
        #expect(choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 9000, layers: Self.known) == 9001)
    }

    /// `known`, each layer last heard at the given second (nil: never). Each layer is heard steadily from the earliest of the two seconds to its own,
    /// as a layer that sends is (no frame at all for 2 s is a pause of the whole stream).
    static func heard(_ small: Double?, _ large: Double?) -> SimulcastLayers {
        var layers = known
        let times = [(UInt8(0), small), (1, large)].compactMap { layer, second in second.map { (layer, $0) } }
        guard let start = times.map(\.1).min() else { return layers }
        func at(_ second: Double) -> MonotonicTimestamp { MonotonicTimestamp(nanoseconds: Int64(second * 1e9)) }
        for (layer, last) in times {
            var second = start
            while second < last {
                layers.heard(layer, at: at(second))
                second += 1
            }
            layers.heard(layer, at: at(last))
        }
        return layers
    }

    /// A browser pauses a layer when its bandwidth drops: its receivers move
    /// to one still sending, and back when it comes back.
    @Test func aReceiverOfALayerThatStopsMovesToOneStillSendingAndBack() {
        var thumbnail = Self.started(Self.small)
        var full = Self.started(nil)
        #expect(thumbnail.current == 0 && full.current == 1)
        // The small layer silent for 1.5 s: still counted as sending.
        #expect(thumbnail.admit(layer: 1, isKeyframe: false, rtpTimestamp: 9000, layers: Self.heard(1, 2.5)) == nil)
        #expect(thumbnail.awaitedLayer == nil)
        // Silent for 2.5 s: the large layer is the only one, and its next keyframe is awaited.
        #expect(thumbnail.admit(layer: 1, isKeyframe: false, rtpTimestamp: 12000, layers: Self.heard(1, 3.5)) == nil)
        #expect(thumbnail.awaitedLayer == 1)
        #expect(thumbnail.admit(layer: 1, isKeyframe: true, rtpTimestamp: 15000, layers: Self.heard(1, 3.6)) != nil)
        #expect(thumbnail.current == 1)
        // The small layer comes back: its keyframe takes the receiver back.
        #expect(thumbnail.admit(layer: 0, isKeyframe: false, rtpTimestamp: 18000, layers: Self.heard(3.7, 3.7)) == nil)
        #expect(thumbnail.awaitedLayer == 0)
        #expect(thumbnail.admit(layer: 1, isKeyframe: false, rtpTimestamp: 18000, layers: Self.heard(3.7, 3.7)) != nil)
        #expect(thumbnail.admit(layer: 0, isKeyframe: true, rtpTimestamp: 21000, layers: Self.heard(3.8, 3.7)) != nil)
        #expect(thumbnail.current == 0)
        // The large layer stops: a receiver with no preference takes the largest still sending.
        #expect(full.admit(layer: 0, isKeyframe: true, rtpTimestamp: 9000, layers: Self.heard(3.5, 1)) != nil)
        #expect(full.current == 0)
    }

    /// A publisher may announce more layers than it sends: once the stream
    /// is older than the silence, a layer never heard is no layer to wait for.
    @Test func aLayerAnnouncedButNeverSentIsLeftAfterTheSilence() {
        var onlyLarge = SimulcastLayers(count: 2)
        onlyLarge[1] = Self.large
        var choice = SpatialLayerChoice()
        choice.preferred = Self.small
        /// The large layer's frame at `second`, the stream having started at 1 s.
        func largeHeard(at second: Double) -> SimulcastLayers {
            onlyLarge.heard(1, at: MonotonicTimestamp(nanoseconds: Int64(second * 1e9)))
            return onlyLarge
        }
        // The stream's first 2 s: the small layer may still start.
        #expect(choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 0, layers: largeHeard(at: 1)) == nil)
        #expect(choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 3000, layers: largeHeard(at: 2.9)) == nil)
        #expect(choice.awaitedLayer == 0)
        // Then the large layer is what there is.
        #expect(choice.admit(layer: 1, isKeyframe: true, rtpTimestamp: 6000, layers: largeHeard(at: 3.1)) != nil)
        #expect(choice.current == 1)
    }

    /// After the whole stream paused (video off, an outage), its layers start
    /// again one after the other: the first back is not taken for the only one.
    @Test func afterAPauseOfTheWholeStreamNoLayerIsTakenForStopped() {
        var layers = Self.heard(1, 1)
        #expect(layers.isSending(0) && layers.isSending(1))
        layers.heard(1, at: MonotonicTimestamp(nanoseconds: 10_000_000_000))   // 9 s later, the large layer first
        #expect(layers.isSending(0) && layers.isSending(1))
        layers.heard(1, at: MonotonicTimestamp(nanoseconds: 11_500_000_000))
        layers.heard(1, at: MonotonicTimestamp(nanoseconds: 12_500_000_000))   // the small one still silent
        #expect(!layers.isSending(0) && layers.isSending(1))
    }

    /// A source that lists its layers large first: once every size is known, a
    /// receiver that prefers nothing gets the largest picture, not the last layer.
    @Test func withoutAPreferenceTheLargestPictureGoesWhateverTheOrder() {
        var largeFirst = SimulcastLayers(count: 2)
        largeFirst[0] = Self.large
        largeFirst[1] = Self.small
        var choice = SpatialLayerChoice()
        #expect(choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 3000, layers: largeFirst) != nil)
        #expect(choice.current == 0 && choice.awaitedLayer == nil)
        choice.preferred = FrameSize(width: 320, height: 240)
        #expect(choice.target == 1)
    }

    @Test func aStreamWithoutLayersGoesWholeFromItsFirstKeyframe() {
        var choice = SpatialLayerChoice()
        choice.preferred = Self.small   // nothing to choose from: layer 0 regardless
        var one = SimulcastLayers()
        do { let admitted = choice.admit(layer: 0, isKeyframe: false, rtpTimestamp: 30000, layers: one); #expect(admitted == nil) }
        one[0] = Self.large
        do { let admitted = choice.admit(layer: 0, isKeyframe: true, rtpTimestamp: 33000, layers: one); #expect(admitted != nil) }
        do { let admitted = choice.admit(layer: 0, isKeyframe: false, rtpTimestamp: 36000, layers: one); #expect(admitted != nil) }
        #expect(choice.awaitedLayer == nil)
        choice.restart()
        do { let admitted = choice.admit(layer: 0, isKeyframe: false, rtpTimestamp: 39000, layers: one); #expect(admitted == nil) }
    }
}

@Suite("Simulcast through the send path and the router")
struct SimulcastForwardingTests {
    static let videoPT: UInt8 = 100
    static let smallSSRC: UInt32 = 0x1111, largeSSRC: UInt32 = 0x2222

    static func frame(ssrc: UInt32, seq: UInt16, ts: UInt32, keyframe: Bool, size: FrameSize) -> [UInt8] {
        var out: [UInt8] = []
        RTPHeader(payloadType: videoPT, sequenceNumber: seq, timestamp: ts, ssrc: ssrc, marker: true).write(to: &out)
        return out + ForwardedFramesTests.vp8Payload(first: true, keyframe: keyframe, width: size.width, height: size.height,
                                                     fill: UInt8(truncatingIfNeeded: ssrc))
    }

    /// One capture time's frames: the small layer's, then the large one's, as the publisher sends them.
    static func both(_ n: Int, keyframe: Bool) -> [[UInt8]] {
        [frame(ssrc: smallSSRC, seq: UInt16(100 + n), ts: UInt32(n * 3000), keyframe: keyframe,
               size: SpatialLayerChoiceTests.small),
         frame(ssrc: largeSSRC, seq: UInt16(500 + n), ts: UInt32(n * 3000), keyframe: keyframe,
               size: SpatialLayerChoiceTests.large)]
    }

    struct Rig {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000, simulcastLayers: 2)
        let frames: ForwardedFrames
        let dimensions = PThreadLocked<[(Int, Int)]>([])

        /// A publisher that names its layers' SSRCs in its offer (`a=ssrc-group:SIM`), or,
        /// with `rids`, one that names each packet's layer by RID (as browsers do).
        init(rids: [String] = []) {
            let seen = dimensions
            frames = ForwardedFrames(hub: hub, codecs: .init(audioPayloadType: nil, videoPayloadType: SimulcastForwardingTests.videoPT,
                                                             videoCodec: .vp8,
                                                             simulcastSSRCs: rids.isEmpty ? [SimulcastForwardingTests.smallSSRC,
                                                                                             SimulcastForwardingTests.largeSSRC] : [],
                                                             simulcastRIDs: rids,
                                                             streamIDExtensionID: rids.isEmpty ? nil : RIDSimulcastTests.ridExtension),
                                     onDimensions: { w, h in seen.withLock { $0.append((w, h)) } })
        }

        func subscriber(preferring size: FrameSize?) -> MediaSenders {
            let senders = hub.makeSenders([(.video, 96)])
            hub.attach(senders)
            senders.setSending([.video])
            senders.setPreferredResolution(size)
            return senders
        }

        func feed(_ packets: [[UInt8]], now: Double = 10) -> [RTCPPacket] { ForwardedFramesTests.feed(frames, packets, now: now) }
    }

    /// The fill byte of each packet's payload tells which layer it came from.
    static func layers(_ packets: [RTPPacket]) -> [UInt32] {
        packets.map { UInt32($0.payload.last!) == (smallSSRC & 0xff) ? smallSSRC : largeSSRC }
    }

    @Test func eachSubscriberGetsOneLayerOnItsOwnStreamAndTheStreamsSizeIsTheLargest() throws {
        let rig = Rig()
        let full = rig.subscriber(preferring: nil)
        let thumbnail = rig.subscriber(preferring: FrameSize(width: 320, height: 240))
        _ = rig.feed(Self.both(0, keyframe: true) + Self.both(1, keyframe: false) + Self.both(2, keyframe: false))
        let toFull = try MediaHubTests.drain(full), toThumbnail = try MediaHubTests.drain(thumbnail)
        #expect(Self.layers(toFull) == [Self.largeSSRC, Self.largeSSRC, Self.largeSSRC])
        #expect(Self.layers(toThumbnail) == [Self.smallSSRC, Self.smallSSRC, Self.smallSSRC])
        for sent in [toFull, toThumbnail] {
            #expect(Set(sent.map(\.header.ssrc)).count == 1)
            #expect(zip(sent, sent.dropFirst()).allSatisfy { $1.header.sequenceNumber == $0.header.sequenceNumber &+ 1 })
        }
        // A frame's two layers share one RTP time: the same pictures at the same times.
        #expect(toFull.map(\.header.timestamp) == toThumbnail.map(\.header.timestamp))
        #expect(rig.dimensions.withLock { $0.map(\.0) } == [640])
        // Each layer is received (and reported) on its own.
        guard case .receiverReport(_, let blocks)? = rig.frames.receiverReports().first else {
            Issue.record("no receiver report")
            return
        }
        #expect(Set(blocks.map(\.ssrc)) == [Self.smallSSRC, Self.largeSSRC])
    }

    @Test func aSubscriberThatChangesItsPreferenceSwitchesAtTheOtherLayersKeyframe() async throws {
        let rig = Rig()
        let subscriber = rig.subscriber(preferring: nil)
        _ = rig.feed(Self.both(0, keyframe: true) + Self.both(1, keyframe: false))
        subscriber.setPreferredResolution(FrameSize(width: 320, height: 180))
        // The keyframe it needs is asked of the publisher: the small layer's only (the
        // large one's subscribers have nothing to gain from one).
        try await Task.sleep(for: MediaHub.keyframeSpacing + .milliseconds(100))
        let feedback = rig.feed(Self.both(2, keyframe: false), now: 11)
        let asked = feedback.compactMap { if case .pictureLossIndication(_, let media) = $0 { media } else { nil } }
        #expect(asked == [Self.smallSSRC])
        _ = rig.feed(Self.both(3, keyframe: true) + Self.both(4, keyframe: false), now: 12)
        let sent = try MediaHubTests.drain(subscriber)
        #expect(Self.layers(sent) == [Self.largeSSRC, Self.largeSSRC, Self.largeSSRC, Self.smallSSRC, Self.smallSSRC])
        #expect(zip(sent, sent.dropFirst()).allSatisfy { $1.header.sequenceNumber == $0.header.sequenceNumber &+ 1 })
    }

    @Test func aJoiningSubscriberAsksForTheKeyframeOfItsOwnLayerOnly() async throws {
        let rig = Rig()
        _ = rig.subscriber(preferring: nil)
        _ = rig.feed(Self.both(0, keyframe: true) + Self.both(1, keyframe: false))
        _ = rig.subscriber(preferring: FrameSize(width: 320, height: 240))
        try await Task.sleep(for: MediaHub.keyframeSpacing + .milliseconds(100))
        let feedback = rig.feed(Self.both(2, keyframe: false), now: 11)
        let asked = feedback.compactMap { if case .pictureLossIndication(_, let media) = $0 { media } else { nil } }
        #expect(asked == [Self.smallSSRC])
    }

    /// A publisher that announced two layers but sends only the large one:
    /// a subscriber preferring a small picture gets the large one once the
    /// small layer's silence says it is not coming, asked with a PLI of the
    /// large layer, instead of waiting for ever. (Waits the silence out: 2 s.)
    @Test func aSubscriberOfALayerThatNeverComesGetsTheOneThatDoes() async throws {
        let rig = Rig()
        let thumbnail = rig.subscriber(preferring: FrameSize(width: 320, height: 240))
        func large(_ n: Int, keyframe: Bool) -> [UInt8] {
            Self.frame(ssrc: Self.largeSSRC, seq: UInt16(500 + n), ts: UInt32(n * 3000), keyframe: keyframe,
                       size: SpatialLayerChoiceTests.large)
        }
        _ = rig.feed([large(0, keyframe: true), large(1, keyframe: false)])
        #expect(try MediaHubTests.drain(thumbnail).isEmpty)
        // The large layer goes on, a frame every 0.5 s, until the small one's silence has lasted.
        var feedback: [RTCPPacket] = []
        for n in 2...6 {
            try await Task.sleep(for: .milliseconds(500))
            feedback += rig.feed([large(n, keyframe: false)], now: 10 + Double(n) / 2)
        }
        #expect(try MediaHubTests.drain(thumbnail).isEmpty)
        // Asked of the large layer (again every 0.5 s while the keyframe does not come).
        let asked = feedback.compactMap { if case .pictureLossIndication(_, let media) = $0 { media } else { nil } }
        #expect(!asked.isEmpty && asked.allSatisfy { $0 == Self.largeSSRC })
        _ = rig.feed([large(7, keyframe: true), large(8, keyframe: false)], now: 13.6)
        #expect(Self.layers(try MediaHubTests.drain(thumbnail)) == [Self.largeSSRC, Self.largeSSRC])
    }

    /// A viewer of a simulcasting publisher knows the layers from the start:
    /// its first keyframe request is for the large layer it will get.
    @Test func aViewerOfASimulcastingPublisherAsksForTheLayerItWillGet() {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000, simulcastLayers: 2)
        let viewer = hub.makeSenders([(.video, 96)])
        hub.attach(viewer)
        viewer.setSending([.video])
        let t0 = MonotonicTimestamp.now()
        #expect(hub.planVideoFrame(now: t0)?.keyframeLayers == KeyframeSchedule.allLayers)   // the hub's own first
        #expect(hub.planVideoFrame(now: t0 + .seconds(1))?.keyframeLayers == 0b10)
    }

    /// camagent's publisher sends a frame's large layer first: a switch down
    /// happens at the small layer's keyframe of the same picture, one tick
    /// later on the subscriber's clock, and its time never goes back.
    @Test func aSwitchDownWhenTheLargeLayerComesFirstKeepsTimeGoingForward() throws {
        let rig = Rig()
        let subscriber = rig.subscriber(preferring: nil)
        _ = rig.feed(Self.both(0, keyframe: true).reversed() + Self.both(1, keyframe: false).reversed())
        subscriber.setPreferredResolution(FrameSize(width: 320, height: 180))
        _ = rig.feed(Self.both(2, keyframe: true).reversed() + Self.both(3, keyframe: false).reversed(), now: 11)
        let sent = try MediaHubTests.drain(subscriber)
        #expect(Self.layers(sent) == [Self.largeSSRC, Self.largeSSRC, Self.largeSSRC, Self.smallSSRC, Self.smallSSRC])
        let times = sent.map(\.header.timestamp)
        #expect(zip(times, times.dropFirst()).allSatisfy { Int32(bitPattern: $1 &- $0) > 0 }, "\(times)")
        #expect(times[3] == times[2] &+ 1)
    }

    /// The router's REMB asks for the largest layer's room: a subscriber of
    /// the small layer, with little room, does not hold everyone's picture down.
    @Test func aSubscriberOfTheSmallLayerDoesNotHoldTheBitrateDown() {
        let rig = Rig()
        let full = rig.subscriber(preferring: nil)
        let thumbnail = rig.subscriber(preferring: FrameSize(width: 320, height: 180))
        _ = rig.feed(Self.both(0, keyframe: true))
        _ = thumbnail.handle([.estimatedMaximumBitrate(sender: 1, bitsPerSecond: 150_000, ssrcs: [])], arrivedAtCompactNTP: 0)
        _ = full.handle([.estimatedMaximumBitrate(sender: 1, bitsPerSecond: 800_000, ssrcs: [])], arrivedAtCompactNTP: 0)
        #expect(rig.hub.planVideoFrame(now: .now())?.bitrate == 800_000)
    }

    /// With no subscriber of the largest layer, the smallest room among
    /// the others' is the bitrate: thumbnails on poor links still hold it down.
    @Test func withOnlySmallLayerSubscribersTheirRoomIsTheBitrate() {
        let rig = Rig()
        let thumbnail = rig.subscriber(preferring: FrameSize(width: 320, height: 180))
        _ = rig.feed(Self.both(0, keyframe: true))
        _ = thumbnail.handle([.estimatedMaximumBitrate(sender: 1, bitsPerSecond: 150_000, ssrcs: [])], arrivedAtCompactNTP: 0)
        #expect(rig.hub.planVideoFrame(now: .now())?.bitrate == 150_000)
    }

    /// A simulcasting publisher gets a report block per layer in each
    /// receiver report; only the largest layer's steers the bitrate, once.
    @Test func onlyTheLargestLayersLossSteersThePublishersBitrate() {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000, simulcastLayers: 2)
        let whip = hub.makeSenders([(.video, 96)], simulcastLayers: 2)
        let ssrcs = whip.simulcastSSRCs
        func report(_ ssrc: UInt32, lost: UInt8) -> ReceptionReport {
            ReceptionReport(ssrc: ssrc, fractionLost: lost, cumulativeLost: 0, highestSequence: 1, jitter: 0,
                            lastSenderReport: 0, delaySinceLastSenderReport: 0)
        }
        _ = whip.handle([.receiverReport(ssrc: 1, reports: [report(ssrcs[0], lost: 128)])], arrivedAtCompactNTP: 0)
        #expect(whip.withStateForTesting { $0.bitrate.target } == 1_000_000)
        _ = whip.handle([.receiverReport(ssrc: 1, reports: [report(ssrcs[1], lost: 128)])], arrivedAtCompactNTP: 0)
        #expect(whip.withStateForTesting { $0.bitrate.target } == 750_000)
    }

    @Test func aPacketOnAnSSRCOutsideTheGroupIsDropped() {
        let rig = Rig()
        _ = rig.subscriber(preferring: nil)
        _ = rig.feed([Self.frame(ssrc: 0x3333, seq: 1, ts: 0, keyframe: true, size: SpatialLayerChoiceTests.large)])
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 1)
        #expect(rig.frames.packetsForwarded.load(ordering: .relaxed) == 0)
    }

    /// A simulcasting publisher's WHIP connection: each layer on its own
    /// stream, each waiting for its own keyframe; the offer names them in a SIM group.
    @Test func aSimulcastingPublisherSendsEachLayerOnItsOwnSSRCAndOffersThemAsAGroup() throws {
        let hub = MediaHub(videoBitrateCeiling: 1_000_000, simulcastLayers: 2)
        let whip = hub.makeSenders([(.audio, 111), (.video, 96)], simulcastLayers: 2)
        hub.attach(whip)
        whip.setSending([.audio, .video])
        let ssrcs = whip.simulcastSSRCs
        #expect(ssrcs.count == 2 && ssrcs[1] == whip.ssrcs[.video])
        var batch = PayloadBatch()
        batch.append(payload: [1, 2, 3][...])
        #expect(hub.send(batch, kind: .video, rtpTimestamp: 0, isKeyframe: false, spatialLayer: 0) == 0)
        #expect(hub.send(batch, kind: .video, rtpTimestamp: 0, isKeyframe: true, spatialLayer: 1) == 1)
        #expect(hub.send(batch, kind: .video, rtpTimestamp: 0, isKeyframe: true, spatialLayer: 0) == 1)
        #expect(hub.send(batch, kind: .video, rtpTimestamp: 3000, isKeyframe: false, spatialLayer: 0) == 1)
        let sent = try MediaHubTests.drain(whip)
        #expect(sent.map(\.header.ssrc) == [ssrcs[1], ssrcs[0], ssrcs[0]])

        // A PLI (from the router) names one layer's SSRC: a keyframe of that layer only.
        #expect(hub.planVideoFrame(now: .now())?.keyframeLayers == KeyframeSchedule.allLayers)   // the connection's first
        let later = MonotonicTimestamp.now() + .seconds(1)
        _ = whip.withStateForTesting { $0.handle(.pictureLossIndication(sender: 1, media: ssrcs[0]), arrivedAtCompactNTP: 0) }
        #expect(hub.planVideoFrame(now: later)?.keyframeLayers == 0b01)
        _ = whip.withStateForTesting { $0.handle(.pictureLossIndication(sender: 1, media: ssrcs[1]), arrivedAtCompactNTP: 0) }
        #expect(hub.planVideoFrame(now: later + .seconds(1))?.keyframeLayers == 0b10)

        var offer = PublisherOffer(iceUfrag: "ufrag", icePwd: "password-password", fingerprint: "AB:CD", candidates: [],
                                   audio: [.opus], video: [.vp8], audioSSRC: 7, videoSSRC: ssrcs[1], cname: "c")
        offer.videoSimulcastSSRCs = ssrcs
        let parsed = try ViewerOffer(try SessionDescription(parsing: offer.sessionDescription(sessionID: 1).text))
        #expect(parsed.sections.map(\.simulcastSSRCs) == [[], ssrcs])
    }
}

/// Simulcast as browsers send it: layers named by RID (RFC 8853), in the SDP
/// (`a=rid`, `a=simulcast`) and in each packet's header extension, SSRCs learnt.
@Suite("Simulcast by RID (browsers)")
struct RIDSimulcastTests {
    static let ridExtension: UInt8 = 10

    /// A frame of one layer, its RTP header naming `rid` (nil: no extension,
    /// as a browser sends once our receiver reports reached it).
    static func frame(ssrc: UInt32, rid: String?, seq: UInt16, ts: UInt32, keyframe: Bool, size: FrameSize) -> [UInt8] {
        var header = RTPHeader(payloadType: SimulcastForwardingTests.videoPT, sequenceNumber: seq, timestamp: ts, ssrc: ssrc,
                               marker: true)
        if let rid {
            let value = Array(rid.utf8)
            var data: [UInt8] = [Self.ridExtension << 4 | UInt8(value.count - 1)] + value
            while data.count % 4 != 0 { data.append(0) }
            header.extensionProfile = 0xBEDE
            header.extensionData = data
        }
        var out: [UInt8] = []
        header.write(to: &out)
        return out + ForwardedFramesTests.vp8Payload(first: true, keyframe: keyframe, width: size.width, height: size.height,
                                                     fill: UInt8(truncatingIfNeeded: ssrc))
    }

    static let twoRIDs = "a=rid:half send\r\na=rid:full send\r\na=simulcast:send half;full\r\n"

    /// Chromium's offer for a camera sent as two RIDs, small first (the session page's
    /// `&simulcast=1`), or with other `simulcastLines`.
    static func offer(_ simulcastLines: String = twoRIDs) -> String { offerHead + simulcastLines }

    static let offerHead = """
        v=0\r
        o=- 1 2 IN IP4 127.0.0.1\r
        s=-\r
        t=0 0\r
        a=group:BUNDLE 0\r
        m=video 9 UDP/TLS/RTP/SAVPF 96\r
        c=IN IP4 0.0.0.0\r
        a=ice-ufrag:abcd\r
        a=ice-pwd:abcdefghijklmnopqrstuv\r
        a=fingerprint:sha-256 AB:CD\r
        a=setup:actpass\r
        a=mid:0\r
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id\r
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id\r
        a=sendonly\r
        a=rtcp-mux\r
        a=rtpmap:96 VP8/90000\r
        a=rtcp-fb:96 nack pli\r

        """

    @Test func theOfferNamesItsRIDsAndTheAnswerTakesThem() throws {
        let offer = try ViewerOffer(try SessionDescription(parsing: Self.offer()))
        let video = offer.sections[0]
        #expect(video.simulcastRIDs == ["half", "full"])
        #expect(video.streamIDExtensionID == 10 && video.midExtensionID == 4)
        #expect(video.simulcastSSRCs.isEmpty)

        let accepted = try #require(offer.accepting("video", codec: .vp8, receiving: true))
        let answer = ViewerAnswer(iceUfrag: "u", icePwd: "p", fingerprint: "EF", setup: "passive", candidates: [],
                                  tracks: [.init(sectionIndex: accepted.index, codec: accepted.codec, ssrc: 0,
                                                 receivedRIDs: video.simulcastRIDs, streamIDExtensionID: 10, midExtensionID: 4)],
                                  cname: "c", streamID: "s", direction: "recvonly")
        let text = answer.sessionDescription(answering: offer, sessionID: 1).text
        for line in ["a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid", "a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id",
                     "a=rid:half recv", "a=rid:full recv", "a=simulcast:recv half;full", "a=recvonly"] {
            #expect(text.contains(line + "\r\n"), "\(line)")
        }
        // RTX's repaired stream is not taken: the router negotiates no RTX.
        #expect(!text.contains("repaired-rtp-stream-id"))
    }

    /// RFC 8853's list: streams split by ";", alternatives by ",", a paused one
    /// marked "~"; only RIDs that an `a=rid:… send` line names count.
    @Test func theSimulcastListsPausedAndAlternativeStreamsAreRead() throws {
        func rids(_ lines: String) throws -> [String] {
            try ViewerOffer(try SessionDescription(parsing: Self.offer(lines))).sections[0].simulcastRIDs
        }
        #expect(try rids("a=rid:a send\r\na=rid:b send\r\na=rid:c send\r\na=simulcast:send ~a;b,c;c\r\n") == ["a", "b", "c"])
        #expect(try rids("a=rid:a send\r\na=rid:b send\r\na=simulcast:send a;a;b\r\n") == ["a", "b"])   // named twice: one
        #expect(try rids("a=rid:a send\r\na=rid:b recv\r\na=simulcast:send a;b\r\n") == [])   // one layer is no simulcast
        #expect(try rids("a=rid:a send\r\na=rid:b send\r\na=simulcast:recv a;b\r\n") == [])
        #expect(try rids("") == [])
    }

    /// Each layer's SSRC is learnt from the RID its first packets carry; later
    /// packets need not carry it; a packet of an unknown SSRC naming no RID
    /// is dropped; each subscriber gets the layer that fits it.
    @Test func layersAreLearntFromTheRIDsTheirPacketsCarry() throws {
        let rig = SimulcastForwardingTests.Rig(rids: ["half", "full"])
        let full = rig.subscriber(preferring: nil)
        let thumbnail = rig.subscriber(preferring: FrameSize(width: 320, height: 240))
        let small = SpatialLayerChoiceTests.small, large = SpatialLayerChoiceTests.large
        let (smallSSRC, largeSSRC, strangerSSRC): (UInt32, UInt32, UInt32) = (0x3131, 0x4242, 0x5353)
        _ = rig.feed([
            Self.frame(ssrc: strangerSSRC, rid: nil, seq: 1, ts: 0, keyframe: true, size: large),
            Self.frame(ssrc: smallSSRC, rid: "half", seq: 100, ts: 0, keyframe: true, size: small),
            Self.frame(ssrc: largeSSRC, rid: "full", seq: 500, ts: 0, keyframe: true, size: large),
            Self.frame(ssrc: smallSSRC, rid: nil, seq: 101, ts: 3000, keyframe: false, size: small),
            Self.frame(ssrc: largeSSRC, rid: nil, seq: 501, ts: 3000, keyframe: false, size: large),
            Self.frame(ssrc: strangerSSRC, rid: "other", seq: 2, ts: 3000, keyframe: false, size: large),
        ])
        func layers(_ packets: [RTPPacket]) -> [UInt8] { packets.map { $0.payload.last! } }
        #expect(layers(try MediaHubTests.drain(full)) == [0x42, 0x42])
        let before = try MediaHubTests.drain(thumbnail)
        #expect(layers(before) == [0x31, 0x31])
        #expect(rig.dimensions.withLock { $0.map(\.0) } == [640])   // the stream's size: the full layer's
        #expect(rig.frames.packetsDropped.load(ordering: .relaxed) == 2)
        // A layer that starts again on a new SSRC (named by its RID) replaces the old one.
        let newSmallSSRC: UInt32 = 0x6161
        _ = rig.feed([Self.frame(ssrc: newSmallSSRC, rid: "half", seq: 9000, ts: 6000, keyframe: true, size: small),
                      Self.frame(ssrc: newSmallSSRC, rid: nil, seq: 9001, ts: 9000, keyframe: false, size: small)])
        let sent = try MediaHubTests.drain(thumbnail)
        #expect(layers(sent) == [0x61, 0x61])
        // On the publisher's RTP clock as before (its time near the last frame's): the same pace.
        let last = try #require(before.last?.header.timestamp)
        #expect(sent.map(\.header.timestamp) == [last &+ 3000, last &+ 6000])
        guard case .receiverReport(_, let blocks)? = rig.frames.receiverReports().first else {
            Issue.record("no receiver report")
            return
        }
        #expect(Set(blocks.map(\.ssrc)) == [newSmallSSRC, largeSSRC])
    }
}
