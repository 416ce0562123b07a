/// Receives frames from a ``VideoCapture`` (OpenTok's `OTVideoCaptureConsumer`).
///
/// `consume` is called on the capturer's thread: return quickly, and keep a
/// reference to the frame for as long as it is needed (the pool reuses it
/// only after the last reference goes away).
public protocol VideoCaptureConsumer: AnyObject, Sendable {
    func consume(_ frame: VideoFrame)
    func captureEvent(_ event: CaptureEvent)
}

extension VideoCaptureConsumer {
    public func captureEvent(_ event: CaptureEvent) {}
}
