import MediaTypes

/// The driver's mmap buffers, owned by one value: its deinit unmaps them, so
/// they cannot outlive a stream or be unmapped twice.
struct MappedBuffers: ~Copyable {
    struct Buffer {
        var address: UnsafeMutableRawPointer
        var length: Int
    }

    let kernel: any V4L2Kernel
    let buffers: [Buffer]

    /// Requests `count` buffers (the driver may give fewer) and maps them all.
    init(device: V4L2Device, count: Int) throws(CaptureError) {
        kernel = device.kernel
        let granted: Int
        do {
            granted = try device.kernel.requestBuffers(device.fd, count: count)
        } catch {
            throw device.error(error, during: "VIDIOC_REQBUFS")
        }
        guard granted > 0 else {
            throw .driverError(device: device.path, operation: "VIDIOC_REQBUFS (no buffers granted)", errno: 0)
        }
        var mapped: [Buffer] = []
        mapped.reserveCapacity(granted)
        for index in 0..<granted {
            do {
                let (offset, length) = try device.kernel.queryBuffer(device.fd, index: index)
                let address = try device.kernel.mapBuffer(device.fd, offset: offset, length: length)
                mapped.append(Buffer(address: address, length: length))
            } catch {
                for b in mapped { device.kernel.unmapBuffer(b.address, length: b.length) }
                _ = try? device.kernel.requestBuffers(device.fd, count: 0)
                throw device.error(error, during: "mmap of buffer \(index)")
            }
        }
        buffers = mapped
    }

    var count: Int { buffers.count }

    deinit {
        for b in buffers { kernel.unmapBuffer(b.address, length: b.length) }
    }
}
