/// What Whisper writes that is not speech: its non-speech tags ("[BLANK_AUDIO]",
/// "(music)", "*coughs*") and stray spaces. What is left is caption text.
enum TranscriptCleanup {
    static func clean(_ raw: String) -> String {
        var out = ""
        var closer: Character?
        for c in raw {
            if let expected = closer {
                if c == expected { closer = nil }
                continue
            }
            switch c {
            case "[": closer = "]"
            case "(": closer = ")"
            case "*": closer = "*"
            default: out.append(c)
            }
        }
        return out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}
