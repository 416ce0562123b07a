#if canImport(Glibc)
import Glibc
#endif

/// Finds V4L2 nodes on the system.
enum DeviceDiscovery {
    /// /dev/video* in numeric order.
    static func videoNodes(in directory: String = "/dev") -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var numbers: [Int] = []
        while let entry = readdir(dir) {
            let name = cString(entry.pointee.d_name)
            if name.hasPrefix("video"), let n = Int(name.dropFirst(5)) { numbers.append(n) }
        }
        return numbers.sorted().map { "\(directory)/video\($0)" }
    }

    /// Paths to try when looking for a device that came back: the old path first.
    static func candidatePaths(preferring path: String) -> [String] {
        [path] + videoNodes().filter { $0 != path }
    }

    /// Stable names (/dev/v4l/by-id, /dev/v4l/by-path) that point at `path`.
    static func stableNames(for path: String) -> [String] {
        var names: [String] = []
        let target = realPath(path)
        for directory in ["/dev/v4l/by-id", "/dev/v4l/by-path"] {
            guard let dir = opendir(directory) else { continue }
            defer { closedir(dir) }
            while let entry = readdir(dir) {
                let name = cString(entry.pointee.d_name)
                guard name != ".", name != ".." else { continue }
                let link = "\(directory)/\(name)"
                if realPath(link) == target { names.append(link) }
            }
        }
        return names.sorted()
    }

    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
