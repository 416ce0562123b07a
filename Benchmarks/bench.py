#!/usr/bin/env python3
"""camagent side by side with FFmpeg and GStreamer. Driven by Benchmarks/run.

  bench.py host   OUT.json   pixel work on the host: YUYV→NV12 vs memcpy, MJPEG decode
  bench.py capture OUT.json  capture path in the test VM (vivid, v4l2loopback)
  bench.py report HOST.json CAPTURE.json   one table

Method (see BENCHMARKS.md): each tool runs the same job twice, short and
long; CPU (user + system, from wait4), heap allocations (LD_PRELOAD
malloc-counter) and frames are differenced, so start-up and teardown cancel
out and what is left is the steady-state cost of one more frame. Each
measurement is repeated and the median kept. Peak RSS is the long run's.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import gst_encoders

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CAMAGENT_BIN", os.path.join(ROOT, ".build", "release", "camagent"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
COUNTER = os.path.join(tempfile.gettempdir(), "camagent-malloc-counter.so")


def log(text):
    print(f"bench: {text}", file=sys.stderr, flush=True)


def build_counter():
    if not os.path.exists(COUNTER):
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", COUNTER,
                        os.path.join(ROOT, "Benchmarks", "malloc-counter.c")], check=True)


def measure(argv, timeout=300):
    """Runs argv with the malloc counter; returns cpu seconds, peak RSS (KiB), allocations, stdout."""
    out = tempfile.NamedTemporaryFile(prefix="allocations.", delete=False).name
    env = dict(os.environ, LD_PRELOAD=COUNTER, MALLOC_COUNTER_OUT=out)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"timed out after {timeout} s: {' '.join(argv)}")
        time.sleep(0.05)
    stdout, stderr = proc.stdout.read().decode(), proc.stderr.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"exit {code}: {' '.join(argv)}\n{stderr[-2000:]}")
    with open(out) as f:
        allocations = int(f.read().split()[1])
    os.unlink(out)
    return {"cpu": usage.ru_utime + usage.ru_stime, "rss_kib": usage.ru_maxrss,
            "allocations": allocations, "stdout": stdout}


def measure_retrying(argv, failures):
    """GStreamer's v4l2src now and then stops on v4l2loopback with an I/O
    error at start; a failed run is retried twice and counted, never hidden."""
    for attempt in range(3):
        try:
            return measure(argv)
        except RuntimeError as error:
            failures.append(str(error).splitlines()[0])
            log(f"run failed ({failures[-1]}), retrying")
            if attempt == 2:
                raise


def per_frame(command, short, long):
    """Median over REPEATS of the steady-state cost of one frame for command(frames)."""
    samples = []
    failures = []
    for _ in range(REPEATS):
        a = measure_retrying(command(short), failures)
        b = measure_retrying(command(long), failures)
        frames_a = frames_of(a, short)
        frames_b = frames_of(b, long)
        extra = frames_b - frames_a
        if extra <= 0:
            raise RuntimeError(f"no extra frames between runs ({frames_a} → {frames_b})")
        samples.append({"cpu_ms": 1000 * (b["cpu"] - a["cpu"]) / extra,
                        "allocations": (b["allocations"] - a["allocations"]) / extra,
                        "rss_mib": b["rss_kib"] / 1024, "last": b})
    samples.sort(key=lambda s: s["cpu_ms"])
    middle = samples[len(samples) // 2]
    return {"cpu_ms_per_frame": middle["cpu_ms"],
            "cpu_ms_runs": [round(s["cpu_ms"], 3) for s in samples],
            "allocations_per_frame": statistics.median(s["allocations"] for s in samples),
            "peak_rss_mib": statistics.median(s["rss_mib"] for s in samples),
            "failed_runs_retried": failures,
            "last": middle["last"]}


def frames_of(result, asked):
    """camagent reports the frames it delivered; ffmpeg and GStreamer stop at exactly `asked`."""
    for line in reversed(result["stdout"].splitlines()):
        if line.startswith("{"):
            return json.loads(line)["frames"]
    return asked


# ---------------------------------------------------------------- host part

def host(out_path):
    build_counter()
    results = {"conversion": [], "mjpeg": {}}
    for size in ["640x480", "1280x720", "1920x1080"]:
        log(f"YUYV→NV12 vs memcpy at {size}")
        proc = subprocess.run([BIN, "bench", "--size", size, "--frames", "200", "--rounds", "7", "--json"],
                              check=True, capture_output=True, text=True)
        results["conversion"].append(json.loads(proc.stdout.splitlines()[-1])["conversion"])

    results["yuyv_tools"] = yuyv_tools()

    with tempfile.TemporaryDirectory() as tmp:
        jpeg = os.path.join(tmp, "frame.jpg")
        # 4:2:2, as UVC webcams send MJPEG.
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720",
                        "-frames:v", "1", "-pix_fmt", "yuvj422p", "-q:v", "3", jpeg], check=True)
        tools = {
            "camagent": lambda n: [BIN, "bench", "--no-conversion", "--jpeg", jpeg, "--frames", str(n),
                                   "--rounds", "1"],
            "ffmpeg": lambda n: ["ffmpeg", "-v", "error", "-threads", "1", "-loop", "1", "-i", jpeg,
                                 "-frames:v", str(n), "-pix_fmt", "nv12", "-f", "null", "-"],
            "gstreamer": lambda n: ["gst-launch-1.0", "-q", "multifilesrc", f"location={jpeg}", "loop=true",
                                    f"num-buffers={n}", "caps=image/jpeg,framerate=30/1", "!", "jpegdec", "!",
                                    "videoconvert", "!", "video/x-raw,format=NV12", "!", "fakesink"],
        }
        tools[GST_ISLOW] = same_idct_as_camagent(tools["gstreamer"])
        for name, command in tools.items():
            log(f"MJPEG 1280x720 4:2:2 decode to NV12: {name}")
            r = per_frame(command, 50, 550)
            r.pop("last")
            r["cpu_ms_per_megapixel"] = r["cpu_ms_per_frame"] / (1280 * 720 / 1e6)
            results["mjpeg"][name] = r
    results["encode"] = encoders()
    results["machine"] = machine()
    write(out_path, results)


# GStreamer's jpegdec decodes with libjpeg's fast IDCT (ifast) by default;
# camagent uses the accurate one (islow). This row runs jpegdec at islow, so
# both produce the same pictures.
GST_ISLOW = "gstreamer (islow)"


def same_idct_as_camagent(gstreamer):
    return lambda n: [word for arg in gstreamer(n)
                      for word in (["jpegdec", "idct-method=islow"] if arg == "jpegdec" else [arg])]


ENCODE_SIZE, ENCODE_FPS, ENCODE_KBPS, ENCODE_SHORT, ENCODE_LONG = "1280x720", 30, 1500, 60, 300


def encoders():
    """The video encoders alone, on the same test-pattern pictures at 1280x720:
    camagent's (`camagent bench --encode`, timed in-process over the
    encoding loop, on pre-drawn frames) against GStreamer's vp8enc and
    openh264enc with the same settings, reading Y4M files that `camagent
    capture` wrote from the pattern. GStreamer's cost of reading and parsing
    the file (a filesrc ! y4mdec ! identity ! fakesink run) is subtracted, so
    both figures are the encoder's."""
    rows = {}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        files = {}
        for n in (ENCODE_SHORT, ENCODE_LONG):
            files[n] = os.path.join(tmp, f"pattern-{n}.y4m")
            subprocess.run([BIN, "capture", "--device", "test-pattern", "--size", ENCODE_SIZE, "--fps", str(ENCODE_FPS),
                            "--frames", str(n), "--output", files[n]], check=True, capture_output=True)
        gst = {"vp8": gst_encoders.vp8enc(ENCODE_KBPS, ENCODE_FPS, camagent_vp8_threads(ENCODE_SIZE)),
               "h264": gst_encoders.openh264enc(ENCODE_KBPS, ENCODE_FPS)}

        def pipeline(element):
            return lambda n: (["gst-launch-1.0", "-q", "filesrc", f"location={files[n]}", "!", "y4mdec", "!"]
                              + element.split() + ["!", "fakesink"])
        log("encoders alone: GStreamer reading the Y4M files (subtracted)")
        reading = per_frame(pipeline("identity"), ENCODE_SHORT, ENCODE_LONG)
        for codec in ("vp8", "h264"):
            log(f"encoders alone: camagent {codec}")
            runs = sorted((encode_once(codec, ENCODE_LONG) for _ in range(REPEATS)),
                          key=lambda r: r["cpuMillisecondsPerFrame"])
            ours = runs[len(runs) // 2]
            log(f"encoders alone: GStreamer {codec}")
            theirs = per_frame(pipeline(gst[codec]), ENCODE_SHORT, ENCODE_LONG)
            rows[codec] = {"threads": ours["threads"],
                           "camagent_cpu_ms": ours["cpuMillisecondsPerFrame"],
                           "camagent_cpu_ms_runs": [round(r["cpuMillisecondsPerFrame"], 3) for r in runs],
                           "camagent_kbps": ours["kilobitsPerSecond"],
                           "gstreamer_cpu_ms": theirs["cpu_ms_per_frame"] - reading["cpu_ms_per_frame"],
                           "gstreamer_cpu_ms_runs": theirs["cpu_ms_runs"],
                           "gstreamer_reading_cpu_ms": reading["cpu_ms_per_frame"]}
    return rows


def encode_once(codec, frames, size=ENCODE_SIZE, paced=False):
    """One `camagent bench --encode` run (at ENCODE_KBPS; bench's frame rate is 30);
    `paced`: each frame encoded at its time, 30 a second, as publish meets them."""
    out = subprocess.run([BIN, "bench", "--no-conversion", "--encode", codec, "--size", size,
                          "--encode-frames", str(frames), "--bitrate", str(ENCODE_KBPS), "--json"]
                         + (["--encode-paced"] if paced else []),
                         check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.splitlines()[-1])["encode"]


def camagent_vp8_threads(size):
    """The libvpx thread count camagent picks for `size` on this machine, so that
    GStreamer's vp8enc is given the same."""
    return encode_once("vp8", 1, size)["threads"]


def yuyv_tools():
    """The same YUYV→NV12 conversion done natively by FFmpeg (swscale) and
    GStreamer (videoconvert), one 1280x720 frame looped from a file: what
    they spend per frame on the pixel work of a YUYV capture, on real silicon
    rather than in the VM. Their source stays warm in the cache, which
    favours them; camagent's figure is from cold buffers."""
    size, (w, h) = "1280x720", (1280, 720)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "frame.yuyv")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={size}", "-frames:v", "1",
                        "-pix_fmt", "yuyv422", "-f", "rawvideo", raw], check=True)
        tools = {
            "ffmpeg": lambda n: ["ffmpeg", "-v", "error", "-threads", "1", "-stream_loop", "-1", "-f", "rawvideo",
                                 "-pix_fmt", "yuyv422", "-video_size", size, "-i", raw, "-frames:v", str(n),
                                 "-pix_fmt", "nv12", "-f", "null", "-"],
            "gstreamer": lambda n: ["gst-launch-1.0", "-q", "multifilesrc", f"location={raw}", "loop=true",
                                    f"num-buffers={n}", "!", "rawvideoparse", f"width={w}", f"height={h}",
                                    "format=yuy2", "framerate=30/1", "!", "videoconvert", "!",
                                    "video/x-raw,format=NV12", "!", "fakesink"],
        }
        for name, command in tools.items():
            log(f"YUYV→NV12 {size} natively: {name}")
            r = per_frame(command, 100, 1100)
            r.pop("last")
            rows[name] = r
    return rows


# ------------------------------------------------------------- capture part

VIVID = os.environ.get("CAMAGENT_VIVID_CAPTURE", "/dev/video0")
LOOP = os.environ.get("CAMAGENT_LOOPBACK", "/dev/video10")

# vivid's webcam input: the highest rate it offers at each size (25, 12.5, 5).
VIVID_MODES = [("640x480", "YUYV", 25, "25/1"), ("1280x720", "YUYV", 12.5, "25/2"), ("1920x1080", "YUYV", 5, "5/1")]
# Fed at 10 fps: v4l2loopback's writer overwrites its two buffers in a ring
# whatever a reader holds, so a reader slower than two writer periods gets
# torn JPEGs; every tool here decodes a 720p JPEG within 200 ms in the VM.
MJPEG_MODE = ("1280x720", "MJPEG", 10, "10/1")


def capture_tools(device, size, fourcc, fps, fraction):
    w, h = size.split("x")
    mjpeg = fourcc == "MJPEG"
    tools = {
        "camagent": lambda n: [BIN, "capture", "--device", device, "--size", size, "--fps", str(fps),
                               "--format", "mjpeg" if mjpeg else "yuyv", "--frames", str(n), "--json"],
        "ffmpeg": lambda n: ["ffmpeg", "-v", "error", "-f", "v4l2", "-input_format", "mjpeg" if mjpeg else "yuyv422",
                             "-video_size", size, "-framerate", str(fps), "-i", device, "-frames:v", str(n),
                             "-pix_fmt", "nv12", "-f", "null", "-"],
        "gstreamer": lambda n: ["gst-launch-1.0", "-q", "v4l2src", f"device={device}", f"num-buffers={n}", "!",
                                # v4l2loopback lists its output side's rate, not the feed's: no rate in the caps.
                                (f"image/jpeg,width={w},height={h}" if mjpeg else
                                 f"video/x-raw,format=YUY2,width={w},height={h},framerate={fraction}"), "!",
                                *(["jpegdec", "!"] if mjpeg else []),
                                "videoconvert", "!", "video/x-raw,format=NV12", "!", "fakesink"],
    }
    if mjpeg:
        tools[GST_ISLOW] = same_idct_as_camagent(tools["gstreamer"])
    return tools


def capture_mode(device, mode, results):
    size, fourcc, fps, fraction = mode
    short, long = max(5, round(fps)), max(30, round(6 * fps))
    row = {"mode": f"{size} {fourcc}", "device": device, "fps": fps, "tools": {}}
    for name, command in capture_tools(device, size, fourcc, fps, fraction).items():
        log(f"capture {size} {fourcc} @ {fps} fps: {name} ({short} vs {long} frames, {REPEATS} times)")
        r = per_frame(command, short, long)
        last = r.pop("last")
        if name == "camagent":
            summary = json.loads(last["stdout"].splitlines()[-1])
            r["measured_fps"] = summary["measuredFps"]
            r["bad_jpeg"] = summary["badJPEG"]
            r["skipped_for_newer"] = summary["skippedForNewer"]
        row["tools"][name] = r
    results["modes"].append(row)


def reload_loopback(*extra):
    opts = os.environ.get("CAMAGENT_LOOPBACK_MODPROBE_OPTS", "").split()
    for _ in range(50):
        if subprocess.run(["modprobe", "-r", "v4l2loopback"], capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    subprocess.run(["modprobe", "v4l2loopback", *opts, *extra], check=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(LOOP):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{LOOP} did not come back")
        time.sleep(0.2)


def start_mjpeg_feeder(tmp):
    """ffmpeg copies a pre-encoded 4:2:2 MJPEG stream into the loopback in real
    time: no encoding in the guest, so the feeder costs little. (More loopback
    buffers would allow a faster feed, but GStreamer's v4l2src then fails to
    allocate its buffers on v4l2loopback 0.12.7.)"""
    reload_loopback()
    clip = os.path.join(tmp, "clip.mkv")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=10",
                    "-frames:v", "20", "-c:v", "mjpeg", "-pix_fmt", "yuvj422p", "-q:v", "3", clip], check=True)
    feeder = subprocess.Popen(["ffmpeg", "-v", "error", "-re", "-stream_loop", "-1", "-i", clip, "-c:v", "copy",
                               "-f", "v4l2", LOOP], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = subprocess.run(["v4l2-ctl", "-d", LOOP, "--get-fmt-video"], capture_output=True, text=True).stdout
        if "MJPG" in out:
            return feeder
        time.sleep(0.3)
    feeder.kill()
    raise RuntimeError(f"the MJPEG feeder never showed on {LOOP}")


def capture(out_path):
    build_counter()
    # GStreamer scans its plugins once per cache; do it before measuring.
    subprocess.run(["gst-inspect-1.0", "fakesink"], capture_output=True)
    results = {"modes": [], "repeats": REPEATS, "machine": machine()}
    for mode in VIVID_MODES:
        capture_mode(VIVID, mode, results)
        write(out_path, results)   # what is measured survives a later failure
    with tempfile.TemporaryDirectory() as tmp:
        feeder = start_mjpeg_feeder(tmp)
        try:
            capture_mode(LOOP, MJPEG_MODE, results)
        finally:
            feeder.terminate()
            feeder.wait(timeout=20)
    results["latency"] = writer_to_consumer_latency()
    write(out_path, results)


def writer_to_consumer_latency():
    """Neither driver gives a kernel timestamp worth measuring from in the VM
    (vivid stamps the end of a frame it has not finished, ~15 ms ahead;
    v4l2loopback passes on the writer's own clock), so latency comes from
    `camagent selftest`: frames carry their write time into the loopback and
    are timed on arrival at the consumer callback."""
    rows = []
    for size in ["640x480", "1280x720"]:
        reload_loopback()
        log(f"writer → consumer latency at {size} (selftest through v4l2loopback)")
        proc = subprocess.run([BIN, "selftest", "--loopback", LOOP, "--size", size, "--fps", "15",
                               "--frames", "150", "--json"], capture_output=True, text=True, timeout=300)
        report = json.loads(proc.stdout.splitlines()[-1])
        rows.append({"size": size, "p50_ms": report["latencyP50Ms"], "p99_ms": report["latencyP99Ms"],
                     "frames": report["framesCaptured"], "passed": report["passed"]})
    return rows


# ------------------------------------------------------------------ report

def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return {"cpu": model, "cores": os.cpu_count(), "kernel": os.uname().release}


def write(path, results):
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    log(f"wrote {path}")


def report(host_path, capture_path):
    h = json.load(open(host_path))
    c = json.load(open(capture_path))
    lines = []
    lines.append(f"Host: {h['machine']['cpu']}, {h['machine']['cores']} cores, Linux {h['machine']['kernel']}")
    lines.append(f"Capture path: test VM (qemu TCG, Linux {c['machine']['kernel']}), median of {c['repeats']} runs")
    lines.append("")
    lines.append("Capture path, CPU per frame (user+sys) and ratio to the better of FFmpeg and GStreamer (target ≤ 0.50)")
    lines.append("| mode | camagent ms | FFmpeg ms | GStreamer ms | camagent / best | allocs/frame (c / f / g) | peak RSS MiB (c / f / g) |")
    lines.append("|---|---|---|---|---|---|---|")
    for m in c["modes"]:
        t = m["tools"]
        ca, ff, gs = t["camagent"], t["ffmpeg"], t["gstreamer"]
        best = min(ff["cpu_ms_per_frame"], gs["cpu_ms_per_frame"])
        lines.append(f"| {m['mode']} @ {m['fps']:g} fps | {ca['cpu_ms_per_frame']:.2f} | {ff['cpu_ms_per_frame']:.2f} | "
                     f"{gs['cpu_ms_per_frame']:.2f} | **{ca['cpu_ms_per_frame'] / best:.2f}** | "
                     f"{ca['allocations_per_frame']:.1f} / {ff['allocations_per_frame']:.1f} / {gs['allocations_per_frame']:.1f} | "
                     f"{ca['peak_rss_mib']:.0f} / {ff['peak_rss_mib']:.0f} / {gs['peak_rss_mib']:.0f} |")
    same = [(m, m["tools"][GST_ISLOW]) for m in c["modes"] if GST_ISLOW in m["tools"]]
    if same:
        lines.append("")
        lines.append("MJPEG at the same IDCT (islow) in both: camagent against GStreamer's jpegdec idct-method=islow")
        lines.append("| mode | camagent ms | GStreamer (islow) ms | camagent / GStreamer (islow) |")
        lines.append("|---|---|---|---|")
        for m, g in same:
            ca = m["tools"]["camagent"]["cpu_ms_per_frame"]
            lines.append(f"| {m['mode']} @ {m['fps']:g} fps | {ca:.2f} | {g['cpu_ms_per_frame']:.2f} | "
                         f"**{ca / g['cpu_ms_per_frame']:.2f}** |")
    lines.append("")
    lines.append("Writer → consumer callback latency, camagent selftest through v4l2loopback (test VM)")
    lines.append("| size | p50 ms | p99 ms | frames |")
    lines.append("|---|---|---|---|")
    for r in c["latency"]:
        lines.append(f"| {r['size']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['frames']} |")
    lines.append("")
    lines.append("YUYV→NV12 (libyuv) vs memcpy of the same source bytes, cold buffers, host (target ≤ 1.25)")
    lines.append("| size | YUYV→NV12 ms | memcpy ms | ratio |")
    lines.append("|---|---|---|---|")
    for r in h["conversion"]:
        lines.append(f"| {r['width']}x{r['height']} | {r['yuyvToNV12Nanoseconds'] / 1e6:.3f} | "
                     f"{r['memcpyNanoseconds'] / 1e6:.3f} | **{r['yuyvToMemcpyRatio']:.2f}** |")
    if "yuyv_tools" in h:
        ours = next(r for r in h["conversion"] if r["width"] == 1280)["yuyvToNV12Nanoseconds"] / 1e6
        lines.append("")
        lines.append("YUYV→NV12 at 1280x720 natively on the host, CPU per frame (FFmpeg and GStreamer read a warm looped frame)")
        lines.append("| tool | ms / frame | camagent / tool |")
        lines.append("|---|---|---|")
        lines.append(f"| camagent (libyuv, cold) | {ours:.3f} | 1.00 |")
        for name, r in h["yuyv_tools"].items():
            lines.append(f"| {name} | {r['cpu_ms_per_frame']:.3f} | **{ours / r['cpu_ms_per_frame']:.2f}** |")
    lines.append("")
    lines.append("MJPEG 1280x720 4:2:2 decode to NV12, host, CPU per megapixel")
    lines.append("| tool | ms / megapixel | ratio to camagent | allocs/frame | peak RSS MiB |")
    lines.append("|---|---|---|---|---|")
    base = h["mjpeg"]["camagent"]["cpu_ms_per_megapixel"]
    for name, r in h["mjpeg"].items():
        lines.append(f"| {name} | {r['cpu_ms_per_megapixel']:.3f} | {r['cpu_ms_per_megapixel'] / base:.2f} | "
                     f"{r['allocations_per_frame']:.1f} | {r['peak_rss_mib']:.0f} |")
    if "encode" in h:
        lines.append("")
        lines.append(f"Video encoders alone, {ENCODE_SIZE} test pattern, {ENCODE_KBPS} kbit/s, host, CPU per frame "
                     "(GStreamer's Y4M reading subtracted)")
        lines.append("| codec | threads | camagent ms | GStreamer ms | camagent / GStreamer |")
        lines.append("|---|---|---|---|---|")
        names = {"vp8": "VP8 (libvpx)", "h264": "H.264 (OpenH264)"}
        for codec, r in h["encode"].items():
            lines.append(f"| {names[codec]} | {r['threads']} | {r['camagent_cpu_ms']:.2f} | {r['gstreamer_cpu_ms']:.2f} | "
                         f"**{r['camagent_cpu_ms'] / r['gstreamer_cpu_ms']:.2f}** |")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("host", "capture", "report"):
        sys.exit(__doc__)
    {"host": host, "capture": capture, "report": report}[sys.argv[1]](*sys.argv[2:])


def fmt(value, digits=2):
    """A figure for the step benchmarks' tables: `digits` decimals, or – when not measured."""
    return "–" if value is None else f"{value:.{digits}f}"


def command_line(doc, measure_all, report):
    """The entry of the step benchmarks (publish.py, router.py, subscriber.py):
    `STEP.py OUT.json` measures, `STEP.py report OUT.json` prints its table."""
    if len(sys.argv) == 3 and sys.argv[1] == "report":
        with open(sys.argv[2]) as f:
            print(report(json.load(f)))
    elif len(sys.argv) == 2:
        measure_all(sys.argv[1])
    else:
        sys.exit(doc)
