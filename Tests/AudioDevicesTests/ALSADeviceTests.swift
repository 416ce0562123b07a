import Glibc
import Logging
import MediaTypes
import TestSupport
import Testing
@testable import AudioDevices

let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

@Suite("ALSA device with a fake PCM layer")
struct ALSADeviceTests {
    func device(_ pcm: FakePCM, format: AudioFormat = .voice, stall: Int = 0) -> ALSAAudioDevice {
        ALSAAudioDevice(captureDevice: "hw:9,0", renderDevice: "hw:9,0", format: format, system: pcm, logger: quiet,
                        debugStallMilliseconds: stall)
    }

    @Test func nearestRateIsReportedNotHidden() throws {
        let pcm = FakePCM()
        pcm.rates = [44_100]
        let d = device(pcm)
        try d.initializeCapture()
        let s = try #require(d.captureSettings)
        #expect(s.format.sampleRate == 44_100 && s.requested.sampleRate == 48_000 && s.rateChanged)
        #expect(s.periodFrames == 480)  // 10 ms at the rate asked
    }

    @Test func unsupportedChannelsAndFormatAreErrors() {
        let pcm = FakePCM()
        pcm.channelRange = 2...2
        #expect(throws: AudioError.formatNotSupported(device: "hw:9,0", requested: .voice, reason: "1 channels not offered")) {
            try device(pcm).initializeCapture()
        }
        let noS16 = FakePCM()
        noS16.takesS16 = false
        #expect(throws: AudioError.self) { try device(noS16).initializeCapture() }
    }

    @Test func oddPeriodsBecomeExactTenMillisecondChunks() throws {
        let pcm = FakePCM()
        pcm.periodOverride = 333
        let d = device(pcm)
        let sink = ChunkCollector()
        d.bus.setCaptureConsumer(sink)
        try d.initializeCapture()
        // 333 + 333 + 333 + 333 + 108 = 1440 frames: exactly three 480-frame chunks.
        var value: Int16 = 0
        var reads: [FakePCM.Read] = []
        for n in [333, 333, 333, 333, 108] {
            reads.append(.frames(n, firstValue: value))
            value &+= Int16(n)
        }
        pcm.script(reads)
        try d.startCapture()
        #expect(eventually { sink.chunks.count == 3 })
        d.stopCapture()
        let all = sink.chunks.flatMap { $0 }
        #expect(sink.chunks.allSatisfy { $0.count == 480 })
        #expect(all == (0..<1440).map { Int16($0) })  // nothing lost, nothing repeated, in order
        #expect(zip(sink.stamps, sink.stamps.dropFirst()).allSatisfy { $0 < $1 })
        #expect(d.captureStatistics.frames == 1440 && d.captureStatistics.chunks == 3)
    }

    @Test func overrunIsRecoveredWithAnExplicitStart() throws {
        let pcm = FakePCM()
        let d = device(pcm)
        let sink = ChunkCollector()
        d.bus.setCaptureConsumer(sink)
        try d.initializeCapture()
        pcm.script([.frames(480, firstValue: 0), .error(EPIPE), .frames(480, firstValue: 1000)])
        try d.startCapture()
        #expect(eventually { sink.chunks.count == 2 })
        d.stopCapture()
        #expect(d.captureStatistics.xruns == 1 && d.captureStatistics.recoveries == 1)
        #expect(pcm.recovers.first == -EPIPE)
        #expect(pcm.starts == 2)  // the first start, and the one recover does not do for capture
        #expect(sink.events.contains("overrun recovered"))
        #expect(sink.chunks[1].first == 1000)
    }

    @Test func suspendIsCountedAndResumed() throws {
        let pcm = FakePCM()
        let d = device(pcm)
        try d.initializeCapture()
        pcm.script([.error(ESTRPIPE), .frames(480, firstValue: 0)])
        try d.startCapture()
        #expect(eventually { d.captureStatistics.chunks == 1 })
        d.stopCapture()
        #expect(d.captureStatistics.suspends == 1)
    }

    @Test func unplugIsDeviceLost() throws {
        let pcm = FakePCM()
        let d = device(pcm)
        let sink = ChunkCollector()
        d.bus.setCaptureConsumer(sink)
        try d.initializeCapture()
        pcm.script([.frames(480, firstValue: 0), .error(ENODEV)])
        try d.startCapture()
        #expect(eventually { d.captureFailure != nil })
        #expect(d.captureFailure == .deviceLost(device: "hw:9,0"))
        #expect(eventually { sink.events.contains { $0.contains("audio device lost") } })
        d.stopCapture()
    }

    @Test func unplugWithReconnectWaitsForTheDeviceAndResumes() throws {
        let pcm = FakePCM()
        let d = ALSAAudioDevice(captureDevice: "hw:9,0", renderDevice: nil, format: .voice, system: pcm, logger: quiet,
                                reconnect: true)
        let sink = ChunkCollector()
        d.bus.setCaptureConsumer(sink)
        try d.initializeCapture()
        pcm.openErrors = [ENOENT, ENOENT]   // not there for the first two looks
        pcm.script([.frames(480, firstValue: 0), .error(ENODEV)])
        try d.startCapture()
        #expect(eventually { sink.events.contains { $0.hasPrefix("audio device lost") } })
        #expect(d.captureFailure == nil)
        pcm.script([.frames(480, firstValue: 1000)])
        #expect(eventually { sink.events.contains { $0.hasPrefix("audio device back: hw:9,0 back after") } })
        #expect(eventually { sink.chunks.contains { $0.first == 1000 } }, "no chunk from the device once back")
        #expect(d.captureFailure == nil && d.isCapturing)
        #expect(pcm.opens == 4)   // the first, two misses, the return
        #expect(pcm.starts == 2)
        d.stopCapture()
    }

    @Test func busyIsRetriedThenReported() throws {
        let flaky = FakePCM()
        flaky.openErrors = [EBUSY, EBUSY]
        try device(flaky).initializeCapture()  // succeeds on the third try
        #expect(flaky.opens == 3)
        let busy = FakePCM()
        busy.openErrors = Array(repeating: EBUSY, count: 20)
        #expect(throws: AudioError.busy(device: "hw:9,0")) { try device(busy).initializeCapture() }
        #expect(busy.opens == ALSASide.busyRetries + 1)
    }

    @Test func missingDevice() {
        let pcm = FakePCM()
        pcm.openErrors = [ENOENT]
        #expect(throws: AudioError.noSuchDevice(device: "hw:9,0")) { try device(pcm).initializeCapture() }
    }

    @Test func renderPlaysQueuedChunksThenSilence() throws {
        let pcm = FakePCM()
        let d = device(pcm)
        try d.initializeRender()
        let tone = (0..<960).map { Int16($0 + 1) }  // two chunks
        tone.withUnsafeBufferPointer { _ = d.bus.queueForRender($0) }
        try d.startRender()
        #expect(eventually { pcm.writtenSamples.count >= 960 * 2 })
        d.stopRender()
        let out = pcm.writtenSamples
        #expect(Array(out.prefix(960)) == tone)
        #expect(out[960..<1920].allSatisfy { $0 == 0 })
        #expect(d.renderStatistics.silenceInserted >= 1)
    }
}

@Suite("Audio bus")
struct AudioBusTests {
    @Test func renderRingKeepsTheNewestWhenFull() {
        let bus = AudioBus(renderFormat: AudioFormat(sampleRate: 1000, channels: 1), renderChunks: 3)  // 10-sample chunks
        let samples = (0..<50).map { Int16($0) }
        #expect(samples.withUnsafeBufferPointer { bus.queueForRender($0) } == 5)
        #expect(bus.queuedRenderChunks == 3 && bus.renderOverflows == 2)
        let out = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 10)
        defer { out.deallocate() }
        #expect(bus.readRenderChunk(into: out) && out[0] == 20)  // chunks 0 and 1 were dropped
        _ = bus.readRenderChunk(into: out)
        _ = bus.readRenderChunk(into: out)
        #expect(!bus.readRenderChunk(into: out) && out.allSatisfy { $0 == 0 })
    }

    @Test func silenceWithoutACardIsPacedAndTimestamped() throws {
        let d = SilentAudioCapture(format: .voice)
        let sink = ChunkCollector()
        d.bus.setCaptureConsumer(sink)
        try d.startCapture()
        #expect(eventually { sink.chunks.count >= 10 })
        d.stopCapture()
        #expect(sink.chunks.allSatisfy { $0.count == 480 && $0.allSatisfy { $0 == 0 } })
        let steps = zip(sink.stamps, sink.stamps.dropFirst()).map { ($1 - $0).nanosecondsClamped }
        #expect(steps.allSatisfy { $0 == 10_000_000 })  // an absolute 10 ms schedule
    }
}
