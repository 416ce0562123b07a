#!/usr/bin/env python3
"""Live captions: word error rate, CPU per captioned stream, real-time factor, latency (issue 15).

  captions.py OUT.json          measure (run by `Benchmarks/run captions`), print the table
  captions.py report OUT.json   the table again from OUT.json

The 20 sentences of Tests/Publish/captions/sentences.txt, spoken by espeak-ng into one
WAV (Tests/Publish/captions_support.speech_wav: LEAD_IN s of silence, then the sentences
GAP s apart; each sentence's speech found from its energy envelope), are published by
`camagent publish --captions --audio file:WAV` (the test pattern at 320x240, 10 fps, VP8
beside it) into a routed session of a fresh `camagent router`, in a network namespace of
the run's own. `camagent subscribe --first --captions --no-video --audio-out none --json`
takes the captions. Each run is either *captioned* (captions started over REST before the
publisher comes) or *plain* (never started: the same publisher, subscriber and router
forwarding, without recognition). Runs alternate (BENCH_CAPTIONS_RUNS, default
captioned, plain, captioned) so that a drifting load hits both.

- **WER**: the finals of a captioned run, joined, against the 20 sentences, joined
  (captions_support.words: lowercase, no punctuation; captions/wer.py).
- **CPU per captioned stream**: the router's utime + stime (/proc/PID/stat, every thread)
  from the publisher's `fileStarted` line to TAIL s after its `fileEnded` line (plain runs),
  or, in captioned runs, to when the captioner has caught up (camagent_router_captions_audio_
  seconds_total has reached the file's end, and no caption came for QUIET s; at most
  CATCH_UP s): the captioned runs' CPU minus the plain runs' rate over the same windows,
  per second of the file's audio, in cores.
- **Real-time factor**: camagent_router_captions_engine_seconds_total over
  camagent_router_captions_audio_seconds_total, both differenced over the run (/metrics).
- **Latency**: for each sentence, the end of its speech (fileStarted's `monotonic` plus the
  sentence's end in the WAV) to the arrival (`monotonic` of camagent subscribe's line) of
  the first final that belongs to it: a final belongs to the sentence sharing most of its
  words, if that is at least half of them. A sentence with no such final counts as
  having no final of its own (lost, or merged into another's).
- **Reference**: where whisper.cpp's own command-line program is found beside the engine
  (BENCH_WHISPER_CLI and BENCH_WHISPER_MODEL, or a `whisper-cli` and a `ggml-*.bin` other than
  the VAD's under $CAMAGENT_CAPTIONS_PREFIX, default /opt/camagent-captions), it transcribes the same WAV
  (resampled to 16 kHz by sox) offline, timed with wait4: its WER and CPU per second of
  audio.
- **FFmpeg**: its `asr` filter (pocketsphinx with Debian's pocketsphinx-en-us model),
  offline on the same WAV, timed with wait4: WER, CPU per audio second, and how long
  after each sentence's end (in the file's time) it puts out a text. GStreamer's
  equivalent (Debian's gstreamer1.0-pocketsphinx) runs the same engine and is not run.

The router finds utterances as CAMAGENT_CAPTIONS_VAD says (silero, its default, or level);
the results record which. CAMAGENT_CAPTIONS_FINAL_BEAM=N sets the finals' beam (1: greedy;
the default 3), recorded as `finalBeam`; CAMAGENT_CAPTIONS_EARLY_FINAL_FRAMES=N how many
20 ms frames into a pause the final is recognised (0: only when the utterance has ended; the
default 3, as the router's), recorded as `earlyFinalFrames`. BENCH_CAPTIONS_BUSY=N runs N CPU-bound processes (`yes`) beside
the whole measurement: latency under load.

Targets (issue 15): a final within 1.0 s of the end of speech; at most half a core per
captioned stream.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "Tests", "Publish"))
sys.path.insert(0, HERE)

import bench  # noqa: E402
from bench import fmt  # noqa: E402
from captions_support import load_sentences, speech_wav, word_error_rate, words  # noqa: E402
from publish_support import BIN, make_namespace  # noqa: E402
from router import RouterServer, cpu_seconds, rss_mib  # noqa: E402
from router_support import http  # noqa: E402

LEAD_IN = 4.0       # s of silence before the first sentence (the subscriber is connected by then)
GAP = 1.2           # s of silence between sentences
TAIL = 3.0          # s after fileEnded still in the CPU window (the last sentence's final)
CATCH_UP = 120.0    # s a captioned run waits, after the file's end, for the captioner to catch up
QUIET = 3.0         # s without a caption that end a captioned run's window
RUNS = os.environ.get("BENCH_CAPTIONS_RUNS", "captioned,plain,captioned").split(",")
TARGET_LATENCY = 1.0
TARGET_CORES = 0.5
PREFIX = os.environ.get("CAMAGENT_CAPTIONS_PREFIX", "/opt/camagent-captions")
VOICE_DETECTION = os.environ.get("CAMAGENT_CAPTIONS_VAD") or "silero"
FINAL_BEAM = int(os.environ.get("CAMAGENT_CAPTIONS_FINAL_BEAM") or 3)
EARLY_FINAL_FRAMES = int(os.environ.get("CAMAGENT_CAPTIONS_EARLY_FINAL_FRAMES") or 3)   # the router's default (StreamCaptioner.Settings)
BUSY = int(os.environ.get("BENCH_CAPTIONS_BUSY", "0"))


class Lines:
    """A process's stdout read on a thread; each JSON line kept with the router's CPU at
    the moment it was read (so the window's edges are sampled as the lines arrive)."""

    def __init__(self, proc, router_pid):
        self.proc, self.router_pid = proc, router_pid
        self.events = []
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            try:
                cpu = cpu_seconds(self.router_pid)
            except OSError:
                cpu = None
            with self.lock:
                self.events.append((time.monotonic(), cpu, event))
                self.lock.notify_all()

    def wait(self, predicate, what, timeout):
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for at, cpu, event in self.events:
                    if predicate(event):
                        return at, cpu, event
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"{self.proc.label}: no {what} within {timeout} s (exit {self.proc.poll()}):\n"
                                       + open(self.proc.log_path).read()[-3000:])
                self.lock.wait(min(left, 0.5))

    def all(self):
        with self.lock:
            return [e for _, _, e in self.events]


def catch_up(router, sub_lines, heard):
    """Waits (at most CATCH_UP s) until the captioner has taken in `heard` seconds of audio
    (the file's end: it may run behind real time) and no caption came for QUIET s; False
    if it never did."""
    deadline = time.monotonic() + CATCH_UP
    while router.metrics().get("camagent_router_captions_audio_seconds_total", 0) < heard:
        if time.monotonic() > deadline:
            bench.log(f"the captioner had not taken in {heard:.1f} s of audio {CATCH_UP} s after the file's end")
            return False
        time.sleep(0.5)
    count, since = -1, time.monotonic()
    while time.monotonic() - since < QUIET and time.monotonic() < deadline:
        now = sum(1 for e in sub_lines.all() if e.get("event") == "caption")
        if now != count:
            count, since = now, time.monotonic()
        time.sleep(0.2)
    return True


def metrics_delta(a, b):
    keys = ("partial_total", "final_total", "audio_seconds_total", "engine_seconds_total", "early_finals_discarded_total")
    return {k: b.get(f"camagent_router_captions_{k}", 0) - a.get(f"camagent_router_captions_{k}", 0) for k in keys}


def one_run(net, workdir, spoken, captioned):
    router = RouterServer(net, workdir)
    try:
        session = router.create_session()
        url = router.session_url(session)
        project = router.camagent("token", "--secret-file", router.secret, "--project")
        before = router.metrics()
        if captioned:
            status, _, answer = http(net, "POST", f"{url}/captions", token=project,
                                     body={"languageCode": "en-US", "partialCaptions": True, "maxDuration": 1800})
            if status != 202:
                raise RuntimeError(f"captions start answered {status}: {answer}")
            captions_at = time.monotonic()
        subscriber = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                                "--first", "--captions", "--no-video", "--audio-out", "none", "--wait-for-stream", "60",
                                "--duration", str(int(spoken.duration + 90)), "--json"], "subscriber", workdir)
        publisher = net.start([BIN, "publish", "--device", "test-pattern", "--size", "320x240", "--fps", "10",
                               "--bitrate", "300", "--codec", "vp8", "--audio", f"file:{spoken.path}", "--captions",
                               "--session", url, "--token", router.token(session, "publisher"),
                               "--duration", str(int(spoken.duration + 60)), "--json"], "publisher", workdir)
        sub_lines, pub_lines = Lines(subscriber, router.proc.pid), Lines(publisher, router.proc.pid)
        try:
            sub_lines.wait(lambda e: e.get("event") == "state" and e.get("state") == "connected",
                           "connected line", 60)
            t0, cpu0, started = pub_lines.wait(lambda e: e.get("state") == "fileStarted", "fileStarted", 60)
            first_speech = started["monotonic"] + spoken.sentences[0]["start"]
            if time.monotonic() > first_speech:
                bench.log(f"warning: the subscriber connected {time.monotonic() - first_speech:.1f} s into the speech")
            _, _, ended = pub_lines.wait(lambda e: e.get("state") == "fileEnded", "fileEnded",
                                         spoken.duration + 60)
            time.sleep(max(0.0, ended["monotonic"] + TAIL - time.monotonic()))
            caught_up = True
            if captioned:
                caught_up = catch_up(router, sub_lines, ended["monotonic"] - captions_at)
            t1, cpu1 = time.monotonic(), cpu_seconds(router.proc.pid)
            rss = rss_mib(router.proc.pid)
            after = router.metrics()
            load = os.getloadavg()
        finally:
            net.stop(publisher)
            net.stop(subscriber)
    finally:
        net.stop(router.proc)
    captions = [e for e in sub_lines.all() if e.get("event") == "caption"]
    seconds = t1 - t0
    row = {"captioned": captioned, "windowSeconds": seconds, "routerCpuSeconds": cpu1 - cpu0, "caughtUp": caught_up,
           "audioSeconds": ended["monotonic"] - started["monotonic"],
           "routerCores": (cpu1 - cpu0) / seconds, "routerRssMiB": rss, "fileStarted": started["monotonic"],
           "fileEnded": ended["monotonic"], "metrics": metrics_delta(before, after),
           "captionedStreamsGauge": after.get("camagent_router_captioned_streams"),
           "captions": [{"text": c["text"], "isFinal": c["isFinal"], "monotonic": c["monotonic"]} for c in captions],
           "load": [round(x, 2) for x in load]}
    if captioned:
        row.update(score(spoken, row))
    bench.log(f"{'captioned' if captioned else 'plain'}: router {row['routerCores']:.3f} cores over {seconds:.1f} s"
              + (f", WER {row['wer']:.3f}, latency p50 {row['latency']['p50']} s, RTF {row['rtf']}" if captioned else "")
              + f", load {row['load'][0]}")
    return row


def score(spoken, row):
    """WER, per-sentence latency and the real-time factor of one captioned run."""
    finals = [c for c in row["captions"] if c["isFinal"]]
    hypothesis = [w for c in finals for w in words(c["text"])]
    reference = spoken.reference_words()
    # Each final belongs to the sentence that shares most of its words (at least half of
    # them): by text, not by time, so a captioner running behind is still matched right.
    sentence_words = [set(words(s["text"])) for s in spoken.sentences]
    owner = []
    for c in finals:
        said = set(words(c["text"]))
        shares = [len(said & w) for w in sentence_words]
        best = max(range(len(shares)), key=lambda i: shares[i])
        owner.append(best if said and shares[best] >= len(said) / 2 else None)
    per_sentence = []
    for i, s in enumerate(spoken.sentences):
        end = row["fileStarted"] + s["end"]
        own = next((c for c, o in zip(finals, owner) if o == i), None)
        per_sentence.append({"sentence": s["text"], "speechEnd": s["end"], "final": own["text"] if own else None,
                             "latency": round(own["monotonic"] - end, 3) if own else None})
    latencies = sorted(s["latency"] for s in per_sentence if s["latency"] is not None)
    m = row["metrics"]
    return {"wer": word_error_rate(reference, hypothesis), "referenceWords": len(reference),
            "finals": len(finals), "partials": len(row["captions"]) - len(finals),
            "perSentence": per_sentence, "latency": summary(latencies),
            "withinTarget": sum(1 for x in latencies if x <= TARGET_LATENCY),
            "rtf": round(m["engine_seconds_total"] / m["audio_seconds_total"], 3) if m["audio_seconds_total"] else None}


def summary(values):
    if not values:
        return {"n": 0, "p50": None, "p90": None, "max": None}
    pick = lambda q: values[min(len(values) - 1, int(round(q * (len(values) - 1))))]  # noqa: E731
    return {"n": len(values), "p50": round(statistics.median(values), 3), "p90": round(pick(0.9), 3),
            "max": round(values[-1], 3), "min": round(values[0], 3)}


def whisper_reference(spoken, workdir):
    """whisper.cpp's own CLI on the same WAV, if it is there: WER and CPU per audio second."""
    cli = os.environ.get("BENCH_WHISPER_CLI") or next(iter(sorted(
        glob.glob(f"{PREFIX}/**/whisper-cli", recursive=True))), None)
    model = os.environ.get("BENCH_WHISPER_MODEL") or next(iter(sorted(
        m for m in glob.glob(f"{PREFIX}/**/ggml-*.bin", recursive=True) if "silero" not in m)), None)
    if not cli or not model or not os.access(cli, os.X_OK) or not os.path.isfile(model):
        return {"found": False, "looked": f"{cli or PREFIX} and {model or PREFIX}"}
    wav16 = os.path.join(workdir, "speech-16k.wav")
    subprocess.run(["sox", spoken.path, "-r", "16000", "-c", "1", "-b", "16", wav16], check=True)
    out = os.path.join(workdir, "whisper-cli")
    argv = [cli, "-m", model, "-f", wav16, "-t", "1", "-nt", "-otxt", "-of", out, "-np"]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    stderr = proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        return {"found": True, "cli": cli, "model": model, "error": stderr[-1000:]}
    text = open(out + ".txt").read()
    cpu = usage.ru_utime + usage.ru_stime
    return {"found": True, "cli": cli, "model": model, "threads": 1, "wer": word_error_rate(
        spoken.reference_words(), words(text)), "cpuSeconds": cpu, "wallSeconds": wall,
        "cpuPerAudioSecond": cpu / spoken.duration, "text": text.strip()}


POCKETSPHINX_MODEL = "/usr/share/pocketsphinx/model/en-us"   # Debian's pocketsphinx-en-us


def ffmpeg_reference(spoken, workdir):
    """FFmpeg's own offline recogniser, the `asr` filter (pocketsphinx, Debian's English
    model), on the same WAV: WER, CPU per audio second, and for each sentence the stream
    time at which FFmpeg put out a text after the sentence's speech ended (its endpointing
    delay, in the file's time: FFmpeg reads the file faster than real time)."""
    if not os.path.isdir(POCKETSPHINX_MODEL):
        return {"found": False, "looked": POCKETSPHINX_MODEL}
    out = os.path.join(workdir, "ffmpeg-asr.txt")
    argv = ["ffmpeg", "-hide_banner", "-nostats", "-v", "error", "-i", spoken.path, "-af",
            f"aresample=16000,asr,ametadata=mode=print:key=lavfi.asr.text:file={out}", "-f", "null", "-"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0 or not os.path.exists(out):
        return {"found": True, "error": stderr[-1000:]}
    texts, at = [], None
    for line in open(out):
        if line.startswith("frame:"):
            at = float(line.split("pts_time:")[1])
        elif line.startswith("lavfi.asr.text="):
            texts.append({"at": at, "text": line.split("=", 1)[1].strip()})
    ends = [s["end"] for s in spoken.sentences]
    delays = []
    for i, end in enumerate(ends):
        limit = ends[i + 1] if i + 1 < len(ends) else float("inf")
        first = next((t for t in texts if t["at"] is not None and end < t["at"] <= limit), None)
        delays.append(round(first["at"] - end, 3) if first else None)
    cpu = usage.ru_utime + usage.ru_stime
    return {"found": True, "version": subprocess.run(["ffmpeg", "-version"], capture_output=True,
                                                      text=True).stdout.split("\n")[0],
            "wer": word_error_rate([s["text"] for s in spoken.sentences], [t["text"] for t in texts]),
            "cpuSeconds": cpu, "cpuPerAudioSecond": cpu / spoken.duration, "texts": texts,
            "endpointDelay": summary(sorted(d for d in delays if d is not None)),
            "sentencesWithoutText": sum(1 for d in delays if d is None)}


def measure_all(out_path):
    net = make_namespace()
    workdir = tempfile.mkdtemp(prefix="camagent-bench-captions-")
    started = time.monotonic()
    results = {"machine": bench.machine(), "loadBefore": [round(x, 2) for x in os.getloadavg()],
               "leadIn": LEAD_IN, "gap": GAP, "tail": TAIL, "voiceDetection": VOICE_DETECTION, "finalBeam": FINAL_BEAM, "earlyFinalFrames": EARLY_FINAL_FRAMES, "busy": BUSY,
               "runs": []}
    busy = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(BUSY)]
    try:
        spoken = speech_wav(os.path.join(workdir, "speech.wav"), load_sentences(), lead_in=LEAD_IN, gap=GAP)
        results.update({"sentences": len(spoken.sentences), "speechSeconds": spoken.speech_seconds,
                        "fileSeconds": spoken.duration, "spoken": spoken.sentences})
        for i, kind in enumerate(RUNS):
            bench.log(f"run {i + 1} of {len(RUNS)}: {kind}")
            results["runs"].append(dict(one_run(net, workdir, spoken, kind == "captioned"), run=i + 1))
        bench.log("whisper.cpp's own CLI on the same WAV, if installed")
        results["whisperCli"] = whisper_reference(spoken, workdir)
        bench.log("FFmpeg's asr filter (pocketsphinx) on the same WAV")
        results["ffmpegAsr"] = ffmpeg_reference(spoken, workdir)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
        net.cleanup()
    results["loadAfter"] = [round(x, 2) for x in os.getloadavg()]
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    results.update(combine(results["runs"]))
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(report(results))


def combine(runs):
    """Captioned runs pooled: CPU over all windows; latencies of all sentences; WER of each."""
    captioned = [r for r in runs if r["captioned"]]
    plain = [r for r in runs if not r["captioned"]]
    cores = lambda rs: sum(r["routerCpuSeconds"] for r in rs) / sum(r["windowSeconds"] for r in rs)  # noqa: E731
    latencies = sorted(s["latency"] for r in captioned for s in r["perSentence"] if s["latency"] is not None)
    audio = sum(r["metrics"]["audio_seconds_total"] for r in captioned)
    engine = sum(r["metrics"]["engine_seconds_total"] for r in captioned)
    # The captioned windows run until the captioner caught up (longer than the file when it
    # ran behind): its extra CPU over the plain rate, per second of the file's audio.
    extra = (sum(r["routerCpuSeconds"] - cores(plain) * r["windowSeconds"] for r in captioned)
             / sum(r["audioSeconds"] for r in captioned)) if captioned and plain else None
    return {"captionedCores": cores(captioned) if captioned else None,
            "plainCores": cores(plain) if plain else None,
            "coresPerCaptionedStream": extra,
            "latency": summary(latencies),
            "sentencesWithoutFinal": sum(1 for r in captioned for s in r["perSentence"] if s["latency"] is None),
            "withinTarget": sum(1 for x in latencies if x <= TARGET_LATENCY),
            "wers": [r["wer"] for r in captioned], "rtf": engine / audio if audio else None}


def report(results):
    lines = [f"Live captions on {results['sentences']} espeak-ng sentences ({results['speechSeconds']:.1f} s of "
             f"speech in a {results['fileSeconds']:.1f} s WAV, {results['gap']} s between sentences), "
             "published by `camagent publish --captions --audio file:WAV` through `camagent router`, finals "
             f"taken by `camagent subscribe --captions`. Voice detection: {results.get('voiceDetection', 'level')}"
             + (f"; {results['busy']} CPU-bound processes beside it." if results.get("busy") else "."), "",
             "| run | kind | window s | router cores | WER | finals / partials | sentences with a final | "
             "latency p50 / p90 / max s | within 1.0 s | real-time factor | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        if r["captioned"]:
            lat = r["latency"]
            lines.append(f"| {r['run']} | captioned | {r['windowSeconds']:.1f}{'' if r['caughtUp'] else ' (not caught up)'}"
                         f" | {r['routerCores']:.3f} | {r['wer']:.3f} | {r['finals']} / {r['partials']} | "
                         f"{lat['n']} of {len(r['perSentence'])} | {fmt(lat['p50'])} / {fmt(lat['p90'])} / "
                         f"{fmt(lat['max'])} | {r['withinTarget']} | {fmt(r['rtf'], 3)} | {r['load'][0]} |")
        else:
            lines.append(f"| {r['run']} | plain | {r['windowSeconds']:.1f} | {r['routerCores']:.3f} | | | | | | | "
                         f"{r['load'][0]} |")
    lat = results["latency"]
    per = results["coresPerCaptionedStream"]
    lines += ["", "Targets (issue 15):",
              f"- final within {TARGET_LATENCY} s of the end of speech: p50 **{fmt(lat['p50'])} s**, p90 "
              f"{fmt(lat['p90'])} s, max {fmt(lat['max'])} s; {results['withinTarget']} of {lat['n']} finals within; "
              f"{results['sentencesWithoutFinal']} sentence(s) without a final of their own: "
              f"{'met' if lat['n'] and results['withinTarget'] == lat['n'] and not results['sentencesWithoutFinal'] else 'NOT met'}"
              f" (every sentence's final within {TARGET_LATENCY} s)",
              f"- CPU per captioned stream (the router's CPU in captioned runs over the plain runs' rate, per second of "
              f"audio): **{fmt(per, 3)}** cores: "
              f"{'met' if per is not None and per <= TARGET_CORES else 'NOT met'} (target ≤ {TARGET_CORES})",
              f"- WER per captioned run: {', '.join(fmt(w, 3) for w in results['wers'])}; real-time factor "
              f"(engine s / audio s, /metrics) {fmt(results['rtf'], 3)}"]
    ref = results.get("whisperCli") or {}
    if ref.get("wer") is not None:
        lines.append(f"- whisper.cpp's own CLI, offline on the same WAV ({os.path.basename(ref['model'])}, 1 thread): "
                     f"WER {ref['wer']:.3f}, {ref['cpuPerAudioSecond']:.3f} CPU s per audio s "
                     f"({ref['cpuSeconds']:.1f} s CPU, {ref['wallSeconds']:.1f} s wall)")
    else:
        lines.append(f"- whisper.cpp's own CLI: not run ({ref.get('error') or 'not found under ' + str(ref.get('looked'))})")
    ff = results.get("ffmpegAsr") or {}
    if ff.get("wer") is not None:
        d = ff["endpointDelay"]
        lines.append(f"- FFmpeg's `asr` filter (pocketsphinx, Debian's en-us model), offline on the same WAV: "
                     f"WER {ff['wer']:.3f}, {ff['cpuPerAudioSecond']:.3f} CPU s per audio s; a text "
                     f"{fmt(d['p50'])} s (p50) / {fmt(d['max'])} s (max) of stream time after each sentence's "
                     f"end, {ff['sentencesWithoutText']} sentence(s) without one")
    else:
        lines.append(f"- FFmpeg's asr filter: not run ({ff.get('error') or 'no model at ' + str(ff.get('looked'))})")
    lines += ["", f"1-minute load before {results['loadBefore'][0]}, after {results['loadAfter'][0]} "
              f"({results['machine']['cores']} CPUs); the run took {results['minutes']} min."]
    return "\n".join(lines)


def main():
    bench.command_line(__doc__, measure_all, report)


if __name__ == "__main__":
    main()
