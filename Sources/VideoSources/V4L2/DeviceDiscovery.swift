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
}
