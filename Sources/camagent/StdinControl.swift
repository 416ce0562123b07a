import Foundation
import Publisher

/// `--stdin-control` of publish and subscribe: lines on stdin, one command
/// each ('video off', 'video on', 'audio off', 'audio on'), for scripts and
/// operators. Publish turns what it sends off and on (publishVideo,
/// publishAudio); subscribe what it receives (subscribeToVideo/Audio).
enum StdinControl {
    /// Reads stdin on a thread of its own until it ends, handing each command to `apply`.
    static func start(_ apply: @escaping @Sendable (_ kind: MediaKind, _ on: Bool) -> Void) {
        let thread = Thread {
            while let line = readLine() {
                let words = line.lowercased().split(separator: " ")
                guard words.count == 2, let kind = MediaKind(rawValue: String(words[0])), ["on", "off"].contains(words[1]) else {
                    printError("camagent: unknown command \"\(line)\" (video on|off, audio on|off)")
                    continue
                }
                apply(kind, words[1] == "on")
            }
        }
        thread.name = "camagent-stdin"
        thread.start()
    }
}
