"""The WER scorer the captions tests and benchmark rely on (Tests/Publish/captions/wer.py)."""
import os
import subprocess
import sys

from wer import edit_distance, normalise, number_words, word_error_rate

HERE = os.path.dirname(os.path.abspath(__file__))


def test_normalise_case_punctuation_and_numbers():
    assert normalise("Water boils at 100 degrees, at sea-level!") == \
        "water boils at one hundred degrees at sea level".split()
    assert normalise("Don't wait; it's 7.") == ["dont", "wait", "its", "seven"]
    assert normalise("1,205 and 2.5% on the 21st") == \
        "one thousand two hundred five and two point five percent on the twenty one".split()


def test_number_words():
    assert number_words(0) == ["zero"]
    assert number_words(19) == ["nineteen"]
    assert number_words(40) == ["forty"]
    assert number_words(1000000) == ["one", "million"]


def test_edit_distance_counts_each_kind():
    assert edit_distance("a b c d".split(), "a x c d e".split()) == (1, 0, 1)
    assert edit_distance("a b c".split(), "a c".split()) == (0, 1, 0)
    assert edit_distance([], "a b".split()) == (0, 0, 2)


def test_word_error_rate():
    assert word_error_rate(["The cat sat."], ["the cat sat"]) == 0.0
    assert word_error_rate(["the cat sat on"], ["a cat sat"]) == 0.5
    assert word_error_rate(["one hundred degrees"], ["100 degrees."]) == 0.0
    # Utterances split differently from the reference cost nothing.
    assert word_error_rate(["a b", "c d"], ["a b c", "d"]) == 0.0
    assert word_error_rate([], []) == 0.0
    assert word_error_rate([], ["noise"]) == 1.0


def test_sentences_file_shape():
    with open(os.path.join(HERE, "sentences.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) == 20
    assert all(6 <= len(line.split()) <= 15 for line in lines)


def test_cli(tmp_path):
    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_text("the cat sat\non the mat\n")
    hyp.write_text("the cat sat\non a mat\n")
    out = subprocess.run([sys.executable, os.path.join(HERE, "wer.py"), str(ref), str(hyp), "--json", "--per-line"],
                         check=True, capture_output=True, text=True).stdout
    assert '"wer": 0.16666666666666666' in out and '"lines": [0.0, 0.3333333333333333]' in out
