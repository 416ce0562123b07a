#if canImport(Glibc)
import Glibc
#endif
internal import CALSA
import Logging

/// An ALSA PCM device as `camagent devices` shows it.
public struct AudioDeviceDescription: Codable, Hashable, Sendable {
    public var card: Int
    public var device: Int
    /// The name to open it by, e.g. "hw:1,0".
    public var alsaName: String
    public var cardId: String
    public var cardName: String
    public var name: String
    public var direction: AudioDirection
    /// Common rates the device accepts (tested one by one), S16LE.
    public var rates: [Int]
    public var minChannels: Int
    public var maxChannels: Int
    /// Set when the device could not be opened to read its rates (busy, for instance).
    public var note: String?
}

public enum AudioDevices {
    static let commonRates = [8_000, 11_025, 16_000, 22_050, 32_000, 44_100, 48_000, 88_200, 96_000]

    /// True when the system has at least one sound card.
    public static var hasSoundCard: Bool {
        var card: Int32 = -1
        return snd_card_next(&card) == 0 && card >= 0
    }

    /// Every capture and playback PCM of every card.
    public static func list() -> [AudioDeviceDescription] {
        calsa_silence_library_errors()
        var result: [AudioDeviceDescription] = []
        var card: Int32 = -1
        while snd_card_next(&card) == 0 && card >= 0 {
            var ctl: OpaquePointer?
            guard snd_ctl_open(&ctl, "hw:\(card)", 0) == 0, let ctl else { continue }
            defer { snd_ctl_close(ctl) }
            var info: OpaquePointer?
            snd_ctl_card_info_malloc(&info)
            defer { snd_ctl_card_info_free(info) }
            guard snd_ctl_card_info(ctl, info) == 0 else { continue }
            let cardId = String(cString: snd_ctl_card_info_get_id(info))
            let cardName = String(cString: snd_ctl_card_info_get_name(info))
            var device: Int32 = -1
            while snd_ctl_pcm_next_device(ctl, &device) == 0 && device >= 0 {
                for direction in [AudioDirection.capture, .playback] {
                    var pcmInfo: OpaquePointer?
                    snd_pcm_info_malloc(&pcmInfo)
                    defer { snd_pcm_info_free(pcmInfo) }
                    snd_pcm_info_set_device(pcmInfo, UInt32(device))
                    snd_pcm_info_set_subdevice(pcmInfo, 0)
                    snd_pcm_info_set_stream(pcmInfo, direction == .capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK)
                    guard snd_ctl_pcm_info(ctl, pcmInfo) == 0 else { continue }
                    let alsaName = "hw:\(card),\(device)"
                    var entry = AudioDeviceDescription(
                        card: Int(card), device: Int(device), alsaName: alsaName, cardId: cardId, cardName: cardName,
                        name: String(cString: snd_pcm_info_get_name(pcmInfo)), direction: direction,
                        rates: [], minChannels: 0, maxChannels: 0, note: nil)
                    probe(&entry)
                    result.append(entry)
                }
            }
        }
        return result
    }

    /// Fills rates and channels by opening the device without starting it.
    private static func probe(_ entry: inout AudioDeviceDescription) {
        var pcm: OpaquePointer?
        let stream = entry.direction == .capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK
        let r = snd_pcm_open(&pcm, entry.alsaName, stream, SND_PCM_NONBLOCK)
        guard r == 0, let pcm else {
            entry.note = "not probed: \(SystemErrorText.describeALSA(r))"
            return
        }
        defer { snd_pcm_close(pcm) }
        var hw: OpaquePointer?
        snd_pcm_hw_params_malloc(&hw)
        defer { snd_pcm_hw_params_free(hw) }
        guard snd_pcm_hw_params_any(pcm, hw) >= 0 else { return }
        var lo: UInt32 = 0, hi: UInt32 = 0
        snd_pcm_hw_params_get_channels_min(hw, &lo)
        snd_pcm_hw_params_get_channels_max(hw, &hi)
        entry.minChannels = Int(lo)
        entry.maxChannels = Int(min(hi, 64))
        let s16 = snd_pcm_hw_params_test_format(pcm, hw, SND_PCM_FORMAT_S16_LE) == 0
        entry.rates = s16 ? commonRates.filter { snd_pcm_hw_params_test_rate(pcm, hw, UInt32($0), 0) == 0 } : []
        if !s16 { entry.note = "no S16LE" }
    }
}

import MediaTypes

extension SystemErrorText {
    /// ALSA returns negative errno values.
    static func describeALSA(_ code: Int32) -> String { describe(-code) }
}
