import ArgumentParser
import AudioDevices
import MediaTypes
import VideoSources

/// `camagent devices`: every video capture node, with formats, sizes and rates.
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List video capture devices with their formats, sizes and frame rates.")

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    @Option(help: "Describe only this camera: a node, a /dev/v4l link, a card name or usb:VID:PID[:SERIAL].")
    var device: String?

    @OptionGroup var global: GlobalOptions

    struct Listing: Encodable {
        var video: [VideoDeviceDescription]
        var audio: [AudioDeviceDescription]
    }

    func run() throws {
        let video: [VideoDeviceDescription]
        if let device {
            do throws(CaptureError) {
                video = [try VideoDevices.describe(name: device)]
            } catch {
                throw fail(error)
            }
        } else {
            video = VideoDevices.list()
        }
        let audio = device == nil ? AudioDevices.list() : []
        if json {
            print(JSONOutput.pretty(Listing(video: video, audio: audio)))
            return
        }
        if video.isEmpty {
            print("No video capture devices found (camagent can still run on the built-in test pattern: --device test-pattern).")
        }
        for d in video {
            print(DeviceText.describe(d))
        }
        guard device == nil else { return }
        if audio.isEmpty {
            print("No sound cards found (audio capture falls back to silence with --audio auto).")
        }
        for a in audio {
            let rates = a.rates.isEmpty ? (a.note ?? "no S16LE rates") : a.rates.map(String.init).joined(separator: ", ") + " Hz"
            print("\(a.alsaName) \(a.direction): \(a.cardName) — \(a.name) (card \(a.cardId)); \(rates); \(a.minChannels)-\(a.maxChannels) channels")
        }
    }
}

/// Human-readable device listings.
enum DeviceText {
    static func describe(_ d: VideoDeviceDescription) -> String {
        var lines = ["\(d.path): \(d.card) (driver \(d.driver), bus \(d.busInfo))"]
        // Names that find this camera again after a replug or a reboot renumbers the nodes.
        for name in d.names { lines.append("  also --device \(name.contains(" ") ? "\"\(name)\"" : name)") }
        for f in d.formats {
            let flags = [f.compressed ? "compressed" : nil, f.emulated ? "emulated, not used" : nil].compactMap { $0 }
            let suffix = flags.isEmpty ? "" : " [\(flags.joined(separator: ", "))]"
            lines.append("  \(f.fourcc) \(f.description)\(suffix)")
            for s in f.sizes {
                lines.append("    \(sizeText(s)): \(s.intervals.map(intervalText).joined(separator: ", "))")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func sizeText(_ s: VideoDeviceDescription.Size) -> String {
        switch s.kind {
        case "discrete": return "\(s.width)x\(s.height)"
        default:
            return "\(s.width)x\(s.height) to \(s.maxWidth ?? 0)x\(s.maxHeight ?? 0) (\(s.kind), step \(s.stepWidth ?? 1)x\(s.stepHeight ?? 1))"
        }
    }

    static func intervalText(_ i: VideoDeviceDescription.Interval) -> String {
        switch i.kind {
        case "discrete": return "\(i.fps.formatted(decimals: 3)) fps"
        default: return "\((i.minFps ?? 0).formatted(decimals: 3))-\(i.fps.formatted(decimals: 3)) fps (\(i.kind))"
        }
    }
}
