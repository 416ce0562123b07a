#!/usr/bin/env python3
"""The soak: one hour of `camagent publish` while viewers join and leave every minute.

  soak.py OUT.json          run it (Benchmarks/run soak), print the table
  soak.py report OUT.json   the table again from OUT.json

Inside a network namespace of the run's own (publish_support.make_namespace),
`camagent publish --device test-pattern --size 640x480 --fps 15 --audio
test-tone --listen ADDR:0 --viewer-token T --json` runs for SOAK_MINUTES (60).
At the start of every minute an aiortc viewer (Tests/Publish/whep_viewer.py)
joins over WHEP and watches for 40 s; every other one leaves with a DELETE
(--leave-after), the others just vanish (--duration, no DELETE), so the
publisher drops them when their ICE consent expires (--viewer-timeout 10).
Each viewer must decode frames, or the run fails.

Every 10 s the script samples the publisher from /proc: VmRSS, open
descriptors (/proc/PID/fd) and threads. The comparable samples are the idle
ones, taken just before each minute's viewer joins (no viewer connected, the
last one dropped). Reported: RSS at minute WARMUP (5, after the first viewers
have brought every lazily made buffer) and at the end, and their difference
(the target is < 1 MB); descriptors and threads over the idle samples (min and
max: the target is that they stay constant). SOAK_MINUTES shortens a
development run.
"""
import json
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "Tests", "Publish"))
sys.path.insert(0, HERE)

import bench  # noqa: E402
from publish_support import BIN, PY, json_lines, make_namespace, output_lines  # noqa: E402

MINUTES = int(os.environ.get("SOAK_MINUTES", "60"))
WARMUP = min(5, max(1, MINUTES // 4))
WATCH = 40
SAMPLE_EVERY = 10


def sample(pid):
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    return {"rssKiB": int(status["VmRSS"].split()[0]), "threads": int(status["Threads"]),
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "t": time.monotonic()}


def run(out_path):
    net = make_namespace()
    work = tempfile.mkdtemp(prefix="camagent-soak-")
    token = secrets.token_hex(8)
    try:
        agent = net.start([BIN, "publish", "--device", "test-pattern", "--size", "640x480", "--fps", "15",
                           "--audio", "test-tone", "--listen", f"{net.addr}:0", "--viewer-token", token,
                           "--viewer-timeout", "10", "--json"], "camagent", work)
        lines = []
        whep = None
        for line in output_lines(agent, 60, lines):
            for e in json_lines(line):
                if e.get("event") == "serving":
                    whep = e["whep"]
            if whep:
                break
        if not whep:
            sys.exit("soak: camagent did not start serving:\n" + open(agent.log_path).read()[-3000:])
        # Keep reading its stdout so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in agent.stdout], daemon=True).start()

        samples, idle, viewers = [], [], []
        start = time.monotonic()
        for minute in range(MINUTES):
            minute_start = start + 60 * minute
            time.sleep(max(0, minute_start - time.monotonic()))
            if agent.poll() is not None:
                sys.exit(f"soak: camagent exited {agent.returncode} in minute {minute}:\n"
                         + open(agent.log_path).read()[-3000:])
            idle.append(dict(sample(agent.pid), minute=minute))
            leave = minute % 2 == 0
            summary = os.path.join(work, f"viewer-{minute}.json")
            args = [PY, os.path.join(ROOT, "Tests", "Publish", "whep_viewer.py"), "--url", whep, "--token", token,
                    "--summary", summary]
            args += ["--leave-after", str(WATCH)] if leave else ["--duration", str(WATCH)]
            viewer = net.start(args, f"viewer-{minute}", work)
            while time.monotonic() < minute_start + 60 - 1:
                samples.append(dict(sample(agent.pid), minute=minute))
                time.sleep(SAMPLE_EVERY)
            net.stop(viewer, timeout=30)
            with open(summary) as f:
                decoded = sum(t["frames"] for t in json.load(f)["video"])
            if viewer.returncode != 0 or decoded < 10 * 15:
                sys.exit(f"soak: viewer {minute} exited {viewer.returncode} after {decoded} frames:\n"
                         + open(viewer.log_path).read()[-3000:])
            viewers.append({"minute": minute, "left": "DELETE" if leave else "vanished", "frames": decoded})
            bench.log(f"soak: minute {minute + 1}/{MINUTES}: RSS {idle[-1]['rssKiB']} KiB, "
                      f"{idle[-1]['fds']} fds, {idle[-1]['threads']} threads before the viewer; it decoded {decoded}")
        time.sleep(15)   # the last viewer is dropped (DELETE or consent)
        idle.append(dict(sample(agent.pid), minute=MINUTES))
        code = net.stop(agent, timeout=30)
        if code != 0:
            sys.exit(f"soak: camagent exited {code} on SIGTERM:\n" + open(agent.log_path).read()[-3000:])
    finally:
        net.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    results = {"minutes": MINUTES, "warmupMinute": WARMUP, "idle": idle, "samples": samples, "viewers": viewers,
               "machine": bench.machine()}
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(report(results))


def report(results):
    idle = results["idle"]
    warm = next(s for s in idle if s["minute"] == results["warmupMinute"])
    end = idle[-1]
    after = [s for s in idle if s["minute"] >= results["warmupMinute"]]
    growth = (end["rssKiB"] - warm["rssKiB"]) / 1024
    peak = max(s["rssKiB"] for s in results["samples"]) / 1024
    lines = [
        f"Soak: {results['minutes']} minutes of publishing (640x480 at 15 fps, VP8, and the tone), "
        f"{len(results['viewers'])} viewers joining one a minute (half leaving with a DELETE, half vanishing)",
        "",
        "| measure | value | target |",
        "|---|---:|---|",
        f"| RSS at minute {results['warmupMinute']}, idle | {warm['rssKiB'] / 1024:.1f} MiB | |",
        f"| RSS at the end, idle | {end['rssKiB'] / 1024:.1f} MiB | |",
        f"| RSS growth after warm-up | {growth:+.2f} MiB | < 1 MB |",
        f"| RSS peak (a viewer connected) | {peak:.1f} MiB | |",
        f"| open descriptors, idle (min–max) | {min(s['fds'] for s in after)}–{max(s['fds'] for s in after)} | constant |",
        f"| threads, idle (min–max) | {min(s['threads'] for s in after)}–{max(s['threads'] for s in after)} | constant |",
        f"| frames decoded per viewer (min) | {min(v['frames'] for v in results['viewers'])} | |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    bench.command_line(__doc__, run, report)
