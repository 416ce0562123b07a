import MediaTypes

/// Everything a user sets for one V4L2 capture: kept apart from the runtime
/// state, so a reconnect or a renegotiation starts again from the same wishes.
public struct V4L2CaptureOptions: Hashable, Sendable {
    public var request: NegotiationRequest
    /// mmap buffers to ask the driver for (it may grant fewer).
    public var bufferCount = 4
    /// Pooled NV12 frames shared with the consumer.
    public var poolSize = 4
    public var orientation = VideoOrientation.upright
    /// Rotate and mirror pixels instead of only tagging frames.
    public var rotatePixels = false
    /// No frame for this long is a timeout (or, with `reconnect`, a lost device).
    public var frameTimeout: Duration = .seconds(10)
    /// After the device is lost, wait for it (same bus info) to come back.
    public var reconnect = false
    /// How often to look for the device while it is gone.
    public var reconnectInterval: Duration = .milliseconds(500)
    /// Let the frame-rate governor act, not only report.
    public var adapt = false
    public var governor = FrameRateGovernor.Configuration()

    public init(request: NegotiationRequest) {
        self.request = request
    }
}
