"""What the captions tests (test_captions.py) and the captions benchmark
(Benchmarks/captions.py) share: test speech, words, and the processes around a captioned stream.

- Test speech: espeak-ng (Debian) speaks sentences of captions/sentences.txt, each to a
  WAV of its own; the speech in each is found from its energy envelope (10 ms RMS against
  the sentence's loudest 10 ms), cut out with a little margin, and the sentences are put
  into one WAV after a lead-in of silence, a fixed gap of silence apart. Where each
  sentence's speech starts and ends in that file is known to the 10 ms.
- Words: captions and references lowercased, punctuation dropped, for the word error
  rate of captions/wer.py.
- Processes: `camagent publish --audio file:WAV`, `camagent subscribe --captions --json`
  and caption_client.py (a raw WebSocket + WHEP client), their stdout read on a thread
  (router_support.drain) and waited on with a timeout; REST captions start and stop.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass, field

import numpy as np

from publish_support import BIN, HERE, PY, json_lines
from router_support import drain, http

CAPTIONS_DIR = os.path.join(HERE, "captions")
sys.path.insert(0, CAPTIONS_DIR)
import wer  # noqa: E402
from wer import word_error_rate  # noqa: E402,F401  (re-exported for the tests and the benchmark)

SENTENCES_FILE = os.path.join(CAPTIONS_DIR, "sentences.txt")
CLIENT = os.path.join(HERE, "caption_client.py")
EXIT_MISSING_AUDIO = 87
VOICE = "en-us"
FRAME_S = 0.010          # envelope resolution
SPEECH_DB = -30.0        # a 10 ms frame is speech when within 30 dB of the sentence's loudest frame
MARGIN_S = 0.05          # silence kept around each sentence's speech when it is cut out


def load_sentences():
    with open(SENTENCES_FILE) as f:
        sentences = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert sentences, f"no sentences in {SENTENCES_FILE}"
    return sentences


def words(text):
    """A text's words as captions/wer.py normalises them for the WER (its `normalise`), or
    where it has none, lowercase without punctuation: "Don't stop, Bob." -> ["don't", "stop", "bob"]."""
    if hasattr(wer, "normalise"):
        return wer.normalise(text)
    text = text.lower().replace("\u2019", "'").replace("-", " ")
    return [w.strip("'") for w in re.sub(r"[^a-z0-9' ]+", " ", text).split() if w.strip("'")]


def espeak_or_fail():
    if not shutil.which("espeak-ng"):
        raise AssertionError("espeak-ng is not installed (scripts/install --test installs it): "
                             "the captions tests speak their sentences with it")


def read_wav(path):
    """(int16 mono samples, rate) of a PCM16 WAV; stereo is averaged."""
    with wave.open(path) as w:
        assert w.getsampwidth() == 2, f"{path}: not 16-bit PCM"
        rate, channels = w.getframerate(), w.getnchannels()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return samples, rate


def speech_span(samples, rate):
    """(first, last) sample of speech: the first and last 10 ms frame within SPEECH_DB of the loudest."""
    n = int(rate * FRAME_S)
    frames = samples[: len(samples) // n * n].astype(np.float64).reshape(-1, n)
    rms = np.sqrt((frames ** 2).mean(axis=1))
    assert rms.max() > 100, "no speech in espeak-ng's output (all below -50 dBFS)"
    loud = np.flatnonzero(rms >= rms.max() * 10 ** (SPEECH_DB / 20))
    return loud[0] * n, (loud[-1] + 1) * n


@dataclass
class SpokenFile:
    """A WAV of sentences: path, rate, length, and each sentence's text and speech (seconds in the file)."""
    path: str
    rate: int
    duration: float
    sentences: list = field(default_factory=list)   # [{"text", "start", "end"}]

    @property
    def speech_seconds(self):
        return sum(s["end"] - s["start"] for s in self.sentences)

    def reference_words(self):
        return [w for s in self.sentences for w in words(s["text"])]


def speech_wav(path, sentences, *, lead_in, gap):
    """Speaks `sentences` with espeak-ng into one mono PCM16 WAV at `path`: `lead_in`
    seconds of silence, then each sentence's speech `gap` seconds of silence apart
    (measured between the speech itself, espeak-ng's own silences cut off)."""
    espeak_or_fail()
    pieces, placed, rate = [], [], None
    with tempfile.TemporaryDirectory(prefix="camagent-espeak-") as tmp:
        for i, text in enumerate(sentences):
            one = os.path.join(tmp, f"{i}.wav")
            done = subprocess.run(["espeak-ng", "-v", VOICE, "-w", one, text], capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, f"espeak-ng failed on {text!r}: {done.stderr}"
            samples, r = read_wav(one)
            assert rate in (None, r), (rate, r)
            rate = r
            first, last = speech_span(samples, rate)
            margin = int(MARGIN_S * rate)
            pieces.append(samples[max(0, first - margin): last + margin])
            placed.append((text, first - max(0, first - margin), last - first))
    out, position, spoken = [np.zeros(int(lead_in * rate), dtype=np.int16)], int(lead_in * rate), []
    for piece, (text, speech_at, speech_length) in zip(pieces, placed):
        if spoken:
            # `gap` of silence between the previous sentence's speech and this one's.
            previous_end = int(round(spoken[-1]["end"] * rate))
            pad = previous_end + int(gap * rate) - (position + speech_at)
            out.append(np.zeros(max(0, pad), dtype=np.int16))
            position += max(0, pad)
        spoken.append({"text": text, "start": (position + speech_at) / rate,
                       "end": (position + speech_at + speech_length) / rate})
        out.append(piece)
        position += len(piece)
    out.append(np.zeros(int(0.2 * rate), dtype=np.int16))
    data = np.concatenate(out)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.tobytes())
    return SpokenFile(path, rate, len(data) / rate, spoken)


# -- processes ------------------------------------------------------------------------

def json_events(proc):
    """The JSON lines a drained process has printed so far, parsed."""
    return json_lines("\n".join(list(proc.output)))


def proc_log(proc):
    try:
        return open(proc.log_path).read()[-3000:]
    except OSError:
        return ""


def wait_for_event(proc, predicate, what, timeout, context=lambda: "", needs=()):
    """The first JSON line of a drained process for which predicate(line) holds; fails the
    test with the process's output if none comes within `timeout`, or the process ends, or
    one of the processes it `needs` (a publisher it waits for) ends first."""
    deadline = time.monotonic() + timeout
    while True:
        for event in json_events(proc):
            if predicate(event):
                return event
        ended = proc.poll() is not None and not proc.reader.is_alive()
        gone = [p for p in needs if p.poll() is not None]
        if ended or gone or time.monotonic() > deadline:
            others = "".join(f"\n--- {p.label} ended (exit {p.returncode})\n" + "".join(p.output)[-2000:]
                             + proc_log(p) for p in gone)
            raise AssertionError(f"{proc.label}: no {what} within {timeout} s (exit {proc.poll()})\n--- stdout\n"
                                 + "".join(proc.output)[-3000:] + "\n--- stderr\n" + proc_log(proc) + others
                                 + context())
        time.sleep(0.1)


def start_publisher(net, workdir, session_url, token, wav, *extra, duration=60, name="camagent-publisher"):
    """`camagent publish` of a small test pattern and the WAV (--audio file:) into the session, --json."""
    return drain(net.start([BIN, "publish", "--device", "test-pattern", "--size", "320x240", "--fps", "10",
                            "--bitrate", "300", "--codec", "vp8", "--audio", f"file:{wav}", "--session", session_url,
                            "--token", token, "--duration", str(duration), "--json", *extra], name, workdir))


def start_subscriber(net, workdir, session_url, token, *extra, duration=120, name="camagent-subscriber"):
    """`camagent subscribe --first --captions --json`, media decoded and dropped (it waits for the stream)."""
    return drain(net.start([BIN, "subscribe", "--session", session_url, "--token", token, "--first", "--captions",
                            "--video-out", "none", "--audio-out", "none", "--wait-for-stream", "60",
                            "--duration", str(duration), "--json", *extra], name, workdir))


def file_event(publisher, state, timeout, context=lambda: ""):
    """The publisher's {"event":"audio","state":state} line (fileStarted, fileEnded)."""
    return wait_for_event(publisher, lambda e: e.get("event") == "audio" and e.get("state") == state,
                          f'"audio" "{state}" line', timeout, context)


def subscriber_captions(subscriber):
    """camagent subscribe's caption lines: [{"text", "isFinal", "at", "streamId"}] in order."""
    return [{"text": e["text"], "isFinal": e["isFinal"], "at": e["monotonic"], "streamId": e.get("streamId")}
            for e in json_events(subscriber) if e.get("event") == "caption"]


class CaptionClient:
    """caption_client.py (a raw signalling + WHEP client, see its docstring) in the test's network."""

    def __init__(self, net, workdir, session_url, token, name="caption-client", subscribe=True):
        self.net = net
        self.proc = drain(net.start([PY, CLIENT, "--session", session_url, "--token", token,
                                     *([] if subscribe else ["--no-subscribe"])], name, workdir,
                                    stdin=subprocess.PIPE))

    def messages(self, kind=None):
        """[(arrival monotonic, message)] of the router's messages so far, of type `kind` if given."""
        return [(e["at"], e["message"]) for e in json_events(self.proc)
                if "message" in e and (kind is None or e["message"].get("type") == kind)]

    def wait_for(self, kind, match=lambda m: True, timeout=30, context=lambda: "", needs=()):
        """(arrival, message): the first message of type `kind` for which match(m) holds."""
        line = wait_for_event(self.proc, lambda e: e.get("message", {}).get("type") == kind and match(e["message"]),
                              f"{kind!r} message", timeout, context, needs)
        return line["at"], line["message"]

    def wait_event(self, name, timeout=30, context=lambda: ""):
        return wait_for_event(self.proc, lambda e: e.get("event") in (name, "subscribeFailed", "failed")
                              and (e.get("event") == name or _raise(e)), f'"{name}" event', timeout, context)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def captions(self):
        """[{"text", "isFinal", "at", "streamId"}] of the caption messages received, in order."""
        return [{"text": m["text"], "isFinal": m["isFinal"], "at": at, "streamId": m.get("streamId")}
                for at, m in self.messages("caption")]

    def stop(self):
        return self.net.stop(self.proc)


def _raise(event):
    raise AssertionError(f"caption_client.py: {json.dumps(event)}")


def start_captions(net, router, session, token, body=None):
    """POST /v2/sessions/{sid}/captions: (status, parsed body)."""
    status, _, answer = http(net, "POST", f"{router.session_url(session)}/captions", token=token,
                             body=body if body is not None else {})
    return status, answer


def stop_captions(net, router, captions_id, token):
    status, _, answer = http(net, "POST", f"{router.base}/v2/captions/{captions_id}/stop", token=token, body={})
    return status, answer


# -- what the captions say ------------------------------------------------------------

def finals(captions):
    return [c for c in captions if c["isFinal"]]


def utterances(captions):
    """The captions split after each final: [[partial, ..., final], ...]; a last group
    without a final (partials left hanging) is returned as it is."""
    groups, current = [], []
    for c in captions:
        current.append(c)
        if c["isFinal"]:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def caption_wer(spoken, captions):
    """WER of the finals, joined, against the spoken sentences, joined."""
    hypothesis = [w for c in finals(captions) for w in words(c["text"])]
    return word_error_rate(spoken.reference_words(), hypothesis)
