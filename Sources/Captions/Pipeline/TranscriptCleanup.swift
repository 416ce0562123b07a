/// What Whisper writes that is not speech: its non-speech tags ("[BLANK_AUDIO]",
/// "(music)", "*coughs*"), stray spaces, and the words of a repetition loop.
/// What is left is caption text.
enum TranscriptCleanup {
    /// A run of this many words or more, said again straight after itself, is
    /// a loop of the model, not speech (a speaker who repeats a phrase of four
    /// words back to back loses the repeat: a small price next to a doubled caption).
    static let minimumLoopWords = 4

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
        let words = out.split(whereSeparator: \.isWhitespace)
        return droppingLoops(words).joined(separator: " ")
    }

    /// Whisper's tiny model sometimes says a sentence and then starts it again,
    /// until its token budget runs out: "… after dark. The camera on the front
    /// door … after dark. The camera on". Seen in a final under load; the
    /// partials before it were right. The first saying stays, the repeats go,
    /// and so does a cut-off last one.
    static func droppingLoops(_ words: [Substring]) -> [Substring] {
        var words = words
        var keys = words.map(key)
        var start = 0
        while start < words.count {
            guard let period = loopPeriod(keys, at: start) else {
                start += 1
                continue
            }
            // The loop goes on while each word is the one a period back.
            var end = min(start + 2 * period, keys.count)
            while end < keys.count, keys[end] == keys[end - period] { end += 1 }
            words.removeSubrange((start + period)..<end)
            keys.removeSubrange((start + period)..<end)
            start += period
        }
        return words
    }

    /// The length of a run at `start` that is said again straight after
    /// itself (the shortest such run), or whose start is said again up to
    /// the end of the text (the budget ran out mid-repeat), if any.
    private static func loopPeriod(_ keys: [String], at start: Int) -> Int? {
        let remaining = keys.count - start
        guard remaining >= 2 * minimumLoopWords else { return nil }
        for period in minimumLoopWords...(remaining / 2)
        where keys[start..<(start + period)].elementsEqual(keys[(start + period)..<(start + 2 * period)]) {
            return period
        }
        for period in stride(from: remaining - minimumLoopWords, to: remaining / 2, by: -1)
        where keys[(start + period)...].elementsEqual(keys[start..<(start + remaining - period)]) {
            return period
        }
        return nil
    }

    /// A word as compared for loops: lowercase, letters, digits and apostrophes.
    private static func key(_ word: Substring) -> String {
        String(word.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "'" })
    }
}
