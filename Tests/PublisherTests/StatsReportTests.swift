@testable import Publisher
import Testing

@Suite("W3C-style stats report")
struct StatsReportTests {
    static func stream(_ kind: MediaKind, ssrc: UInt32) -> StreamStats {
        StreamStats(kind: kind, codec: kind == .video ? "VP8" : "opus", ssrc: ssrc, framesEncoded: 90,
                    keyframesEncoded: 2, packetsSent: 300, bytesSent: 250_000, packetsRetransmitted: 3, bitrate: 600_000,
                    frameRate: 30, targetBitrate: kind == .video ? 800_000 : nil, packetsLost: 4, fractionLost: 0.01,
                    jitter: 0.002, rtt: 0.015, nackReceived: 1, pliReceived: 1, firReceived: 0)
    }

    @Test func eachStreamGetsOutboundAndRemoteInboundEntriesLinkedByID() throws {
        let viewer = ViewerStats(id: "v1", state: "connected", selectedPair: "10.0.0.1:1 -> 10.0.0.2:2",
                                 video: Self.stream(.video, ssrc: 7), audio: nil, age: 3)
        let stats = PublisherStats(state: .serving, video: nil, audio: nil, selectedPair: nil, packetsDroppedByPacer: 0,
                                   connections: 0, framesEncoded: 90, framesNotWatched: 0, framesDropped: 0, framesDroppedEncoderBusy: 0, videoDeviceLost: false,
                                   frameRate: 30, viewers: [viewer])
        let report = stats.rtcStatsReport(timestamp: 1000)
        #expect(report.map(\.type) == ["outbound-rtp", "remote-inbound-rtp", "candidate-pair"])
        let out = report[0], remote = report[1]
        #expect(out.remoteId == remote.id && remote.localId == out.id)
        #expect(out.ssrc == 7 && out.mimeType == "video/VP8" && out.packetsSent == 300 && out.keyFramesEncoded == 2)
        #expect(out.targetBitrate == 800_000 && out.nackCount == 1 && out.pliCount == 1)
        #expect(remote.packetsLost == 4 && remote.roundTripTime == 0.015 && remote.jitter == 0.002)
        #expect(report[2].state == "succeeded" && report[2].timestamp == 1000)
    }

    @Test func audioHasNoVideoOnlyMembers() {
        let stats = PublisherStats(state: .connected, video: nil, audio: Self.stream(.audio, ssrc: 9),
                                   selectedPair: "a -> b", packetsDroppedByPacer: 0, connections: 1, framesEncoded: 0,
                                   framesNotWatched: 0, framesDropped: 0, framesDroppedEncoderBusy: 0, videoDeviceLost: false, frameRate: 0, viewers: [])
        let out = stats.rtcStatsReport(timestamp: 0)[0]
        #expect(out.kind == "audio" && out.framesEncoded == nil && out.pliCount == nil && out.packetsSent == 300)
    }
}
