import MediaTypes
import Testing
@testable import VideoSources

@Suite("Frame-rate choice")
struct FrameRateChoiceTests {
    let discrete: [V4L2FrameIntervalEntry] = [fps(30), fps(15), fps(5)]

    @Test func desiredAboveAllTakesTheHighest() {
        #expect(FrameRateChoice.choose(desired: 60, from: discrete)?.framesPerSecond == 30)
    }

    @Test func desiredBelowAllTakesTheLowest() {
        #expect(FrameRateChoice.choose(desired: 2, from: discrete)?.framesPerSecond == 5)
    }

    @Test func desiredExactlyOffered() {
        #expect(FrameRateChoice.choose(desired: 15, from: discrete)?.framesPerSecond == 15)
    }

    @Test func betweenTwoTakesTheLower() {
        #expect(FrameRateChoice.choose(desired: 20, from: discrete)?.framesPerSecond == 15)
    }

    @Test func ntscRates() {
        let ntsc = FrameInterval(numerator: 1001, denominator: 30000)
        #expect(FrameRateChoice.choose(desired: 29.97, from: [.discrete(ntsc), fps(15)]) == ntsc)
        // 30 asked, 29.97 offered: 29.97 is at or below 30.
        #expect(FrameRateChoice.choose(desired: 30, from: [.discrete(ntsc), fps(60)]) == ntsc)
    }

    @Test func onlyOneRateAboveDesired() {
        // The OpenTok sample returns nothing here; the rule takes the only rate.
        #expect(FrameRateChoice.choose(desired: 30, from: [fps(60)])?.framesPerSecond == 60)
    }

    @Test func stepwiseSnapsToAStepAtOrBelow() throws {
        // 1/60 s to 1 s in steps of 1/60 s: rates 60, 30, 20, 15, 12, 10...
        let range: [V4L2FrameIntervalEntry] = [.stepwise(
            min: FrameInterval(numerator: 1, denominator: 60), max: FrameInterval(numerator: 1, denominator: 1),
            step: FrameInterval(numerator: 1, denominator: 60))]
        let chosen = try #require(FrameRateChoice.choose(desired: 25, from: range))
        #expect(abs(chosen.framesPerSecond - 20) < 1e-9)
        #expect(FrameRateChoice.choose(desired: 100, from: range)?.framesPerSecond == 60)
        #expect(FrameRateChoice.choose(desired: 0.5, from: range)?.framesPerSecond == 1)
        #expect(abs(try #require(FrameRateChoice.choose(desired: 30, from: range)).framesPerSecond - 30) < 1e-9)
    }

    @Test func continuousTakesTheDesiredRate() throws {
        let range: [V4L2FrameIntervalEntry] = [.continuous(
            min: FrameInterval(numerator: 1, denominator: 30), max: FrameInterval(numerator: 1, denominator: 2))]
        #expect(abs(try #require(FrameRateChoice.choose(desired: 24, from: range)).framesPerSecond - 24) < 1e-9)
        #expect(FrameRateChoice.choose(desired: 100, from: range)?.framesPerSecond == 30)
        #expect(FrameRateChoice.choose(desired: 1, from: range)?.framesPerSecond == 2)
    }

    @Test func noIntervalsMeansNoChoice() {
        #expect(FrameRateChoice.choose(desired: 30, from: []) == nil)
    }
}

@Suite("Format negotiation")
struct FormatNegotiationTests {
    func negotiator(_ formats: [(PixelFormat, [V4L2FrameSizeEntry], emulated: Bool)],
                    intervals: [String: [V4L2FrameIntervalEntry]] = [:]) -> FormatNegotiator {
        FormatNegotiator(
            device: "/dev/video0",
            formats: formats.map {
                DeviceFormatOption(entry: V4L2FormatEntry(pixelFormat: $0.0, description: $0.0.name,
                                                          isCompressed: $0.0.isCompressed, isEmulated: $0.emulated),
                                   sizes: $0.1)
            },
            intervals: { intervals[FakeV4L2Kernel.key($0, $1)] ?? [fps(30), fps(15)] })
    }

    @Test func nearestDiscreteSize() throws {
        let n = negotiator([(.yuyv, [.discrete(qvga), .discrete(vga), .discrete(hd)], false)])
        #expect(try n.plan(for: .init(size: FrameSize(width: 700, height: 500), framesPerSecond: 30)).size == vga)
        #expect(try n.plan(for: .init(size: FrameSize(width: 4000, height: 3000), framesPerSecond: 30)).size == hd)
    }

    @Test func stepwiseAndContinuousSizesSnap() throws {
        let step = negotiator([(.yuyv, [.stepwise(min: qvga, max: hd, step: FrameSize(width: 16, height: 16))], false)])
        let plan = try step.plan(for: .init(size: FrameSize(width: 650, height: 470), framesPerSecond: 30))
        #expect(plan.size == FrameSize(width: 656, height: 464))  // 320 + 21*16, 240 + 14*16: nearest steps
        let cont = negotiator([(.yuyv, [.continuous(min: qvga, max: hd)], false)])
        #expect(try cont.plan(for: .init(size: FrameSize(width: 651, height: 471), framesPerSecond: 30)).size
                == FrameSize(width: 651, height: 471))
    }

    @Test func preferenceNV12OverYUYVOverMJPEG() throws {
        let all = negotiator([(.mjpeg, [.discrete(vga)], false), (.yuyv, [.discrete(vga)], false), (.nv12, [.discrete(vga)], false)])
        #expect(try all.plan(for: .init(size: vga, framesPerSecond: 30)).pixelFormat == .nv12)
        let two = negotiator([(.mjpeg, [.discrete(vga)], false), (.yuyv, [.discrete(vga)], false)])
        #expect(try two.plan(for: .init(size: vga, framesPerSecond: 30)).pixelFormat == .yuyv)
    }

    @Test func mjpegWhenRawCannotReachTheRate() throws {
        let n = negotiator([(.yuyv, [.discrete(fullHD)], false), (.mjpeg, [.discrete(fullHD)], false)],
                           intervals: [FakeV4L2Kernel.key(.yuyv, fullHD): [fps(5)],
                                       FakeV4L2Kernel.key(.mjpeg, fullHD): [fps(30), fps(15)]])
        let plan = try n.plan(for: .init(size: fullHD, framesPerSecond: 30))
        #expect(plan.pixelFormat == .mjpeg && plan.framesPerSecond == 30)
        // Asking 5 fps: YUYV reaches it and is preferred.
        #expect(try n.plan(for: .init(size: fullHD, framesPerSecond: 5)).pixelFormat == .yuyv)
    }

    @Test func explicitFormatOverrides() throws {
        let n = negotiator([(.yuyv, [.discrete(vga)], false), (.nv12, [.discrete(vga)], false)])
        #expect(try n.plan(for: .init(size: vga, framesPerSecond: 30, format: .yuyv)).pixelFormat == .yuyv)
    }

    @Test func explicitFormatMissing() {
        let n = negotiator([(.yuyv, [.discrete(vga)], false)])
        #expect(throws: CaptureError.formatNotSupported(device: "/dev/video0", requested: "MJPEG", available: ["YUYV"])) {
            try n.plan(for: .init(size: vga, framesPerSecond: 30, format: .mjpeg))
        }
    }

    @Test func aDriverThatListsNoSizesIsAskedForTheWantedOne() throws {
        // TV and HDMI capture cards (and vivid's TV input) answer no VIDIOC_ENUM_FRAMESIZES:
        // the wanted size goes to S_FMT, which the driver adjusts.
        let n = negotiator([(.yuyv, [], false)])
        #expect(try n.plan(for: .init(size: hd, framesPerSecond: 30)).size == hd)
        // A listed size is still preferred to asking blindly, format by format.
        let mixed = negotiator([(.nv12, [.discrete(vga)], false), (.yuyv, [], false)])
        #expect(try mixed.plan(for: .init(size: vga, framesPerSecond: 30)).pixelFormat == .nv12)
    }

    @Test func emulatedFormatsAreNeverChosen() throws {
        let n = negotiator([(.nv12, [.discrete(vga)], true), (.yuyv, [.discrete(vga)], false)])
        #expect(try n.plan(for: .init(size: vga, framesPerSecond: 30)).pixelFormat == .yuyv)
        let onlyEmulated = negotiator([(.nv12, [.discrete(vga)], true)])
        #expect(throws: CaptureError.self) { try onlyEmulated.plan(for: .init(size: vga, framesPerSecond: 30)) }
    }

    @Test func exactRejectsMissingSizeAndRate() {
        let n = negotiator([(.yuyv, [.discrete(vga), .discrete(qvga)], false)])
        #expect(throws: CaptureError.sizeNotSupported(device: "/dev/video0", requested: hd, available: [qvga, vga])) {
            try n.plan(for: .init(size: hd, framesPerSecond: 30, exact: true))
        }
        #expect(throws: CaptureError.rateNotSupported(device: "/dev/video0", requested: 60, available: [30, 15])) {
            try n.plan(for: .init(size: vga, framesPerSecond: 60, exact: true))
        }
        #expect((try? n.plan(for: .init(size: vga, framesPerSecond: 15, exact: true))) != nil)
    }

    @Test func governorFallbackPrefersMJPEGThenSmaller() throws {
        let withMJPEG = negotiator([(.yuyv, [.discrete(vga), .discrete(hd)], false), (.mjpeg, [.discrete(hd)], false)])
        let current = NegotiationPlan(pixelFormat: .yuyv, size: hd, interval: FrameInterval(framesPerSecond: 30))
        #expect(withMJPEG.fallback(from: current, desiredRate: 30)?.pixelFormat == .mjpeg)
        let rawOnly = negotiator([(.yuyv, [.discrete(qvga), .discrete(vga), .discrete(hd)], false)])
        #expect(rawOnly.fallback(from: current, desiredRate: 30)?.size == vga)
        let smallest = NegotiationPlan(pixelFormat: .yuyv, size: qvga, interval: nil)
        #expect(rawOnly.fallback(from: smallest, desiredRate: 30) == nil)
    }
}

@Suite("Frame-rate governor")
struct GovernorTests {
    /// Feeds `rate` frames per second for `seconds` of synthetic time.
    func feed(_ g: inout FrameRateGovernor, from start: Double, seconds: Double, rate: Double) -> [FrameRateGovernor.Decision] {
        var decisions: [FrameRateGovernor.Decision] = []
        var t = start
        let step = 1 / rate
        while t < start + seconds {
            let d = g.observe(at: MonotonicTimestamp(nanoseconds: Int64(t * 1e9)), delivered: true)
            if d != .none { decisions.append(d) }
            t += step
        }
        return decisions
    }

    @Test func steadyRateIsQuiet() {
        var g = FrameRateGovernor(granted: 30, adapt: true)
        #expect(feed(&g, from: 0, seconds: 20, rate: 30).isEmpty)
    }

    @Test func slowRateIsReportedOnce() {
        var g = FrameRateGovernor(granted: 30, adapt: false)
        let decisions = feed(&g, from: 0, seconds: 20, rate: 12)
        #expect(decisions.count == 1)
        guard case .report(let delivered, let granted, let seconds)? = decisions.first else {
            Issue.record("expected a report, got \(decisions)")
            return
        }
        #expect(abs(delivered - 12) < 1.5 && granted == 30 && seconds >= 3)
    }

    @Test func adaptActsAtMostMaxActionsSettleApart() {
        var config = FrameRateGovernor.Configuration()
        config.maxActions = 2
        var g = FrameRateGovernor(granted: 30, adapt: true, configuration: config)
        let decisions = feed(&g, from: 0, seconds: 60, rate: 10)
        let acts = decisions.filter { if case .reportAndAct = $0 { return true }; return false }
        #expect(acts.count == 2)
        #expect(g.actionsTaken == 2)
    }

    @Test func recoveryResetsTheEpisode() {
        var g = FrameRateGovernor(granted: 30, adapt: false)
        #expect(feed(&g, from: 0, seconds: 6, rate: 10).count == 1)
        #expect(feed(&g, from: 6, seconds: 5, rate: 30).isEmpty)
        #expect(feed(&g, from: 11, seconds: 6, rate: 10).count == 1)  // a new episode is reported again
    }
}
