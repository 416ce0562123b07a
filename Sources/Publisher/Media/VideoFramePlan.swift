/// What the video encoder needs to know for one frame, gathered by
/// `MediaHub` in one pass over the connections: whether to make a keyframe,
/// the bitrate to encode at, and whether orientation can travel as metadata.
struct VideoFramePlan: Equatable, Sendable {
    /// The simulcast layers to make a keyframe of (`KeyframeSchedule.bit`;
    /// a stream without layers is layer 0): some receiver asked for one
    /// (PLI, FIR, a new connection, a move to that layer) and that layer's
    /// last one is old enough.
    var keyframeLayers: UInt8
    /// A keyframe of some layer.
    var keyframe: Bool { keyframeLayers != 0 }
    /// Whether layer `layer` makes a keyframe.
    func keyframe(layer: UInt8) -> Bool { keyframeLayers & KeyframeSchedule.bit(layer) != 0 }
    /// Bits per second: the room of the receiver with the least.
    var bitrate: Int
    /// Every connection receiving video takes urn:3gpp:video-orientation,
    /// so frames are encoded as captured and the rotation rides along.
    /// Otherwise pixels are rotated before encoding.
    var orientationAsMetadata: Bool

    /// What the connections contribute, one at a time.
    struct Builder {
        var receivers = 0
        /// The layers a keyframe is asked of, one bit each.
        var keyframeLayers: UInt8 = 0
        /// The least room among receivers of the largest simulcast layer (or of the only one).
        var lowestBitrate: Int?
        /// The least room among receivers of a smaller simulcast layer: the
        /// bitrate when no receiver takes the largest.
        var lowestLowerLayerBitrate: Int?
        var allTakeOrientation = true
    }
}
