#!/usr/bin/env python3
"""Simulcast: what `publish --simulcast` costs the publisher, and what a subscriber that
prefers the small layer saves.

  simulcast.py OUT.json          measure (run by `Benchmarks/run simulcast`), print the table
  simulcast.py report OUT.json   the table again from OUT.json

Inside a network namespace of its own (publish_support.make_namespace), for each codec
(VP8, then H.264) and each mode (plain, simulcast), REPEATS (2) times in alternating order
(plain, simulcast, then simulcast, plain): a fresh `camagent router`, a routed session,
one publisher, `camagent publish --device test-pattern --size 1280x720 --fps 30 --bitrate
1500 --audio none --codec C --session URL [--simulcast]`, and two subscribers,
`camagent subscribe --first --no-audio --video-out none --json`, one of them with
`--preferred-resolution 640x360`. After SETTLE (5) seconds, a WINDOW (15) second window:

  publisher    CPU (utime + stime from /proc/PID/stat, every thread) over the frames it
               encoded in the window (its stats line's framesEncoded: once per captured
               frame, both layers together with simulcast)
  subscribers  CPU over the frames each decoded in the window, the size it decoded
               (its `dimensions` events) and the video bitrate it received (bytesReceived)

Without simulcast both subscribers get 1280x720; with it the one that prefers 640x360
gets the small layer, 640x360. Runs are pooled per codec and mode (CPU and frames summed).

BENCH_SIMULCAST_CODECS (vp8,h264), BENCH_SIMULCAST_WINDOW (15), BENCH_SIMULCAST_SETTLE (5)
and BENCH_SIMULCAST_REPEATS (2) are for development runs.
"""
import json
import os
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
from publish_support import BIN, make_namespace  # noqa: E402
from router import RouterServer, cpu_seconds  # noqa: E402

SIZE, FPS, BITRATE, SMALL = "1280x720", 30, 1500, "640x360"
CODECS = os.environ.get("BENCH_SIMULCAST_CODECS", "vp8,h264").split(",")
WINDOW = float(os.environ.get("BENCH_SIMULCAST_WINDOW", "15"))
SETTLE = float(os.environ.get("BENCH_SIMULCAST_SETTLE", "5"))
REPEATS = int(os.environ.get("BENCH_SIMULCAST_REPEATS", "2"))
SUBSCRIBERS = ("full", "prefers-small")


class Lines:
    """A process's JSON lines as they come, read on a thread of its own."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for text in self.proc.stdout:
            if text.startswith("{"):
                self.lines.append(json.loads(text))

    def last(self, event):
        return next((e for e in reversed(list(self.lines)) if e.get("event") == event), None)


def sample(pid, lines, counter):
    stats = lines.last("stats")
    if stats is None:
        raise RuntimeError(f"process {pid} printed no stats line")
    return cpu_seconds(pid), counter(stats)


def one_run(net, workdir, codec, simulcast, run):
    router = RouterServer(net, workdir)
    procs = []
    try:
        session = router.create_session()
        url = router.session_url(session)
        publisher = net.start([BIN, "publish", "--device", "test-pattern", "--size", SIZE, "--fps", str(FPS),
                               "--bitrate", str(BITRATE), "--audio", "none", "--codec", codec, "--session", url,
                               "--token", router.token(session, "publisher"), "--duration", str(SETTLE + WINDOW + 30),
                               "--json", *(["--simulcast"] if simulcast else [])], f"publisher-{codec}", workdir)
        procs.append(publisher)
        publisher_lines = Lines(publisher)
        router.wait_for_stream(session)
        token = router.token(session, "subscriber")
        subscribers = {}
        for name in SUBSCRIBERS:
            proc = net.start([BIN, "subscribe", "--session", url, "--token", token, "--first", "--no-audio",
                              "--video-out", "none", "--json", "--duration", str(SETTLE + WINDOW + 20),
                              *(["--preferred-resolution", SMALL] if name == "prefers-small" else [])],
                             f"sub-{name}", workdir)
            procs.append(proc)
            subscribers[name] = (proc, Lines(proc))
        time.sleep(SETTLE)
        encoded = lambda s: s.get("framesEncoded") or 0   # noqa: E731
        decoded = lambda s: ((s.get("video") or {}).get("framesDecoded") or 0,   # noqa: E731
                             (s.get("video") or {}).get("bytesReceived") or 0)
        start = {"publisher": sample(publisher.pid, publisher_lines, encoded)}
        for name, (proc, lines) in subscribers.items():
            start[name] = sample(proc.pid, lines, decoded)
        time.sleep(WINDOW)
        end = {"publisher": sample(publisher.pid, publisher_lines, encoded)}
        for name, (proc, lines) in subscribers.items():
            end[name] = sample(proc.pid, lines, decoded)
        row = {"codec": codec, "mode": "simulcast" if simulcast else "plain", "run": run, "load": os.getloadavg()[0],
               "publisher": {"cpu": end["publisher"][0] - start["publisher"][0],
                             "frames": end["publisher"][1] - start["publisher"][1]}}
        for name, (proc, lines) in subscribers.items():
            # In the order decoded: a subscriber that gets a picture of the other size first shows here.
            sizes = [(e["width"], e["height"]) for e in lines.lines
                     if e.get("event") == "video" and e.get("state") == "dimensions"]
            row[name] = {"cpu": end[name][0] - start[name][0], "frames": end[name][1][0] - start[name][1][0],
                         "bytes": end[name][1][1] - start[name][1][1], "sizes": sizes}
            if row[name]["frames"] <= 0:
                raise RuntimeError(f"{name} decoded nothing in the window:\n" + open(proc.log_path).read()[-3000:])
        if row["publisher"]["frames"] <= 0:
            raise RuntimeError("the publisher encoded nothing in the window:\n" + open(publisher.log_path).read()[-3000:])
        bench.log(f"{codec} {row['mode']} run {run}: publisher {1000 * row['publisher']['cpu'] / row['publisher']['frames']:.2f}"
                  f" ms/frame; sizes {row['full']['sizes']} / {row['prefers-small']['sizes']}")
        return row
    finally:
        for proc in reversed(procs):
            net.stop(proc)
        net.stop(router.proc)


def measure_all(out_path):
    net = make_namespace()
    workdir = tempfile.mkdtemp(prefix="camagent-bench-simulcast-")
    results = {"machine": bench.machine(), "size": SIZE, "small": SMALL, "fps": FPS, "bitrate_kbps": BITRATE,
               "window_s": WINDOW, "settle_s": SETTLE, "repeats": REPEATS,
               "loadBefore": [round(x, 2) for x in os.getloadavg()], "runs": []}
    started = time.monotonic()
    try:
        for codec in CODECS:
            for i in range(REPEATS):
                for simulcast in ((False, True) if i % 2 == 0 else (True, False)):
                    results["runs"].append(one_run(net, workdir, codec, simulcast, i + 1))
    finally:
        net.cleanup()
    results["loadAfter"] = [round(x, 2) for x in os.getloadavg()]
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(report(results))


def pooled(runs, who):
    """CPU ms per frame over the runs' windows, and kbit/s received (subscribers only)."""
    cpu, frames = sum(r[who]["cpu"] for r in runs), sum(r[who]["frames"] for r in runs)
    received = sum(r[who].get("bytes", 0) for r in runs)
    return 1000 * cpu / frames, (8 * received / 1000 / (WINDOW * len(runs)) if who != "publisher" else None)


def report(results):
    out = [f"Simulcast: `camagent publish --size {results['size']} --fps {results['fps']} --bitrate "
           f"{results['bitrate_kbps']}` into `camagent router`, with and without --simulcast; two `camagent subscribe`, "
           f"one preferring {results['small']}. CPU per frame (user+sys, all threads) over a {results['window_s']:.0f} s "
           f"window, {results['repeats']} runs of each pooled.", "",
           "| codec | publisher | publisher ms / frame | simulcast / plain | subscriber | sizes decoded, each run | ms / frame | kbit/s |",
           "|---|---|---|---|---|---|---|---|"]
    for codec in dict.fromkeys(r["codec"] for r in results["runs"]):
        plain_ms = None
        for mode in ("plain", "simulcast"):
            runs = [r for r in results["runs"] if (r["codec"], r["mode"]) == (codec, mode)]
            if not runs:
                continue
            ms, _ = pooled(runs, "publisher")
            plain_ms = ms if mode == "plain" else plain_ms
            ratio = fmt(ms / plain_ms) if mode == "simulcast" and plain_ms else ""
            for i, name in enumerate(SUBSCRIBERS):
                sub_ms, kbps = pooled(runs, name)
                sizes = "; ".join(" then ".join(f"{w}x{h}" for w, h in r[name]["sizes"]) for r in runs)
                out.append(f"| {codec.upper() if i == 0 else ''} | {mode if i == 0 else ''} | "
                           f"{fmt(ms) if i == 0 else ''} | {ratio if i == 0 else ''} | {name} | "
                           f"{sizes} | {fmt(sub_ms)} | {fmt(kbps, 0)} |")
    loads = ", ".join(f"{r['load']:.2f}" for r in results["runs"])
    out += ["", f"1-minute load at each window's end: {loads}. The run took {results['minutes']} min."]
    return "\n".join(out)


if __name__ == "__main__":
    bench.command_line(__doc__, measure_all, report)
