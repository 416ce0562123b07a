import Glibc
import MediaTypes
import Testing

@Suite("Media types")
struct MediaTypesTests {
    @Test func fourccNames() {
        #expect(PixelFormat.yuyv.name == "YUYV" && PixelFormat(name: "NV12") == .nv12)
        #expect(PixelFormat(fourcc: PixelFormat("AR15").fourcc | 0x8000_0000).name == "AR15-BE")
        #expect(PixelFormat(name: "TOOLONG") == nil)
    }

    @Test func framePoolHandsOutOnlyFreeFrames() {
        let pool = VideoFramePool(count: 2, maxWidth: 64, maxHeight: 48)
        var held: [VideoFrame] = []
        held.append(pool.acquire()!)
        held.append(pool.acquire()!)
        #expect(pool.acquire() == nil)
        #expect(pool.framesInUse == 2)
        held.removeFirst()
        #expect(pool.acquire() != nil)
        #expect(Set(pool.frameIdentities).count == 2)
    }

    @Test func frameFormatChangesReuseStorage() {
        let f = VideoFrame(maxWidth: 64, maxHeight: 48)
        f.setFormat(.nv12(width: 32, height: 16, framesPerSecond: 30))
        #expect(f.yPlane.count == 32 * 16 && f.uvPlane.count == 32 * 8)
        #expect(f.uvPlane.baseAddress == f.yPlane.baseAddress! + 32 * 16)
    }

    @Test func planeStridesAreInlineAndIndexed() {
        let nv12 = VideoFormat.nv12(width: 33, height: 16, framesPerSecond: 30)
        #expect(Array(nv12.bytesPerRow) == [33, 34])
        var strides: PlaneStrides = [640]
        strides.append(320)
        strides.append(320)
        #expect(strides.count == 3 && strides[2] == 320 && strides == PlaneStrides([640, 320, 320]))
        #expect(strides != [640, 320])
    }

    @Test func metadataIsInlineAndBounded() {
        let m = FrameMetadata([1, 2, 3])
        #expect(m.bytes == [1, 2, 3] && m.count == 3)
        #expect(FrameMetadata(Array(repeating: 7, count: 32)).count == 32)
    }

    @Test func latencyPercentiles() {
        var s = LatencySamples(capacity: 100)
        for i in 1...100 { s.record(Int64(i)) }
        #expect(s.percentile(50) == 51 || s.percentile(50) == 50)
        #expect(s.percentile(99) == 99 || s.percentile(99) == 100)
        #expect(s.maximum == 100)
    }

    @Test func percentilesMatchSortingOnAnyOrder() {
        var generator = SystemRandomNumberGenerator()
        for count in [1, 2, 3, 10, 257] {
            let values = (0..<count).map { _ in Int64.random(in: 0..<50, using: &generator) }
            var s = LatencySamples(capacity: 300)
            for v in values { s.record(v) }
            let sorted = values.sorted()
            for p in [0.0, 25, 50, 90, 99, 100] {
                let rank = Int((p / 100 * Double(count - 1)).rounded())
                #expect(s.percentile(p) == sorted[rank], "p\(p) of \(values)")
            }
        }
    }

    @Test func formattedDecimals() {
        #expect(12.5.formatted(decimals: 2) == "12.50")
        #expect((-0.25).formatted(decimals: 1) == "-0.3" || (-0.25).formatted(decimals: 1) == "-0.2")
        #expect(30.0.formatted(decimals: 0) == "30")
        // Beyond an Int: the Double's own text (a `capture --duration 1e300` once trapped here).
        #expect(1e300.formatted(decimals: 1) == "1e+300" && (-1e300).formatted(decimals: 1) == "-1e+300")
        #expect(Double.nan.formatted(decimals: 1) == "nan" && Double.infinity.formatted(decimals: 0) == "inf")
        #expect(9.2e18.formatted(decimals: 0) == "9.2e+18" && 8e18.formatted(decimals: 0) == "8000000000000000000")
    }
}

@Suite("Processors")
struct ProcessorsTests {
    @Test func usableIsAtLeastOneAndAtMostWhatIsOnline() {
        let online = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        #expect(Processors.usable >= 1)
        #expect(Processors.usable <= max(online, 1), "affinity cannot give more CPUs than are online")
    }
}
