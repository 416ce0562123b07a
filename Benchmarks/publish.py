#!/usr/bin/env python3
"""The publish path: camagent against GStreamer's webrtcbin, sending the same to the same receiver.

  publish.py OUT.json     measure (run by `Benchmarks/run publish`)
  publish.py report OUT.json

Each publisher sends camagent's test pattern (GStreamer reads it live from a
FIFO written by `camagent capture`) at 1280x720 and 30 fps, for a short and a long run, to
Tests/Publish/whip_receiver.py (aiortc, which decodes every frame), inside a
network namespace of its own (publish_support.make_namespace). CPU per frame
is the difference in the publisher's CPU (user + system, wait4: every thread)
divided by the difference in frames the receiver decoded, so start-up,
negotiation and teardown cancel out; median of BENCH_REPEATS (3) pairs. Heap
allocations are counted the same way (LD_PRELOAD malloc counter), peak RSS is
the long run's. Latency, capture to decoded: each decoded frame's RTP time is
put on the sender's wall clock with the sender's RTCP sender report and
compared with the frame's arrival at the receiver's decoder output (same
host, same clock); see BENCHMARKS.md for what it includes.

Beside them, in the same run, camagent's encoder alone on the same pictures
(the same test pattern at the same size and bitrate, `camagent bench
--encode`, timed in-process over the encoding loop on pre-drawn frames): the
publish path's cost over its encoder is everything around it (capture
thread, handoff, packetizing, pacing, SRTP, sockets, RTCP). The encoder alone
is timed twice: back to back, and at 30 frames a second (`--encode-paced`),
as publish meets its frames; between frames its caches go cold, which costs
it more per frame than back to back.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "Tests", "Publish"))
sys.path.insert(0, HERE)

import bench  # noqa: E402
from bench import fmt  # noqa: E402
from publish_support import BIN, Net, Receiver, host_address, make_namespace  # noqa: E402

SIZE, FPS, BITRATE = "1280x720", 30, 1500
SHORT, LONG = 6, 16
SYSTEM_PYTHON = "/usr/bin/python3"   # Debian's, which has python3-gi for webrtcbin


def publishers(url, fifo=None, vp8_threads=1):
    """name → argv for one run of `seconds`."""
    def camagent(codec):
        return lambda seconds: [BIN, "publish", "--device", "test-pattern", "--size", SIZE, "--fps", str(FPS),
                                "--audio", "none", "--whip", url, "--codec", codec, "--bitrate", str(BITRATE),
                                "--duration", str(seconds), "--json"]

    def gstreamer(codec):
        return lambda seconds: [SYSTEM_PYTHON, os.path.join(HERE, "gst_whip_publisher.py"), "--whip", url,
                                "--codec", codec, "--size", SIZE, "--fps", str(FPS), "--bitrate", str(BITRATE),
                                "--duration", str(seconds), "--y4m", fifo, "--threads", str(vp8_threads)]
    return {"camagent VP8": camagent("vp8"), "camagent H.264": camagent("h264"),
            "GStreamer VP8": gstreamer("vp8"), "GStreamer H.264": gstreamer("h264")}


def start_pattern_writer(fifo, seconds):
    """camagent's test pattern, live at 30 fps, into a FIFO for GStreamer (a process of
    its own: its CPU is not counted as GStreamer's, which favours GStreamer slightly)."""
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    return subprocess.Popen([BIN, "capture", "--device", "test-pattern", "--size", SIZE, "--fps", str(FPS),
                             "--duration", str(seconds + 30), "--output", fifo],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def one_run(net, workdir, name, seconds, vp8_threads):
    receiver = Receiver(net, workdir)
    fifo = os.path.join(workdir, "pattern.y4m")
    writer = start_pattern_writer(fifo, seconds) if name.startswith("GStreamer") else None
    try:
        argv = publishers(receiver.url, fifo, vp8_threads)[name](seconds)
        result = bench.measure(net.prefix() + argv, timeout=seconds + 120)
    finally:
        summary = receiver.stop()
        if writer is not None:
            writer.kill()
            writer.wait()
    video = [t for s in summary["sessions"] for t in s["video"]]
    decoded = sum(t["frames"] for t in video)
    track = max(video, key=lambda t: t["frames"]) if video else {}
    return {"cpu": result["cpu"], "rss_kib": result["rss_kib"], "allocations": result["allocations"],
            "frames": decoded, "bytes": sum(t["rtpBytes"] for t in video), "codec": track.get("codec"),
            "latency": track.get("latencyMs"), "maxGap": track.get("maxGap"), "sizes": track.get("sizes")}


def measure_publisher(net, workdir, name, vp8_threads):
    pairs = []
    for i in range(bench.REPEATS):
        short = one_run(net, workdir, name, SHORT, vp8_threads)
        long = one_run(net, workdir, name, LONG, vp8_threads)
        frames = long["frames"] - short["frames"]
        pairs.append({"short": short, "long": long,
                      "cpu_ms": (long["cpu"] - short["cpu"]) * 1000 / frames if frames > 0 else None,
                      "allocs": (long["allocations"] - short["allocations"]) / frames if frames > 0 else None,
                      "fps": long["frames"] / LONG,
                      "kbps": long["bytes"] * 8 / LONG / 1000})
        bench.log(f"{name} run {i + 1}: {pairs[-1]['cpu_ms']} ms/frame, {long['frames']} frames decoded, "
                  f"latency {long['latency']}")
    med = lambda key: statistics.median(p[key] for p in pairs if p[key] is not None)  # noqa: E731
    latencies = [p["long"]["latency"] for p in pairs if p["long"]["latency"]]
    return {"cpu_ms": med("cpu_ms"), "cpu_ms_runs": [p["cpu_ms"] for p in pairs], "allocs": med("allocs"),
            "fps": med("fps"), "kbps": med("kbps"), "rss_mib": max(p["long"]["rss_kib"] for p in pairs) / 1024,
            "codec": pairs[-1]["long"]["codec"], "sizes": pairs[-1]["long"]["sizes"],
            "maxGap": max(p["long"]["maxGap"] or 0 for p in pairs),
            "latency_p50": statistics.median(l["p50"] for l in latencies) if latencies else None,
            "latency_p99": statistics.median(l["p99"] for l in latencies) if latencies else None}


def measure_all(out_path):
    bench.build_counter()
    net = make_namespace() or Net(None, host_address(), None)
    workdir = tempfile.mkdtemp(prefix="camagent-bench-publish-")
    vp8_threads = bench.camagent_vp8_threads(SIZE)
    results = {"machine": bench.machine(), "size": SIZE, "fps": FPS, "bitrate_kbps": BITRATE,
               "short_s": SHORT, "long_s": LONG, "repeats": bench.REPEATS, "vp8_threads": vp8_threads,
               "publishers": {}}
    try:
        for name in publishers("http://x/whip"):
            bench.log(f"publish path: {name}")
            results["publishers"][name] = measure_publisher(net, workdir, name, vp8_threads)
    finally:
        net.cleanup()
    results["encoders_alone"] = {}
    for codec, name in (("vp8", "camagent VP8"), ("h264", "camagent H.264")):
        bench.log(f"encoder alone, same pictures: {name}")
        runs = sorted((bench.encode_once(codec, bench.ENCODE_LONG, size=SIZE)["cpuMillisecondsPerFrame"]
                       for _ in range(bench.REPEATS)))
        # The same frames again, each at its time (30 a second) as publish
        # meets them: the encoder goes cold between frames, which costs it
        # more than back to back. The path's own cost is what is over this.
        paced = sorted((bench.encode_once(codec, bench.ENCODE_LONG, size=SIZE, paced=True)["cpuMillisecondsPerFrame"]
                        for _ in range(bench.REPEATS)))
        results["encoders_alone"][name] = {"cpu_ms": runs[len(runs) // 2], "cpu_ms_runs": runs,
                                           "paced_cpu_ms": paced[len(paced) // 2], "paced_cpu_ms_runs": paced}
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(report(results))


def report(results):
    p = results["publishers"]
    lines = [f"Publish path, {results['size']} @ {results['fps']} fps, {results['bitrate_kbps']} kbit/s target, "
             f"to the same aiortc receiver (host), VP8 on {results.get('vp8_threads', 2)} thread(s) in both, "
             "CPU per frame (user+sys) and ratio camagent / GStreamer",
             "| publisher | ms / frame | camagent / GStreamer | encoder alone ms / frame | path / encoder | "
             "encoder alone at 30 fps ms / frame | path / encoder at 30 fps | "
             "allocs/frame | peak RSS MiB | decoded fps | kbit/s | max counter gap | latency p50 / p99 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    alone = results.get("encoders_alone", {})
    for name, r in p.items():
        codec = name.split(" ", 1)[1]
        other = p.get(f"GStreamer {codec}") if name.startswith("camagent") else None
        ratio = f"**{r['cpu_ms'] / other['cpu_ms']:.2f}**" if other and other["cpu_ms"] else ""
        gap = r["maxGap"]
        latency = f"{fmt(r['latency_p50'], 0)} / {fmt(r['latency_p99'], 0)}"
        encoder = alone.get(name, {}).get("cpu_ms")
        over = f"**{r['cpu_ms'] / encoder:.2f}**" if encoder else ""
        paced = alone.get(name, {}).get("paced_cpu_ms")
        over_paced = f"**{r['cpu_ms'] / paced:.2f}**" if paced else ""
        lines.append(f"| {name} | {fmt(r['cpu_ms'])} | {ratio} | {fmt(encoder)} | {over} | {fmt(paced)} | {over_paced} | "
                     f"{fmt(r['allocs'], 1)} | {fmt(r['rss_mib'], 0)} | "
                     f"{fmt(r['fps'], 1)} | {fmt(r['kbps'], 0)} | {gap} | {latency} |")
    return "\n".join(lines)


def main():
    bench.command_line(__doc__, measure_all, report)


if __name__ == "__main__":
    main()
