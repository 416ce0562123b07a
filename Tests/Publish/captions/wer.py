#!/usr/bin/env python3
"""Word error rate of captions against the sentences that were spoken.

    wer.py REFERENCE HYPOTHESIS [--per-line] [--json]

REFERENCE and HYPOTHESIS are text files (or '-' for standard input), any number of
utterances each, one per line. The whole of each file is compared as one sequence of words,
so a recogniser that splits or joins utterances differently from the reference is not
punished for that: only substituted, deleted and inserted words count.
--per-line also prints each line's WER (the files must have as many lines).

Normalisation, on both sides alike:
  - lower case; apostrophes dropped ("don't" -> "dont"); any other character that is not a
    letter or digit separates words (so hyphens and punctuation go);
  - numbers written in digits become words: "100" -> "one hundred", "7" -> "seven",
    "2.5" -> "two point five", "1,200" -> "one thousand two hundred", "%" -> "percent";
    ordinals ("1st") become their cardinal words ("one"). Number words are left as they
    are, so "one hundred" matches "100" but "a hundred" does not.
"""
import json
import re
import sys

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SCALES = [(10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand"), (100, "hundred")]


def number_words(n: int) -> list[str]:
    """English words of a non-negative integer, without "and": 105 -> one hundred five."""
    if n < 20:
        return [ONES[n]]
    if n < 100:
        return [TENS[n // 10]] + (number_words(n % 10) if n % 10 else [])
    for value, name in SCALES:
        if n >= value:
            return number_words(n // value) + [name] + (number_words(n % value) if n % value else [])
    raise AssertionError(n)


def _spell_number(match: re.Match) -> str:
    whole, fraction = match.group(1).replace(",", ""), match.group(2)
    words = number_words(int(whole))
    if fraction:
        words += ["point"] + [ONES[int(d)] for d in fraction]
    return " " + " ".join(words) + " "


def normalise(text: str) -> list[str]:
    """The words of a text, normalised as the module says."""
    text = text.lower().replace("%", " percent ")
    text = re.sub(r"['\u2019]", "", text)
    # Digits, with thousands separators and a decimal part; an ordinal suffix is dropped.
    text = re.sub(r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:st|nd|rd|th)?", _spell_number, text)
    return re.findall(r"[^\W_]+", text)


def edit_distance(reference: list[str], hypothesis: list[str]) -> tuple[int, int, int]:
    """Word-level Levenshtein alignment: (substitutions, deletions, insertions) of a cheapest one."""
    # Each cell holds (cost, substitutions, deletions, insertions).
    previous = [(j, 0, 0, j) for j in range(len(hypothesis) + 1)]
    for i, ref_word in enumerate(reference, 1):
        current = [(i, 0, i, 0)]
        for j, hyp_word in enumerate(hypothesis, 1):
            diagonal = previous[j - 1]
            if ref_word == hyp_word:
                best = diagonal
            else:
                best = (diagonal[0] + 1, diagonal[1] + 1, diagonal[2], diagonal[3])
            up = previous[j]          # reference word deleted
            if up[0] + 1 < best[0]:
                best = (up[0] + 1, up[1], up[2] + 1, up[3])
            left = current[j - 1]     # hypothesis word inserted
            if left[0] + 1 < best[0]:
                best = (left[0] + 1, left[1], left[2], left[3] + 1)
            current.append(best)
        previous = current
    _, s, d, n = previous[-1]
    return s, d, n


def word_error_rate(reference: list[str], hypothesis: list[str]) -> float:
    """WER of hypothesis texts against reference texts (each a list of utterances or of words).

    Both lists are joined and normalised, then aligned as one word sequence:
    (substitutions + deletions + insertions) / reference words. An empty reference gives 0.0
    for an empty hypothesis and 1.0 otherwise.
    """
    ref = normalise(" ".join(reference))
    hyp = normalise(" ".join(hypothesis))
    if not ref:
        return 0.0 if not hyp else 1.0
    return sum(edit_distance(ref, hyp)) / len(ref)


def _read_lines(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    return [line for line in text.splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if len(args) != 2 or not flags <= {"--per-line", "--json"}:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    reference, hypothesis = _read_lines(args[0]), _read_lines(args[1])
    ref_words, hyp_words = normalise(" ".join(reference)), normalise(" ".join(hypothesis))
    s, d, i = edit_distance(ref_words, hyp_words)
    result = {"wer": word_error_rate(reference, hypothesis), "reference_words": len(ref_words),
              "substitutions": s, "deletions": d, "insertions": i}
    if "--per-line" in flags:
        if len(reference) != len(hypothesis):
            print(f"wer: --per-line needs as many lines ({len(reference)} and {len(hypothesis)})", file=sys.stderr)
            return 65
        result["lines"] = [word_error_rate([r], [h]) for r, h in zip(reference, hypothesis)]
    if "--json" in flags:
        print(json.dumps(result))
    else:
        for n, line_wer in enumerate(result.get("lines", []), 1):
            if line_wer:
                print(f"line {n}: WER {line_wer:.3f}: {reference[n - 1]!r} -> {hypothesis[n - 1]!r}")
        print(f"WER {result['wer']:.4f} ({s} substituted, {d} deleted, {i} inserted of {len(ref_words)} words)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
