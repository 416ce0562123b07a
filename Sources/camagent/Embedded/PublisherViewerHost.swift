import Foundation
import Publisher
import ViewerServer

/// Connects the embedded HTTP server (ViewerServer, which only speaks HTTP)
/// to the publisher's WHEP side. The publisher's calls block briefly
/// (sockets, a certificate fingerprint), never on the network.
struct PublisherViewerHost: WHEPSessionHost {
    let publisher: Publisher

    func createViewer(offer: String) async throws(WHEPHostError) -> (id: String, answer: String) {
        do { return try publisher.addViewer(offer: offer) } catch {
            switch error {
            case .badOffer, .noCommonCodec: throw .badOffer(error.description)
            case .tooManyViewers, .connection, .notPublishing: throw .unavailable(error.description)
            }
        }
    }

    func deleteViewer(id: String) async -> Bool { publisher.removeViewer(id: id) }

    func statsJSON() async -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(publisher.stats()) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    func metrics() async -> ViewerMetrics {
        let s = publisher.stats()
        let connected = s.viewers.filter { $0.state == "connected" }
        let rtts = connected.compactMap { $0.video?.rtt ?? $0.audio?.rtt }
        let bitrate = connected.compactMap { $0.video?.bitrate }.max() ?? s.video?.bitrate ?? 0
        return ViewerMetrics(framesEncoded: s.framesEncoded, framesDropped: s.framesDropped,
                             framesDroppedEncoderBusy: s.framesDroppedEncoderBusy, viewers: connected.count,
                             videoBitrate: bitrate, roundTripTime: rtts.max() ?? s.video?.rtt)
    }
}
