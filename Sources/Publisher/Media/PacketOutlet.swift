/// A connected transport's way out for a connection's queued packets: who
/// queues them sends what the pacer lets out at once (`SecuredSendPath`).
protocol PacketOutlet: AnyObject, Sendable {
    func sendDue(from media: MediaSenders, now: Double)
}
