import MediaTypes
import PixelConversion

/// Turns one driver buffer into a pooled NV12 frame: the single conversion
/// (or copy) on the capture path, after which the buffer goes straight back
/// to the driver.
struct FrameConverter {
    enum Failure: Error, Hashable { case tooShort, badJPEG }

    let deviceFormat: V4L2PixFormat
    /// Set for MJPEG devices; one per capture session (it keeps scratch planes).
    let jpegDecoder: JPEGDecoder?

    init(deviceFormat: V4L2PixFormat) {
        self.deviceFormat = deviceFormat
        jpegDecoder = deviceFormat.pixelFormat.isCompressed ? JPEGDecoder() : nil
    }

    /// Bytes a complete raw picture takes; compressed formats have no minimum.
    var minimumBytes: Int {
        switch deviceFormat.pixelFormat {
        case .yuyv: deviceFormat.bytesPerLine * deviceFormat.height
        // The UV plane has (height + 1) / 2 rows: for an odd height that is more than height / 2,
        // and copyNV12 reads them all.
        case .nv12: deviceFormat.bytesPerLine * (deviceFormat.height + (deviceFormat.height + 1) / 2)
        default: 4
        }
    }

    /// Converts `bytes` (the used part of a driver buffer) into `frame`.
    func convert(_ bytes: UnsafeRawBufferPointer, into frame: VideoFrame) throws(Failure) {
        guard bytes.count >= minimumBytes else { throw .tooShort }
        switch deviceFormat.pixelFormat {
        case .yuyv:
            NV12Conversion.yuyvToNV12(bytes, stride: deviceFormat.bytesPerLine, into: frame)
        case .nv12:
            NV12Conversion.copyNV12(bytes, stride: deviceFormat.bytesPerLine, height: deviceFormat.height, into: frame)
        default:
            do {
                try jpegDecoder?.decode(bytes, into: frame)
            } catch {
                throw .badJPEG
            }
        }
    }
}
