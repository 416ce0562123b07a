#if canImport(Glibc)
import Glibc
#endif
import MediaTypes

/// Where device nodes and their sysfs entries live: the system's, or a fake
/// tree a test builds in a temporary directory.
public struct DeviceTree: Hashable, Sendable {
    /// /dev: the videoN nodes and udev's v4l/by-id and v4l/by-path links.
    public var dev: String
    /// /sys/class/video4linux: one entry per node, its `device` link leading to the USB interface.
    public var sysClassVideo: String

    public static let system = DeviceTree(dev: "/dev", sysClassVideo: "/sys/class/video4linux")

    public init(dev: String, sysClassVideo: String) {
        self.dev = dev
        self.sysClassVideo = sysClassVideo
    }

    /// The same layout under `root` (root/dev, root/sys/class/video4linux).
    public init(root: String) {
        self.init(dev: root + "/dev", sysClassVideo: root + "/sys/class/video4linux")
    }
}

/// What identifies one capture node, by every name `--device` accepts.
public struct CameraNames: Hashable, Sendable {
    public var path: String
    public var card: String
    /// udev's /dev/v4l/by-id and /dev/v4l/by-path links to the node.
    public var links: [String]
    /// The USB device the node belongs to (nil for a platform driver such as vivid).
    public var usb: DeviceName.USBID?
}

/// Turns a `DeviceName` into the node it names now. Card names need
/// VIDIOC_QUERYCAP, so candidate nodes are opened (and closed at once);
/// USB ids come from sysfs; links are followed.
struct DeviceNameResolver: Sendable {
    let tree: DeviceTree
    let kernel: any V4L2Kernel

    /// The node `name` stands for. A plain path is returned as it is (opening
    /// it says what is wrong with it); a name that matches no camera is
    /// `noMatchingDevice`, listing the cameras there are.
    func resolve(_ name: DeviceName) throws(CaptureError) -> String {
        switch name {
        case .path(let path):
            if Self.isSymbolicLink(path) {
                guard let target = Self.realPath(path) else { throw noMatch(name) }  // a dangling link
                return target
            }
            // udev's link directories: a name that is not there is a name that matches nothing.
            if path.hasPrefix(tree.dev + "/v4l/") && !Self.exists(path) { throw noMatch(name) }
            return path
        case .card(let card):
            let wanted = card.trimmingWhitespace
            for path in DeviceDiscovery.videoNodes(in: tree.dev) {
                guard let device = try? V4L2Device.open(path: path, kernel: kernel) else { continue }
                if device.capabilities.card.trimmingWhitespace == wanted { return path }
            }
            throw noMatch(name)
        case .usb(let id):
            var denied: String?
            for path in DeviceDiscovery.videoNodes(in: tree.dev) {
                guard let found = usbID(ofNode: path), id.matches(found) else { continue }
                // A UVC camera has a metadata node too, with the same ids: take the capture node.
                do throws(CaptureError) {
                    _ = try V4L2Device.open(path: path, kernel: kernel)
                    return path
                } catch {
                    if case .permissionDenied = error, denied == nil { denied = path }
                }
            }
            // Opening it will say "permission denied" (exit 77), which is the truth.
            if let denied { return denied }
            throw noMatch(name)
        }
    }

    /// Whether `name` is followed when the device comes back (links, card
    /// names and USB ids), or is a plain node path whose device is recognised
    /// by its bus info wherever it comes back.
    func followsName(_ name: DeviceName) -> Bool {
        switch name {
        case .path(let path): Self.isSymbolicLink(path) || path.hasPrefix(tree.dev + "/v4l/")
        case .card, .usb: true
        }
    }

    /// Every capture node with its names, in node order.
    func cameras() -> [CameraNames] {
        DeviceDiscovery.videoNodes(in: tree.dev).compactMap { path in
            guard let device = try? V4L2Device.open(path: path, kernel: kernel) else { return nil }
            return names(of: path, card: device.capabilities.card)
        }
    }

    func names(of path: String, card: String) -> CameraNames {
        CameraNames(path: path, card: card, links: links(to: path), usb: usbID(ofNode: path))
    }

    /// The links in dev/v4l/by-id and dev/v4l/by-path that lead to `path`.
    func links(to path: String) -> [String] {
        guard let target = Self.realPath(path) else { return [] }
        var names: [String] = []
        for directory in [tree.dev + "/v4l/by-id", tree.dev + "/v4l/by-path"] {
            for entry in Self.entries(of: directory) where Self.realPath(directory + "/" + entry) == target {
                names.append(directory + "/" + entry)
            }
        }
        return names.sorted()
    }

    /// idVendor, idProduct and serial of the USB device a node belongs to:
    /// sysfs's `device` link leads to the USB interface, whose parent is the device.
    func usbID(ofNode path: String) -> DeviceName.USBID? {
        let node = path.split(separator: "/").last.map(String.init) ?? path
        guard let interface = Self.realPath(tree.sysClassVideo + "/" + node + "/device") else { return nil }
        let parent = String(interface[..<(interface.lastIndex(of: "/") ?? interface.endIndex)])
        for directory in [interface, parent] {
            guard let vendor = Self.attribute(directory + "/idVendor").flatMap({ UInt16($0, radix: 16) }),
                  let product = Self.attribute(directory + "/idProduct").flatMap({ UInt16($0, radix: 16) }) else { continue }
            let serial = Self.attribute(directory + "/serial").flatMap { $0.isEmpty ? nil : $0 }
            return DeviceName.USBID(vendor: vendor, product: product, serial: serial)
        }
        return nil
    }

    /// The error for a name nothing matches, with what there is instead.
    private func noMatch(_ name: DeviceName) -> CaptureError {
        var available: [String] = []
        for path in DeviceDiscovery.videoNodes(in: tree.dev) {
            do throws(CaptureError) {
                let device = try V4L2Device.open(path: path, kernel: kernel)
                let camera = names(of: path, card: device.capabilities.card)
                let also = [camera.usb?.description].compactMap { $0 } + camera.links
                available.append("\(path) \"\(camera.card)\"" + (also.isEmpty ? "" : " (\(also.joined(separator: ", ")))"))
            } catch {
                if case .permissionDenied = error { available.append("\(path) (permission denied)") }
            }
        }
        return .noMatchingDevice(name: name.description, available: available)
    }

    // MARK: file system

    static func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func entries(of directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = cString(entry.pointee.d_name)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// A sysfs attribute's text, trimmed; nil when it cannot be read.
    static func attribute(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { return nil }
        return String(decoding: buffer.prefix(n), as: UTF8.self).trimmingWhitespace
    }
}

extension String {
    var trimmingWhitespace: String {
        var text = Substring(self)
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return String(text)
    }
}
