import MediaTypes

/// What a PCM was configured to.
struct PCMConfiguration: Hashable, Sendable {
    var format: AudioFormat
    var periodFrames: Int
    var bufferFrames: Int
}
