#if canImport(Glibc)
import Glibc
#endif
internal import CV4L2
import MediaTypes

/// The real kernel, reached through libv4l2 with its format conversion
/// disabled (libv4l's emulation is buggy; camagent converts with libyuv).
struct LibV4L2Kernel: V4L2Kernel {
    func isCharacterDevice(path: String) throws(Errno) -> Bool {
        var info = stat()
        let result = retryingOnInterrupt({ stat(path, &info) }, failed: { $0 != 0 })
        if case .failure(let e) = result { throw e }
        return (info.st_mode & S_IFMT) == S_IFCHR
    }

    func open(path: String) throws(Errno) -> Int32 {
        let opened = retryingOnInterrupt({ Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }, failed: { $0 < 0 })
        let fd: Int32
        switch opened {
        case .success(let f): fd = f
        case .failure(let e): throw e
        }
        // Only V4L2 nodes go to libv4l2 (it prints its own errors for others).
        var probe = v4l2_capability()
        let isV4L2 = withUnsafeMutablePointer(to: &probe) { pointer in
            retryingOnInterrupt({ cv4l2_kernel_ioctl(fd, CV4L2_VIDIOC_QUERYCAP, pointer) }, failed: { $0 < 0 })
        }
        if case .failure(let e) = isV4L2 {
            Glibc.close(fd)
            throw e
        }
        // Register the descriptor with libv4l2 without its conversion layer;
        // it then only passes calls through (and handles a few driver quirks).
        if v4l2_fd_open(fd, Int32(V4L2_DISABLE_CONVERSION)) < 0 {
            let e = Errno.current
            Glibc.close(fd)
            throw e
        }
        return fd
    }

    func close(_ fd: Int32) {
        _ = v4l2_close(fd)
    }

    /// One ioctl through libv4l2 on a C struct, EINTR retried.
    @inline(__always)
    private func ioctl<T>(_ fd: Int32, _ request: UInt, _ value: inout T) throws(Errno) {
        let result = withUnsafeMutablePointer(to: &value) { pointer in
            retryingOnInterrupt({ cv4l2_ioctl(fd, request, pointer) }, failed: { $0 < 0 })
        }
        if case .failure(let e) = result { throw e }
    }

    func queryCapabilities(_ fd: Int32) throws(Errno) -> V4L2Capabilities {
        var cap = v4l2_capability()
        try ioctl(fd, CV4L2_VIDIOC_QUERYCAP, &cap)
        let hasDeviceCaps = cap.capabilities & UInt32(V4L2_CAP_DEVICE_CAPS) != 0
        return V4L2Capabilities(
            driver: cString(cap.driver), card: cString(cap.card), busInfo: cString(cap.bus_info),
            flags: V4L2CapabilityFlags(rawValue: hasDeviceCaps ? cap.device_caps : cap.capabilities))
    }

    func enumerateFormat(_ fd: Int32, index: UInt32) throws(Errno) -> V4L2FormatEntry {
        var desc = v4l2_fmtdesc()
        desc.index = index
        desc.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        try ioctl(fd, CV4L2_VIDIOC_ENUM_FMT, &desc)
        return V4L2FormatEntry(
            pixelFormat: PixelFormat(fourcc: desc.pixelformat),
            description: cString(desc.description),
            isCompressed: desc.flags & UInt32(V4L2_FMT_FLAG_COMPRESSED) != 0,
            isEmulated: desc.flags & UInt32(V4L2_FMT_FLAG_EMULATED) != 0)
    }

    func enumerateFrameSize(_ fd: Int32, pixelFormat: PixelFormat, index: UInt32) throws(Errno) -> V4L2FrameSizeEntry {
        var e = v4l2_frmsizeenum()
        e.index = index
        e.pixel_format = pixelFormat.fourcc
        try ioctl(fd, CV4L2_VIDIOC_ENUM_FRAMESIZES, &e)
        switch e.type {
        case V4L2_FRMSIZE_TYPE_DISCRETE.rawValue:
            return .discrete(FrameSize(width: Int(e.discrete.width), height: Int(e.discrete.height)))
        case V4L2_FRMSIZE_TYPE_CONTINUOUS.rawValue:
            let s = e.stepwise
            return .continuous(min: FrameSize(width: Int(s.min_width), height: Int(s.min_height)),
                               max: FrameSize(width: Int(s.max_width), height: Int(s.max_height)))
        default:
            let s = e.stepwise
            return .stepwise(min: FrameSize(width: Int(s.min_width), height: Int(s.min_height)),
                             max: FrameSize(width: Int(s.max_width), height: Int(s.max_height)),
                             step: FrameSize(width: Int(max(s.step_width, 1)), height: Int(max(s.step_height, 1))))
        }
    }

    func enumerateFrameInterval(_ fd: Int32, pixelFormat: PixelFormat, size: FrameSize, index: UInt32) throws(Errno) -> V4L2FrameIntervalEntry {
        var e = v4l2_frmivalenum()
        e.index = index
        e.pixel_format = pixelFormat.fourcc
        e.width = UInt32(size.width)
        e.height = UInt32(size.height)
        try ioctl(fd, CV4L2_VIDIOC_ENUM_FRAMEINTERVALS, &e)
        func interval(_ f: v4l2_fract) -> FrameInterval { FrameInterval(numerator: f.numerator, denominator: f.denominator) }
        switch e.type {
        case V4L2_FRMIVAL_TYPE_DISCRETE.rawValue:
            return .discrete(interval(e.discrete))
        case V4L2_FRMIVAL_TYPE_CONTINUOUS.rawValue:
            return .continuous(min: interval(e.stepwise.min), max: interval(e.stepwise.max))
        default:
            return .stepwise(min: interval(e.stepwise.min), max: interval(e.stepwise.max), step: interval(e.stepwise.step))
        }
    }

    private func pixFormat(_ f: v4l2_format) -> V4L2PixFormat {
        let p = f.fmt.pix
        return V4L2PixFormat(pixelFormat: PixelFormat(fourcc: p.pixelformat), width: Int(p.width),
                             height: Int(p.height), bytesPerLine: Int(p.bytesperline), sizeImage: Int(p.sizeimage))
    }

    private func cFormat(_ format: V4L2PixFormat, type: v4l2_buf_type) -> v4l2_format {
        var f = v4l2_format()
        f.type = type.rawValue
        f.fmt.pix.pixelformat = format.pixelFormat.fourcc
        f.fmt.pix.width = UInt32(format.width)
        f.fmt.pix.height = UInt32(format.height)
        f.fmt.pix.bytesperline = UInt32(format.bytesPerLine)
        f.fmt.pix.sizeimage = UInt32(format.sizeImage)
        f.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        return f
    }

    func getFormat(_ fd: Int32) throws(Errno) -> V4L2PixFormat {
        var f = v4l2_format()
        f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        try ioctl(fd, CV4L2_VIDIOC_G_FMT, &f)
        return pixFormat(f)
    }

    func setFormat(_ fd: Int32, _ format: V4L2PixFormat) throws(Errno) -> V4L2PixFormat {
        var f = cFormat(format, type: V4L2_BUF_TYPE_VIDEO_CAPTURE)
        try ioctl(fd, CV4L2_VIDIOC_S_FMT, &f)
        return pixFormat(f)
    }

    func setOutputFormat(_ fd: Int32, _ format: V4L2PixFormat) throws(Errno) -> V4L2PixFormat {
        var f = cFormat(format, type: V4L2_BUF_TYPE_VIDEO_OUTPUT)
        try ioctl(fd, CV4L2_VIDIOC_S_FMT, &f)
        return pixFormat(f)
    }

    private func streamParameters(_ p: v4l2_streamparm) -> V4L2StreamParameters {
        let c = p.parm.capture
        return V4L2StreamParameters(
            supportsFrameInterval: c.capability & UInt32(V4L2_CAP_TIMEPERFRAME) != 0,
            frameInterval: FrameInterval(numerator: c.timeperframe.numerator, denominator: c.timeperframe.denominator))
    }

    func getStreamParameters(_ fd: Int32) throws(Errno) -> V4L2StreamParameters {
        var p = v4l2_streamparm()
        p.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        try ioctl(fd, CV4L2_VIDIOC_G_PARM, &p)
        return streamParameters(p)
    }

    func setFrameInterval(_ fd: Int32, _ interval: FrameInterval) throws(Errno) -> V4L2StreamParameters {
        var p = v4l2_streamparm()
        p.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        p.parm.capture.timeperframe = v4l2_fract(numerator: interval.numerator, denominator: interval.denominator)
        try ioctl(fd, CV4L2_VIDIOC_S_PARM, &p)
        // Read back what was granted rather than trusting the reply alone.
        return try getStreamParameters(fd)
    }

    func requestBuffers(_ fd: Int32, count: Int) throws(Errno) -> Int {
        var r = v4l2_requestbuffers()
        r.count = UInt32(count)
        r.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        r.memory = V4L2_MEMORY_MMAP.rawValue
        try ioctl(fd, CV4L2_VIDIOC_REQBUFS, &r)
        return Int(r.count)
    }

    func queryBuffer(_ fd: Int32, index: Int) throws(Errno) -> (offset: Int, length: Int) {
        var b = v4l2_buffer()
        b.index = UInt32(index)
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        try ioctl(fd, CV4L2_VIDIOC_QUERYBUF, &b)
        return (Int(b.m.offset), Int(b.length))
    }

    func mapBuffer(_ fd: Int32, offset: Int, length: Int) throws(Errno) -> UnsafeMutableRawPointer {
        let address = v4l2_mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, Int64(offset))
        guard let address, address != MAP_FAILED else { throw Errno.current }
        return address
    }

    func unmapBuffer(_ address: UnsafeMutableRawPointer, length: Int) {
        _ = v4l2_munmap(address, length)
    }

    func queueBuffer(_ fd: Int32, index: Int) throws(Errno) {
        var b = v4l2_buffer()
        b.index = UInt32(index)
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        try ioctl(fd, CV4L2_VIDIOC_QBUF, &b)
    }

    func dequeueBuffer(_ fd: Int32) throws(Errno) -> V4L2DequeuedBuffer {
        var b = v4l2_buffer()
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        try ioctl(fd, CV4L2_VIDIOC_DQBUF, &b)
        return V4L2DequeuedBuffer(
            index: Int(b.index), bytesUsed: Int(b.bytesused), sequence: b.sequence, flags: b.flags,
            timestamp: MonotonicTimestamp(seconds: Int(b.timestamp.tv_sec), microseconds: Int(b.timestamp.tv_usec)))
    }

    func streamOn(_ fd: Int32) throws(Errno) {
        var type = Int32(V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
        try ioctl(fd, CV4L2_VIDIOC_STREAMON, &type)
    }

    func streamOff(_ fd: Int32) throws(Errno) {
        var type = Int32(V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
        try ioctl(fd, CV4L2_VIDIOC_STREAMOFF, &type)
    }

    func poll(_ fd: Int32, wakeFD: Int32, timeoutMilliseconds: Int32) throws(Errno) -> V4L2PollResult {
        // Two descriptors on the stack: no allocation per wait.
        var fds = (pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
        let count = withUnsafeMutableBytes(of: &fds) { raw in
            Glibc.poll(raw.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, timeoutMilliseconds)
        }
        if count < 0 {
            let e = Errno.current
            if e == .interrupted { return .timedOut }  // the caller loops anyway
            throw e
        }
        let device = fds.0.revents
        return V4L2PollResult(
            deviceReadable: device & Int16(POLLIN) != 0,
            deviceError: device & Int16(POLLERR | POLLHUP | POLLNVAL) != 0,
            woken: fds.1.revents & Int16(POLLIN) != 0)
    }

    func queryControl(_ fd: Int32, id: UInt32) throws(Errno) -> V4L2ControlInfo {
        var q = v4l2_queryctrl()
        q.id = id
        try ioctl(fd, CV4L2_VIDIOC_QUERYCTRL, &q)
        return V4L2ControlInfo(id: q.id, name: cString(q.name), minimum: q.minimum, maximum: q.maximum,
                               defaultValue: q.default_value, isDisabled: q.flags & UInt32(V4L2_CTRL_FLAG_DISABLED) != 0)
    }

    func getControl(_ fd: Int32, id: UInt32) throws(Errno) -> Int32 {
        var c = v4l2_control(id: id, value: 0)
        try ioctl(fd, CV4L2_VIDIOC_G_CTRL, &c)
        return c.value
    }

    func setControl(_ fd: Int32, id: UInt32, value: Int32) throws(Errno) {
        var c = v4l2_control(id: id, value: value)
        try ioctl(fd, CV4L2_VIDIOC_S_CTRL, &c)
    }

    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        let result = retryingOnInterrupt({ v4l2_write(fd, bytes.baseAddress, bytes.count) }, failed: { $0 < 0 })
        switch result {
        case .success(let n): return n
        case .failure(let e): throw e
        }
    }
}

/// Reads a fixed-size C char array (a tuple in Swift) up to its NUL.
func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
        let bytes = raw.prefix { $0 != 0 }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The V4L2 control id of "Exposure, Dynamic Framerate" (exposure_auto_priority).
let exposureAutoPriorityControl: UInt32 = CV4L2_CID_EXPOSURE_AUTO_PRIORITY
