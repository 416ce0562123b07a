import Foundation
import Glibc
import MediaTypes
import TestSupport
import Testing
@testable import VideoSources

/// A fake /dev and /sys in a temporary directory, laid out as udev and the
/// kernel lay them out for one USB webcam (capture node video3, metadata node
/// video1) and vivid (video0), with a FakeV4L2Kernel playing the nodes.
final class FakeDeviceTree {
    let root: String
    let tree: DeviceTree
    let kernel: FakeV4L2Kernel
    static let usbInterface = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-4/1-4:1.0"
    static let byID = "usb-Acme_Webcam_C1_SN123-video-index0"
    static let byPath = "pci-0000:00:14.0-usb-0:4:1.0-video-index0"

    static func vivid() -> FakeV4L2Kernel.Node {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga], busInfo: "platform:vivid-000")
        node.capabilities.card = "vivid"
        node.capabilities.driver = "vivid"
        return node
    }

    static func webcam(busInfo: String = "usb-0000:00:14.0-4") -> FakeV4L2Kernel.Node {
        var node = FakeV4L2Kernel.Node.camera([.yuyv], sizes: [qvga], busInfo: busInfo)
        node.capabilities.card = "Acme Webcam C1"
        node.capabilities.driver = "uvcvideo"
        return node
    }

    init() throws {
        let made = NSTemporaryDirectory() + "camagent-devtree-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: true)
        root = try #require(DeviceNameResolver.realPath(made))  // /tmp may itself be a link
        tree = DeviceTree(root: root)
        var metadata = Self.webcam()
        metadata.capabilities.flags = [.metadataCapture, .streaming]
        kernel = FakeV4L2Kernel(nodes: [
            "\(root)/dev/video0": Self.vivid(),
            "\(root)/dev/video1": metadata,
            "\(root)/dev/video3": Self.webcam(),
        ])
        for node in ["video0", "video1", "video3"] { try file("dev/\(node)", "") }
        try link("dev/v4l/by-id/\(Self.byID)", to: "../../video3")
        try link("dev/v4l/by-path/\(Self.byPath)", to: "../../video3")
        try file("\(Self.usbInterface)/../idVendor", "046d\n")
        try file("\(Self.usbInterface)/../idProduct", "0825\n")
        try file("\(Self.usbInterface)/../serial", "SN123\n")
        try file("\(Self.usbInterface)/bInterfaceClass", "0e\n")
        try file("sys/devices/platform/vivid.0/modalias", "platform:vivid\n")
        try link("sys/class/video4linux/video0/device", to: "../../../devices/platform/vivid.0")
        try link("sys/class/video4linux/video1/device", to: "../../../\(Self.usbInterface.dropFirst(4))")
        try link("sys/class/video4linux/video3/device", to: "../../../\(Self.usbInterface.dropFirst(4))")
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var resolver: DeviceNameResolver { DeviceNameResolver(tree: tree, kernel: kernel) }

    func path(_ relative: String) -> String { "\(root)/\(relative)" }

    func file(_ relative: String, _ text: String) throws {
        let url = URL(fileURLWithPath: path(relative)).standardized
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: false, encoding: .utf8)
    }

    func link(_ relative: String, to target: String) throws {
        let at = path(relative)
        try FileManager.default.createDirectory(atPath: (at as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: at)
        try FileManager.default.createSymbolicLink(atPath: at, withDestinationPath: target)
    }

    func remove(_ relative: String) throws { try FileManager.default.removeItem(atPath: path(relative)) }
}

@Suite("--device names: parsing")
struct DeviceNameParsingTests {
    @Test func formsAreToldApart() throws {
        #expect(try DeviceName(parsing: "/dev/video0") == .path("/dev/video0"))
        #expect(try DeviceName(parsing: "/dev/v4l/by-id/usb-x-video-index0") == .path("/dev/v4l/by-id/usb-x-video-index0"))
        #expect(try DeviceName(parsing: "HD Pro Webcam C920") == .card("HD Pro Webcam C920"))
        #expect(try DeviceName(parsing: "usb:046D:0825") == .usb(.init(vendor: 0x046d, product: 0x0825)))
        #expect(try DeviceName(parsing: "usb:046d:0825:A1:B2") == .usb(.init(vendor: 0x046d, product: 0x0825, serial: "A1:B2")))
        #expect(DeviceName.usb(.init(vendor: 0x46d, product: 0x825, serial: "X")).description == "usb:046d:0825:X")
    }

    @Test(arguments: ["usb:46d:825", "usb:046d", "usb:046d:08zz", "usb:046d:0825:", "usb:"])
    func malformedUSBIdsAreRefused(text: String) {
        #expect(throws: DeviceName.ParseError.self) { try DeviceName(parsing: text) }
    }
}

@Suite("--device names: resolution against a fake /dev and /sys")
struct DeviceNameResolutionTests {
    @Test func aByIdOrByPathLinkIsFollowed() throws {
        let fake = try FakeDeviceTree()
        #expect(try fake.resolver.resolve(.path(fake.path("dev/v4l/by-id/\(FakeDeviceTree.byID)"))) == fake.path("dev/video3"))
        #expect(try fake.resolver.resolve(.path(fake.path("dev/v4l/by-path/\(FakeDeviceTree.byPath)"))) == fake.path("dev/video3"))
    }

    @Test func aCardNameNamesItsCaptureNodeNotTheMetadataNode() throws {
        let fake = try FakeDeviceTree()
        #expect(try fake.resolver.resolve(.card("Acme Webcam C1")) == fake.path("dev/video3"))
        #expect(try fake.resolver.resolve(.card("vivid")) == fake.path("dev/video0"))
    }

    @Test func aUSBIdIsReadFromSysfs() throws {
        let fake = try FakeDeviceTree()
        #expect(try fake.resolver.resolve(.usb(.init(vendor: 0x046d, product: 0x0825))) == fake.path("dev/video3"))
        #expect(try fake.resolver.resolve(.usb(.init(vendor: 0x046d, product: 0x0825, serial: "SN123"))) == fake.path("dev/video3"))
    }

    @Test func aNameThatMatchesNothingListsWhatThereIs() throws {
        let fake = try FakeDeviceTree()
        for name: DeviceName in [.card("Other Cam"), .usb(.init(vendor: 0x046d, product: 0x0825, serial: "SN999")),
                                 .usb(.init(vendor: 0x1234, product: 0x5678)),
                                 .path(fake.path("dev/v4l/by-id/usb-gone-video-index0"))] {
            do {
                _ = try fake.resolver.resolve(name)
                Issue.record("\(name) resolved")
            } catch {
                guard case .noMatchingDevice(let shown, let available) = error else {
                    Issue.record("\(name): \(error)")
                    continue
                }
                #expect(shown == name.description)
                // Both cameras, each with the names that would find it; not the metadata node.
                #expect(available.count == 2, "\(available)")
                #expect(available.first?.hasPrefix(fake.path("dev/video0") + " \"vivid\"") == true)
                #expect(available.last?.contains("usb:046d:0825:SN123") == true)
                #expect(available.last?.contains(FakeDeviceTree.byID) == true)
                #expect(error.description.contains("no such device"))
            }
        }
    }

    @Test func aPlainNodePathIsLeftForOpenToJudge() throws {
        let fake = try FakeDeviceTree()
        #expect(try fake.resolver.resolve(.path("/dev/video7")) == "/dev/video7")
        #expect(!fake.resolver.followsName(.path(fake.path("dev/video3"))))
        #expect(fake.resolver.followsName(.path(fake.path("dev/v4l/by-id/\(FakeDeviceTree.byID)"))))
        #expect(fake.resolver.followsName(.card("vivid")))
    }

    @Test func devicesListsEveryNameThatFindsACamera() throws {
        let fake = try FakeDeviceTree()
        let listed = VideoDevices.list(kernel: fake.kernel, tree: fake.tree)
        #expect(listed.map(\.path) == [fake.path("dev/video0"), fake.path("dev/video3")])
        let webcam = try #require(listed.last)
        #expect(webcam.usbID == "usb:046d:0825:SN123")
        #expect(webcam.names == [fake.path("dev/v4l/by-id/\(FakeDeviceTree.byID)"),
                                 fake.path("dev/v4l/by-path/\(FakeDeviceTree.byPath)"),
                                 "usb:046d:0825:SN123", "Acme Webcam C1"])
        #expect(listed.first?.names == ["vivid"] && listed.first?.usbID == nil)
    }

    @Test func aCardNameTwoCamerasShareIsNotListedAsAName() throws {
        let fake = try FakeDeviceTree()
        try fake.file("dev/video5", "")
        fake.kernel.withLockRestore(fake.path("dev/video5"), FakeDeviceTree.webcam(busInfo: "usb-0000:00:14.0-5"))
        let listed = VideoDevices.list(kernel: fake.kernel, tree: fake.tree)
        #expect(listed.count == 3)
        #expect(listed.allSatisfy { !$0.names.contains("Acme Webcam C1") })
        // Resolving it still works: the first in node order.
        #expect(try fake.resolver.resolve(.card("Acme Webcam C1")) == fake.path("dev/video3"))
    }
}

@Suite("--device names: found again at reconnect")
struct DeviceNameReconnectTests {
    /// The webcam comes back as video6 on another USB port (other bus info): a
    /// plain path would not find it, but the name given is resolved again.
    @Test(arguments: ["by-id", "card", "usb"])
    func aCameraBackUnderAnotherNodeAndPortIsFoundByItsName(form: String) throws {
        let fake = try FakeDeviceTree()
        let name = switch form {
        case "by-id": fake.path("dev/v4l/by-id/\(FakeDeviceTree.byID)")
        case "card": "Acme Webcam C1"
        default: "usb:046d:0825:SN123"
        }
        var options = V4L2CaptureOptions(request: NegotiationRequest(size: qvga, framesPerSecond: 30))
        options.reconnect = true
        options.reconnectInterval = .milliseconds(10)
        options.frameTimeout = .seconds(30)
        let capture = V4L2VideoCapture(device: name, options: options, kernel: fake.kernel, tree: fake.tree, logger: testLogger)
        let consumer = CollectingConsumer()
        capture.setConsumer(consumer)
        try capture.initialize()
        #expect(capture.captureSettings?.device == fake.path("dev/video3"))
        let frame = FakeV4L2Kernel.Step.frame(bytes: yuyvFrame(width: 320, height: 240, y: 50, u: 90, v: 200),
                                              bytesUsed: nil, sequence: 0, flags: 0, timestamp: nil)
        fake.kernel.script([frame, .removeNode(fake.path("dev/video3")), .dequeueError(.noDevice)])
        try capture.start()
        #expect(eventually { consumer.events.contains { $0.isDeviceLost } })

        // Unplugged: both nodes and their links go; replugged on port 5 as video6/video7.
        try fake.remove("dev/video3")
        try fake.remove("dev/video1")
        try fake.remove("sys/class/video4linux/video1")
        try fake.remove("sys/class/video4linux/video3")
        let newInterface = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-5/1-5:1.0"
        try fake.file("\(newInterface)/../idVendor", "046d\n")
        try fake.file("\(newInterface)/../idProduct", "0825\n")
        try fake.file("\(newInterface)/../serial", "SN123\n")
        try fake.file("\(newInterface)/bInterfaceClass", "0e\n")
        try fake.file("dev/video6", "")
        try fake.link("sys/class/video4linux/video6/device", to: "../../../\(newInterface.dropFirst(4))")
        try fake.link("dev/v4l/by-id/\(FakeDeviceTree.byID)", to: "../../video6")
        fake.kernel.withLockRestore(fake.path("dev/video6"), FakeDeviceTree.webcam(busInfo: "usb-0000:00:14.0-5"))

        #expect(eventually { consumer.events.contains { $0.isReconnected } })
        fake.kernel.script([frame])
        #expect(eventually { consumer.frames.count >= 2 })
        capture.stop()
        #expect(capture.captureSettings?.device == fake.path("dev/video6"))
        #expect(capture.statistics.reconnects == 1)
        #expect(capture.failure == nil)
    }

    /// The same unplug with the plain node path: the old rule holds (same bus
    /// info on any node), so a camera on another port is not taken for it.
    @Test func aPlainPathDoesNotFollowACameraToAnotherPort() throws {
        let fake = try FakeDeviceTree()
        var options = V4L2CaptureOptions(request: NegotiationRequest(size: qvga, framesPerSecond: 30))
        options.reconnect = true
        options.reconnectInterval = .milliseconds(10)
        options.frameTimeout = .seconds(30)
        let capture = V4L2VideoCapture(device: fake.path("dev/video3"), options: options, kernel: fake.kernel,
                                       tree: fake.tree, logger: testLogger)
        let consumer = CollectingConsumer()
        capture.setConsumer(consumer)
        try capture.initialize()
        let frame = FakeV4L2Kernel.Step.frame(bytes: yuyvFrame(width: 320, height: 240, y: 50, u: 90, v: 200),
                                              bytesUsed: nil, sequence: 0, flags: 0, timestamp: nil)
        fake.kernel.script([frame, .removeNode(fake.path("dev/video3")), .dequeueError(.noDevice)])
        try capture.start()
        #expect(eventually { consumer.events.contains { $0.isDeviceLost } })
        try fake.file("dev/video6", "")
        fake.kernel.withLockRestore(fake.path("dev/video6"), FakeDeviceTree.webcam(busInfo: "usb-0000:00:14.0-5"))
        // The same bus info coming back on yet another node is recognised.
        try fake.file("dev/video8", "")
        fake.kernel.withLockRestore(fake.path("dev/video8"), FakeDeviceTree.webcam())
        #expect(eventually { consumer.events.contains { $0.isReconnected } })
        capture.stop()
        #expect(capture.captureSettings?.device == fake.path("dev/video8"))
    }
}
