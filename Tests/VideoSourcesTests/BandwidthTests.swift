import MediaTypes
import Testing
@testable import VideoSources

@Suite("USB bandwidth: ENOSPC at STREAMON")
struct BandwidthTests {
    @Test func enospcAtStreamOnIsBandwidthExceededNamingTheFormatAndTheWayOut() throws {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.streamOnError = .noSpace
        let kernel = FakeV4L2Kernel(nodes: ["/dev/video0": node])
        let options = V4L2CaptureOptions(request: NegotiationRequest(size: qvga, framesPerSecond: 30))
        let capture = V4L2VideoCapture(device: "/dev/video0", options: options, kernel: kernel, logger: testLogger)
        try capture.initialize()
        let expected = CaptureError.bandwidthExceeded(device: "/dev/video0", format: "YUYV 320x240 at 30 fps")
        #expect(throws: expected) { try capture.start() }
        #expect(!capture.isCaptureStarted)
        #expect(kernel.calls.requestedBuffers.last == 0)  // buffers handed back
        #expect(expected.description.contains("--format mjpeg") && expected.description.contains("smaller --size"))
    }

    @Test func otherStreamOnErrorsStayDriverErrors() throws {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga])
        node.streamOnError = .invalidArgument
        let kernel = FakeV4L2Kernel(nodes: ["/dev/video0": node])
        let options = V4L2CaptureOptions(request: NegotiationRequest(size: qvga, framesPerSecond: 30))
        let capture = V4L2VideoCapture(device: "/dev/video0", options: options, kernel: kernel, logger: testLogger)
        try capture.initialize()
        #expect(throws: CaptureError.driverError(device: "/dev/video0", operation: "VIDIOC_STREAMON", errno: Errno.invalidArgument.code)) {
            try capture.start()
        }
    }
}
