import MediaTypes

/// The single-planar pixel format of a stream (struct v4l2_pix_format).
struct V4L2PixFormat: Hashable, Sendable {
    var pixelFormat: PixelFormat
    var width: Int
    var height: Int
    var bytesPerLine: Int
    var sizeImage: Int
}
