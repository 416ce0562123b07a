import Foundation
import MediaTypes
import Publisher

/// `--stdin-control` of publish and subscribe: lines on stdin, one command
/// each ('video off', 'video on', 'audio off', 'audio on'), for scripts and
/// operators. Publish turns what it sends off and on (publishVideo,
/// publishAudio), and takes 'captions on|off' too (publishCaptions);
/// subscribe what it receives (subscribeToVideo/Audio), and takes
/// 'resolution WxH' or 'resolution any' too (preferredResolution).
enum StdinControl {
    enum Command: Sendable {
        case media(MediaKind, on: Bool)
        case preferredResolution(FrameSize)
        case captions(on: Bool)
    }

    /// Reads stdin on a thread of its own until it ends, handing each command to `apply`.
    static func start(takesResolution: Bool = false, takesCaptions: Bool = false,
                      _ apply: @escaping @Sendable (Command) -> Void) {
        let known = "video on|off, audio on|off" + (takesResolution ? ", resolution WxH (up to \(maxResolution))|any" : "")
            + (takesCaptions ? ", captions on|off" : "")
        let thread = Thread {
            while let line = readLine() {
                guard let command = parse(line, takesResolution: takesResolution, takesCaptions: takesCaptions) else {
                    printError("camagent: unknown command \"\(line)\" (\(known))")
                    continue
                }
                apply(command)
            }
        }
        thread.name = "camagent-stdin"
        thread.start()
    }

    static func parse(_ line: String, takesResolution: Bool, takesCaptions: Bool = false) -> Command? {
        let words = line.lowercased().split(separator: " ").map(String.init)
        guard words.count == 2 else { return nil }
        let onOff = ["on", "off"].contains(words[1])
        if let kind = MediaKind(rawValue: words[0]), onOff { return .media(kind, on: words[1] == "on") }
        if takesCaptions, words[0] == "captions", onOff { return .captions(on: words[1] == "on") }
        guard takesResolution, words[0] == "resolution" else { return nil }
        // The contract has no way to take a preference back: the largest size the router takes fits every layer.
        if words[1] == "any" { return .preferredResolution(maxResolution) }
        // Within what the router takes, as --preferred-resolution: beyond it the router's 400 went unseen.
        return FrameSize(parsing: words[1]).flatMap {
            $0.width <= maxResolution.width && $0.height <= maxResolution.height ? .preferredResolution($0) : nil
        }
    }

    /// The largest preferredResolution the router takes.
    static let maxResolution = FrameSize(width: 7680, height: 4320)
}
