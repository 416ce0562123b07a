import Testing
@testable import RTP

/// SplitMix64: a fixed seed, so every run feeds the same packets.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("VideoJitterBuffer under random packets")
struct VideoJitterBufferPropertyTests {
    /// What a network or a broken sender can do, at random: packets in order, late,
    /// repeated, lost, or from anywhere in the sequence space; timestamps that stay,
    /// step, go back or jump; markers and keyframes anywhere. nextFrame must always
    /// return (a pass that makes no progress stops a debug build), and the frames it
    /// gives must come in sequence order.
    @Test("any packets: nextFrame returns, and its frames come in order", arguments: [VideoJitterBuffer.Codec.vp8, .h264])
    func randomPackets(codec: VideoJitterBuffer.Codec) {
        var random = SeededGenerator(state: codec == .vp8 ? 0x5EED : 0xF00D)
        var frames = 0
        for _ in 0..<300 {
            var settings = VideoJitterBuffer.Settings()
            settings.capacity = 64   // small, so jumps past it and slot reuse come often
            var buffer = VideoJitterBuffer(codec: codec, settings: settings)
            var feedback = FeedbackRequests()
            var frameBytes: [UInt8] = []
            var sequence = UInt16.random(in: 0...UInt16.max, using: &random)
            var timestamp = UInt32.random(in: 0...UInt32.max, using: &random)
            var now = 0.0
            var lastSequenceOut = Int64.min
            for _ in 0..<200 {
                switch Int.random(in: 0..<20, using: &random) {
                case 0: sequence &-= UInt16.random(in: 0...5, using: &random)        // late or repeated
                case 1: sequence &+= UInt16.random(in: 2...40, using: &random)       // lost
                case 2: sequence &+= UInt16.random(in: 0...UInt16.max, using: &random) // from anywhere
                default: sequence &+= 1
                }
                switch Int.random(in: 0..<8, using: &random) {
                case 0, 1: timestamp &+= 3000
                case 2: timestamp &-= 3000
                case 3: timestamp = UInt32.random(in: 0...UInt32.max, using: &random)
                default: break   // the same frame
                }
                let bytes = jitterBufferPacket(codec, sequence: sequence, timestamp: timestamp, marker: Bool.random(using: &random),
                                   first: Bool.random(using: &random), keyframe: Int.random(in: 0..<4, using: &random) == 0)
                now += Double.random(in: 0...0.1, using: &random)
                buffer.insert(try! RTPPacketView(parsing: bytes[...]), bytes: bytes[...], now: now, feedback: &feedback)
                feedback.clear()
                while let frame = buffer.nextFrame(into: &frameBytes, now: now, feedback: &feedback) {
                    #expect(frame.firstSequence > lastSequenceOut && frame.lastSequence >= frame.firstSequence,
                            "frame \(frame.firstSequence)...\(frame.lastSequence) after \(lastSequenceOut)")
                    lastSequenceOut = frame.lastSequence
                    frames += 1
                }
                feedback.clear()
            }
        }
        #expect(frames > 1000, "so few frames came out that the run tested little: \(frames)")
    }
}
