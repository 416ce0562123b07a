import Logging
import MediaTypes

/// Picks the capture device the user asked for.
public enum AudioCaptureChoice {
    /// "auto": the default ALSA device, or silence (with a warning) on a box
    /// with no sound card. Any other name is an ALSA device that must exist.
    /// Returns the device and the warning to show, if any.
    public static func make(name: String, format: AudioFormat, logger: Logger,
                            debugStallMilliseconds: Int = 0, reconnect: Bool = false) throws(AudioError) -> (device: any AudioDevice, warning: String?) {
        if name == "auto" {
            guard AudioDevices.hasSoundCard else {
                return (SilentAudioCapture(format: format), "no sound card found: capturing silence")
            }
            return (ALSAAudioDevice(captureDevice: "default", renderDevice: nil, format: format, logger: logger,
                                    debugStallMilliseconds: debugStallMilliseconds, reconnect: reconnect), nil)
        }
        guard AudioDevices.hasSoundCard else { throw .noSoundCard }
        return (ALSAAudioDevice(captureDevice: name, renderDevice: nil, format: format, logger: logger,
                                debugStallMilliseconds: debugStallMilliseconds, reconnect: reconnect), nil)
    }
}
