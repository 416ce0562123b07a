#!/usr/bin/env python3
"""The subscriber: `camagent subscribe` against GStreamer's webrtcbin and aiortc, decoding
the same 720p30 stream from the same router, and camagent's glass-to-glass latency.

  subscriber.py OUT.json          measure (run by `Benchmarks/run subscriber`), print the tables
  subscriber.py report OUT.json   the tables again from OUT.json

Inside a network namespace of the run's own (publish_support.make_namespace), for
each codec (VP8, then H.264): `camagent router`, a routed session, and one
publisher, `camagent publish --device test-pattern --size 1280x720 --fps 30
--bitrate 1500 --audio none --codec C --session URL` (video only). It also
serves its built-in viewer (--listen, with a token) for the latency's clock.

CPU per decoded frame. Three subscribers of that stream, one at a time (each has
the machine to itself beside the router and the publisher), REPEATS (2) times in
alternating order (camagent, GStreamer, aiortc, then the reverse):

  camagent    `camagent subscribe --session URL --token T --first --no-audio
              --video-out none --json`: decoded and dropped
  GStreamer   Benchmarks/gst_whep_subscriber.py: webrtcbin, rtpvp8depay ! vp8dec
              threads=1 (rtph264depay ! h264parse ! openh264dec) ! fakesink, frames counted by
              fakesink (Debian's python3)
  aiortc      Benchmarks/subscriber_aiortc.py: every frame decoded and taken off
              the track, nothing else done with it

Each prints its decoded-frame count once a second (camagent's --json stats
line, the others' own). A thread reads each line as it comes and at once
samples the process's CPU (utime + stime from /proc/PID/stat: every thread,
live or ended) and memory (VmRSS, VmHWM). SETTLE (5) seconds after it connects,
the first such line opens a WINDOW (20) second window, the first line after it
closes it: CPU per decoded frame is the CPU between the two lines over the
frames decoded between them. Runs are pooled (CPU and frames summed).

Latency, glass to glass, through the router. The test pattern draws frame N at
start + N × 1/30 s on CLOCK_MONOTONIC (TestPatternCapture: an absolute
schedule), with N as a barcode, and the publisher stamps each frame's RTP time
from its capture time. While frames are timed, Benchmarks/subscriber_aiortc.py
--counters watches the publisher's built-in viewer directly (no router) and
puts each frame's RTP time on the publisher's wall clock through the
publisher's RTCP sender reports: N's capture time. (The router cannot be used
for this: it re-times RTP and writes sender reports of its own.) The
schedule's start is the earliest capture time − N/30 s; its two halves must
agree within ANCHOR_TOLERANCE (else the pattern restarted or a clock moved),
and it must fall just after the pattern thread's start as /proc recorded it.
Then `camagent subscribe --video-out FIFO.y4m` writes each decoded frame into
a FIFO; this script reads it, stamps the moment a frame's last byte arrives
(time.time()) and reads its counter: latency = arrival − N's capture time
(and, beside it, arrival − N's scheduled time, which adds the pattern
thread's own lateness). It includes encoding, pacing, the router, the
subscriber's jitter buffer and decoder, and the frame's NV12 → I420
conversion and write. aiortc through the router (its frames as they come
off the track) is timed the same way, for comparison.

BENCH_SUBSCRIBER_CODECS (vp8,h264), BENCH_SUBSCRIBER_WINDOW (20),
BENCH_SUBSCRIBER_SETTLE (5), BENCH_SUBSCRIBER_REPEATS (3),
BENCH_SUBSCRIBER_LATENCY (20, seconds timed) and BENCH_SUBSCRIBER_ONLY (a
subscriber's name: only that one, no latency) are for development runs.
"""
import fcntl
import json
import os
import queue
import secrets
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "Tests", "Publish"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Device"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import bench  # noqa: E402
from bench import fmt  # noqa: E402
from pattern import decode_counter  # noqa: E402
from publish_support import BIN, PY, make_namespace  # noqa: E402
from router import RouterServer, cpu_seconds, difference, publisher_video  # noqa: E402

SIZE, FPS, BITRATE = "1280x720", 30, 1500
WIDTH, HEIGHT = (int(v) for v in SIZE.split("x"))
# TestPatternCapture's frame interval: Int64(1e9 / fps) nanoseconds.
INTERVAL = int(1e9 / FPS) / 1e9
CODECS = os.environ.get("BENCH_SUBSCRIBER_CODECS", "vp8,h264").split(",")
WINDOW = float(os.environ.get("BENCH_SUBSCRIBER_WINDOW", "20"))
SETTLE = float(os.environ.get("BENCH_SUBSCRIBER_SETTLE", "5"))
REPEATS = int(os.environ.get("BENCH_SUBSCRIBER_REPEATS", "3"))
LATENCY = float(os.environ.get("BENCH_SUBSCRIBER_LATENCY", "20"))
SUBSCRIBERS = [s for s in ("camagent", "GStreamer", "aiortc")
               if os.environ.get("BENCH_SUBSCRIBER_ONLY", s).lower() == s.lower()]
ANCHOR_MIN_FRAMES = 60
ANCHOR_TOLERANCE = 0.002   # seconds: the pattern's clock, before and after, must agree this well
# The pattern thread's start as the kernel recorded it (/proc, in clock ticks: 10 ms) must
# hold the start found from the sender reports: within this much before and after the tick.
THREAD_START_SLACK = (0.005, 0.025)
LATENCY_SETTLE = 3         # seconds after connecting before frames are timed
CONNECT_TIMEOUT = 40       # seconds for a subscriber to connect and say so
LINE_TIMEOUT = 5           # seconds without a stats line from a running subscriber: it fails
VIEWER_PORT = 18080        # the publisher's built-in viewer, in the run's own namespace
PUBLISH_FOR = 1800         # seconds; the publisher is stopped when its codec is done
SYSTEM_PYTHON = "/usr/bin/python3"   # Debian's, which has python3-gi for webrtcbin
F_SETPIPE_SZ = 1031
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_RATIO = 0.5         # camagent's CPU per frame, at most this share of GStreamer's
TARGET_LATENCY_MS = 100    # glass to glass, camagent → router → camagent, on loopback


def memory(pid):
    """VmRSS and VmHWM (peak) in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1]) / 1024
    return values.get("VmRSS"), values.get("VmHWM")


class Watched:
    """A subscriber process whose stdout is read on a thread: each JSON line is kept and
    each stats line gets the process's CPU and memory sampled the moment it is read."""

    def __init__(self, proc, frames_of):
        self.proc = proc
        self.frames_of = frames_of
        self.lines = []
        self.marks = queue.Queue()   # (monotonic, frames, cpu seconds, rss, hwm)
        self.connected = threading.Event()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for text in self.proc.stdout:
            if not text.startswith("{"):
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue
            if line.get("event") == "stats":
                now = time.monotonic()
                try:
                    cpu = cpu_seconds(self.proc.pid)
                    rss, hwm = memory(self.proc.pid)
                except (FileNotFoundError, ProcessLookupError):
                    continue
                self.marks.put((now, self.frames_of(line), cpu, rss, hwm))
            elif line.get("event") == "connected" or (line.get("event") == "state" and line.get("state") == "connected"):
                self.connected.set()
            self.lines.append(line)

    def log(self):
        return open(self.proc.log_path).read()[-3000:]

    def wait_connected(self, timeout=CONNECT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not self.connected.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.proc.label}: not connected within {timeout} s (exit {self.proc.poll()}):\n"
                                   f"{self.lines[-5:]}\n{self.log()}")

    def next_mark(self, after):
        """The first stats line read at or after monotonic time `after`."""
        deadline = max(after, time.monotonic()) + LINE_TIMEOUT
        while True:
            try:
                mark = self.marks.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"{self.proc.label}: no stats line for {LINE_TIMEOUT} s (exit {self.proc.poll()}):\n"
                                   + self.log())
            if mark[0] >= after:
                return mark

    def summary(self):
        found = [line for line in self.lines if line.get("event") == "summary"]
        return found[-1] if found else None


def camagent_frames(line):
    return (line.get("video") or {}).get("framesDecoded", 0)


def other_frames(line):
    return line.get("framesDecoded", 0)


class Block:
    """One codec's router, session and publisher."""

    def __init__(self, net, workdir, codec):
        self.net = net
        self.workdir = workdir
        self.codec = codec
        self.router = RouterServer(net, workdir)
        session = self.router.create_session()
        self.url = self.router.session_url(session)
        self.viewer_token = secrets.token_hex(16)
        self.publisher = net.start([BIN, "publish", "--device", "test-pattern", "--size", SIZE, "--fps", str(FPS),
                                    "--bitrate", str(BITRATE), "--audio", "none", "--codec", codec,
                                    "--session", self.url, "--token", self.router.token(session, "publisher"),
                                    "--listen", f"{net.addr}:{VIEWER_PORT}", "--viewer-token", self.viewer_token,
                                    "--duration", str(PUBLISH_FOR), "--json"], f"publisher-{codec}", workdir)
        self.publisher_lines = []
        threading.Thread(target=self.keep_publisher_lines, daemon=True).start()
        self.stream = self.router.wait_for_stream(session)
        self.token = self.router.token(session, "subscriber")
        self.whep = f"{self.url}/streams/{self.stream['streamId']}/subscribe"
        self.viewer = f"http://{net.addr}:{VIEWER_PORT}/whep"

    def keep_publisher_lines(self):
        for text in self.publisher.stdout:
            self.publisher_lines.append(text)

    def argv(self, name, seconds):
        if name == "camagent":
            return [BIN, "subscribe", "--session", self.url, "--token", self.token, "--first", "--no-audio",
                    "--video-out", "none", "--json", "--duration", str(seconds)]
        if name == "GStreamer":
            return [SYSTEM_PYTHON, os.path.join(HERE, "gst_whep_subscriber.py"), "--whep", self.whep,
                    "--token", self.token, "--duration", str(seconds)]
        return [PY, os.path.join(HERE, "subscriber_aiortc.py"), "--whep", self.whep, "--token", self.token,
                "--duration", str(seconds)]

    def alive(self):
        for proc in (self.publisher, self.router.proc):
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.label} ended (exit {proc.returncode}):\n" + open(proc.log_path).read()[-3000:])

    def publisher_video(self):
        """The video counters of the publisher's latest stats line (one a second)."""
        for text in reversed(list(self.publisher_lines)):
            if text.startswith("{") and '"event":"stats"' in text.replace(" ", ""):
                return publisher_video(json.loads(text))
        return None

    def stop(self):
        self.net.stop(self.publisher)
        self.net.stop(self.router.proc)


def stop_subscriber(net, watched):
    """SIGTERM; a subscriber must then end by itself with exit 0 and a summary."""
    code = net.stop(watched.proc, timeout=20)
    deadline = time.monotonic() + 5
    while watched.summary() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if code != 0:
        raise RuntimeError(f"{watched.proc.label} exited {code}:\n{watched.lines[-3:]}\n{watched.log()}")
    if watched.summary() is None:
        raise RuntimeError(f"{watched.proc.label}: no summary line\n{watched.log()}")
    return watched.summary()


def cpu_run(block, name, run):
    net = block.net
    block.alive()
    frames_of = camagent_frames if name == "camagent" else other_frames
    proc = net.start(block.argv(name, SETTLE + WINDOW + 60), f"{name}-{block.codec}-{run}", block.workdir)
    watched = Watched(proc, frames_of)
    try:
        watched.wait_connected()
        time.sleep(SETTLE)
        a = watched.next_mark(time.monotonic())
        side_a = (cpu_seconds(block.publisher.pid), cpu_seconds(block.router.proc.pid), block.publisher_video())
        b = watched.next_mark(a[0] + WINDOW)
        side_b = (cpu_seconds(block.publisher.pid), cpu_seconds(block.router.proc.pid), block.publisher_video())
        load = os.getloadavg()
        block.alive()
    except BaseException:
        net.stop(proc)
        raise
    summary = stop_subscriber(net, watched)
    seconds, frames, cpu = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    if frames <= 0:
        raise RuntimeError(f"{name}: decoded no frame in the window\n{watched.log()}")
    row = {"subscriber": name, "codec": block.codec, "run": run, "seconds": seconds, "frames": frames,
           "cpuSeconds": cpu, "msPerFrame": cpu * 1000 / frames, "cores": cpu / seconds, "fps": frames / seconds,
           "rssMiB": b[3], "peakRssMiB": b[4], "rssGrowthMiB": b[3] - a[3],
           "publisherCores": (side_b[0] - side_a[0]) / seconds, "routerCores": (side_b[1] - side_a[1]) / seconds,
           "publisherInWindow": difference(side_a[2], side_b[2]), "load": round(load[0], 2), "summary": summary}
    sent = (row["publisherInWindow"] or {}).get("bytesSent")
    row["publisherVideoKbps"] = sent * 8 / seconds / 1000 if sent is not None else None
    if name == "camagent":
        # What the receive path did over the whole run (from connecting to SIGTERM).
        row["receive"] = summary.get("video")
    bench.log(f"{block.codec} {name} run {run}: {row['msPerFrame']:.2f} ms/frame, {row['fps']:.1f} fps, "
              f"{row['cores']:.3f} cores, RSS {row['rssMiB']:.0f} MiB, load {row['load']}")
    return row


class PatternClock:
    """The publisher's capture time of each frame, and the pattern's schedule: an aiortc
    viewer (subscriber_aiortc.py --counters) on the publisher's built-in viewer, straight
    from the publisher (no router), for as long as frames are timed. Each frame it decodes
    gives counter N and its RTP time on the publisher's wall clock (the publisher's sender
    reports; the publisher stamps RTP from the capture time): N's capture time. The
    schedule's start is the earliest capture time − N/30 s (the frame drawn with the least
    delay)."""

    def __init__(self, block):
        self.block = block
        self.path = os.path.join(block.workdir, f"clock-{block.codec}.json")
        argv = [PY, os.path.join(HERE, "subscriber_aiortc.py"), "--whep", block.viewer, "--token", block.viewer_token,
                "--duration", str(PUBLISH_FOR), "--counters", self.path]
        self.watched = Watched(block.net.start(argv, f"clock-{block.codec}", block.workdir), other_frames)
        self.watched.wait_connected()
        time.sleep(LATENCY_SETTLE)

    def stop(self):
        stop_subscriber(self.block.net, self.watched)
        with open(self.path) as f:
            frames = json.load(f)["frames"]
        timed = [(counter, arrival, capture) for counter, arrival, capture in frames
                 if counter is not None and capture is not None]
        if len(timed) < ANCHOR_MIN_FRAMES:
            raise RuntimeError(f"the pattern clock's viewer timed only {len(timed)} frames (of {len(frames)})")
        self.captures = {counter: capture for counter, _, capture in timed}
        offsets = [capture - counter * INTERVAL for counter, _, capture in timed]
        half = len(offsets) // 2
        early, late = min(offsets[:half]), min(offsets[half:])
        if abs(late - early) > ANCHOR_TOLERANCE:
            raise RuntimeError(f"{self.block.codec}: the pattern's schedule moved by {(late - early) * 1000:.1f} ms "
                               f"while frames were timed (more than {ANCHOR_TOLERANCE * 1000:.0f} ms)")
        self.start = min(early, late)
        delays = sorted((o - self.start) * 1000 for o in offsets)
        self.result = {"start": self.start, "frames": len(timed), "scheduleMovedMs": (late - early) * 1000,
                       # How late the pattern's frames were drawn against the schedule.
                       "drawDelayMs": percentiles(delays),
                       # aiortc straight from the publisher (no router), capture to decoded.
                       "directAiortcMs": percentiles([(a - c) * 1000 for _, a, c in timed])}
        check_against_thread(self.block, self.result)
        bench.log(f"{self.block.codec} pattern clock: {len(timed)} frames, drawn up to "
                  f"{self.result['drawDelayMs']['max']:.1f} ms late (p50 {self.result['drawDelayMs']['p50']:.1f}); "
                  f"{self.result['afterThreadStartTickMs']:.1f} ms after the thread's start tick")
        return self.result


def pattern_thread_start(pid):
    """When the publisher's pattern thread began, on the wall clock, from its /proc stat
    (field 22, clock ticks since boot: the true start is within one tick after it)."""
    starts = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if not f.read().startswith("camagent-patter"):   # comm keeps 15 characters
                continue
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            starts.append(int(f.read().rsplit(")", 1)[1].split()[19]) / CLK_TCK)
    if len(starts) != 1:
        raise RuntimeError(f"the publisher has {len(starts)} test-pattern threads, not one")
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return boot + starts[0]


def check_against_thread(block, found):
    """The sender reports' start must fall within the kernel's record of the thread's start."""
    tick = pattern_thread_start(block.publisher.pid)
    after = found["start"] - tick
    found["afterThreadStartTickMs"] = after * 1000
    if not -THREAD_START_SLACK[0] <= after <= 1 / CLK_TCK + THREAD_START_SLACK[1]:
        raise RuntimeError(f"the pattern's start from the sender reports is {after * 1000:.1f} ms after the "
                           f"pattern thread's start tick in /proc: the two clocks disagree")


def percentiles(values):
    if not values:
        return None
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return {"p50": pick(0.50), "p90": pick(0.90), "p99": pick(0.99), "max": values[-1], "min": values[0],
            "frames": len(values)}


def latency_from(timed, clock):
    """Latency per frame (ms) from [counter, arrival] pairs: from the frame's capture (the
    publisher's own time of it) and from its place in the pattern's schedule; the counters' gaps."""
    series = []
    for counter, arrival in timed:
        capture = clock.captures.get(counter)
        series.append([counter, round((arrival - capture) * 1000, 2) if capture is not None else None,
                       round((arrival - (clock.start + counter * INTERVAL)) * 1000, 2)])
    counters = [c for c, _ in timed]
    steps = [b - a for a, b in zip(counters, counters[1:])]
    from_capture = [c for _, c, _ in series if c is not None]
    if len(from_capture) < 0.9 * len(series):
        raise RuntimeError(f"only {len(from_capture)} of {len(series)} frames have a capture time from the pattern clock")
    return {"fromCapture": percentiles(from_capture), "fromSchedule": percentiles([s for _, _, s in series]),
            "frames": len(series), "maxCounterGap": max(steps) if steps else None,
            "backwards": sum(1 for s in steps if s <= 0), "missing": sum(s - 1 for s in steps if s > 1),
            "series": series}


class Y4MFifo:
    """A FIFO `camagent subscribe --video-out` writes Y4M into; a thread reads each frame,
    stamps the moment its last byte arrived, and reads its counter."""

    def __init__(self, path):
        self.path = path
        os.mkfifo(path)
        # O_RDWR: never blocks, and the FIFO keeps a writer, so the subscriber's first
        # open-and-close (it checks the path before connecting) is no end of file.
        self.fd = os.open(path, os.O_RDWR)
        # As large as an unprivileged pipe may be (1 MiB by default; a 720p frame is 1.4 MB):
        # the subscriber's write of a frame then waits for this reader at most once.
        with open("/proc/sys/fs/pipe-max-size") as f:
            fcntl.fcntl(self.fd, F_SETPIPE_SZ, min(4 << 20, int(f.read())))
        self.frames = []        # [counter or None, arrival]
        self.header = None
        self.error = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        try:
            buffer = bytearray()
            frame_size = None
            while not self.stopping.is_set():
                if not select.select([self.fd], [], [], 0.2)[0]:
                    continue
                buffer += os.read(self.fd, 4 << 20)
                if self.header is None:
                    if b"\n" not in buffer:
                        continue
                    line, _, rest = bytes(buffer).partition(b"\n")
                    self.header = line.decode()
                    fields = {f[:1]: f[1:] for f in self.header.split()[1:]}
                    w, h = int(fields["W"]), int(fields["H"])
                    if (w, h) != (WIDTH, HEIGHT):
                        raise RuntimeError(f"the subscriber wrote {w}x{h}, not {SIZE}")
                    frame_size = 6 + w * h * 3 // 2
                    buffer = bytearray(rest)
                while frame_size is not None and len(buffer) >= frame_size:
                    arrived = time.time()
                    if bytes(buffer[:6]) != b"FRAME\n":
                        raise RuntimeError("Y4M stream out of step (no FRAME marker)")
                    y = np.frombuffer(bytes(buffer[6:6 + WIDTH * HEIGHT]), dtype=np.uint8).reshape(HEIGHT, WIDTH)
                    self.frames.append([decode_counter(y), arrived])
                    del buffer[:frame_size]
        except Exception as e:   # handed to the driver: the latency run fails
            self.error = repr(e)

    def close(self):
        self.stopping.set()
        self.thread.join(10)
        os.close(self.fd)
        os.unlink(self.path)
        if self.error:
            raise RuntimeError(f"reading the subscriber's Y4M: {self.error}")


def camagent_latency(block):
    net = block.net
    fifo = Y4MFifo(os.path.join(block.workdir, f"latency-{block.codec}.y4m"))
    argv = [BIN, "subscribe", "--session", block.url, "--token", block.token, "--first", "--no-audio",
            "--video-out", fifo.path, "--json", "--duration", str(LATENCY + LATENCY_SETTLE + 60)]
    watched = Watched(net.start(argv, f"camagent-latency-{block.codec}", block.workdir), camagent_frames)
    try:
        watched.wait_connected()
        time.sleep(LATENCY_SETTLE)
        first = len(fifo.frames)
        publisher = block.publisher_video()
        time.sleep(LATENCY)
        last = len(fifo.frames)
        publisher = difference(publisher, block.publisher_video())
        load = os.getloadavg()[0]
        block.alive()
    except BaseException:
        net.stop(watched.proc)
        fifo.close()
        raise
    summary = stop_subscriber(net, watched)
    fifo.close()
    frames = fifo.frames[first:last]
    timed = [(c, a) for c, a in frames if c is not None]
    if len(timed) < 0.5 * FPS * LATENCY:
        raise RuntimeError(f"camagent latency: {len(timed)} frames timed in {LATENCY} s "
                           f"({len(frames) - len(timed)} without a readable counter)")
    return {"timed": timed, "unreadable": len(frames) - len(timed), "receive": (summary or {}).get("video"),
            "publisherInWindow": publisher, "load": round(load, 2)}


def aiortc_latency(block):
    path = os.path.join(block.workdir, f"aiortc-latency-{block.codec}.json")
    argv = [PY, os.path.join(HERE, "subscriber_aiortc.py"), "--whep", block.whep, "--token", block.token,
            "--duration", str(LATENCY + LATENCY_SETTLE), "--counters", path]
    publisher = block.publisher_video()
    done = block.net.run(argv, timeout=LATENCY + LATENCY_SETTLE + 60)
    publisher = difference(publisher, block.publisher_video())
    load = os.getloadavg()[0]
    if done.returncode != 0:
        raise RuntimeError(f"aiortc latency subscriber exited {done.returncode}:\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-2000:]}")
    with open(path) as f:
        frames = json.load(f)["frames"]
    begin = frames[0][1] + LATENCY_SETTLE if frames else 0
    timed = [(c, a) for c, a, _ in frames if c is not None and a >= begin]
    if len(timed) < 0.5 * FPS * LATENCY:
        raise RuntimeError(f"aiortc latency: {len(timed)} frames timed")
    return {"timed": timed, "publisherInWindow": publisher, "load": round(load, 2)}


def measure_codec(net, workdir, codec, results):
    bench.log(f"{codec}: router, session, publisher")
    block = Block(net, workdir, codec)
    try:
        bench.log(f"{codec}: stream {block.stream['streamId']}, publisher pid {block.publisher.pid}")
        time.sleep(2)
        do_latency = len(SUBSCRIBERS) == 3 and LATENCY > 0
        for i in range(REPEATS):
            for name in (SUBSCRIBERS if i % 2 == 0 else SUBSCRIBERS[::-1]):
                results["runs"].append(cpu_run(block, name, i + 1))
        if do_latency:
            clock = PatternClock(block)
            try:
                bench.log(f"{codec}: latency, camagent → router → camagent ({LATENCY:.0f} s)")
                camagent = camagent_latency(block)
                bench.log(f"{codec}: latency, camagent → router → aiortc ({LATENCY:.0f} s)")
                aiortc = aiortc_latency(block)
            except BaseException:
                block.net.stop(clock.watched.proc)
                raise
            # Frames are put on the publisher's clock once all are in.
            camagent_timed, aiortc_timed = camagent.pop("timed"), aiortc.pop("timed")
            entry = {"clock": clock.stop()}
            entry["camagent"] = dict(latency_from(camagent_timed, clock), **camagent)
            entry["aiortc"] = dict(latency_from(aiortc_timed, clock), **aiortc)
            results["latency"][codec] = entry
            c, r = entry["camagent"]["fromCapture"], entry["aiortc"]["fromCapture"]
            bench.log(f"{codec}: from capture, camagent p50 {c['p50']:.1f} / p99 {c['p99']:.1f} ms, "
                      f"aiortc p50 {r['p50']:.1f} / p99 {r['p99']:.1f} ms")
    finally:
        block.stop()


def measure_all(out_path):
    net = make_namespace()
    workdir = tempfile.mkdtemp(prefix="camagent-bench-subscriber-")
    results = {"machine": bench.machine(), "size": SIZE, "fps": FPS, "bitrate_kbps": BITRATE, "window_s": WINDOW,
               "settle_s": SETTLE, "repeats": REPEATS, "latency_s": LATENCY, "gstreamer": gstreamer_version(),
               "aiortc": aiortc_version(), "loadBefore": [round(x, 2) for x in os.getloadavg()],
               "runs": [], "latency": {}}
    started = time.monotonic()
    try:
        for codec in CODECS:
            measure_codec(net, workdir, codec, results)
    finally:
        net.cleanup()
    results["rows"] = [combine([r for r in results["runs"] if (r["codec"], r["subscriber"]) == key])
                       for key in dict.fromkeys((r["codec"], r["subscriber"]) for r in results["runs"])]
    results["loadAfter"] = [round(x, 2) for x in os.getloadavg()]
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(report(results))


def combine(runs):
    cpu, frames, seconds = (sum(r[k] for r in runs) for k in ("cpuSeconds", "frames", "seconds"))
    return {"subscriber": runs[0]["subscriber"], "codec": runs[0]["codec"], "runs": len(runs), "cpuSeconds": cpu,
            "frames": frames, "seconds": seconds, "msPerFrame": cpu * 1000 / frames,
            "msPerFrameRuns": [r["msPerFrame"] for r in runs], "cores": cpu / seconds, "fps": frames / seconds,
            "rssMiB": max(r["rssMiB"] for r in runs), "peakRssMiB": max(r["peakRssMiB"] for r in runs),
            "publisherCores": sum(r["publisherCores"] * r["seconds"] for r in runs) / seconds,
            "routerCores": sum(r["routerCores"] * r["seconds"] for r in runs) / seconds,
            "load": [r["load"] for r in runs]}


def gstreamer_version():
    done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "gstreamer1.0-plugins-bad"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None


def aiortc_version():
    done = subprocess.run([PY, "-c", "import aiortc, av; print(aiortc.__version__, av.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None


CODEC_NAMES = {"vp8": "VP8", "h264": "H.264"}


def report(results):
    rows = {(r["codec"], r["subscriber"]): r for r in results["rows"]}
    lines = [f"Decoding one {results['size']} @ {results['fps']} fps stream (`camagent publish` test pattern, "
             f"{results['bitrate_kbps']} kbit/s ceiling, video only) received through `camagent router`, one "
             f"subscriber at a time. CPU (user+sys, all threads) over a {results['window_s']:.0f} s window per "
             "frame decoded in it; RSS at the window's end, peak RSS (VmHWM) over the run.",
             "",
             "| codec | subscriber | ms / frame | each run | camagent / this | decoded fps | cores | "
             "RSS MiB | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for codec in dict.fromkeys(r["codec"] for r in results["rows"]):
        mine = rows.get((codec, "camagent"))
        for name in ("camagent", "GStreamer", "aiortc"):
            r = rows.get((codec, name))
            if r is None:
                continue
            ratio = mine["msPerFrame"] / r["msPerFrame"] if mine and name != "camagent" else None
            each = ", ".join(fmt(v) for v in r["msPerFrameRuns"])
            lines.append(f"| {CODEC_NAMES.get(codec, codec)} | {name} | {fmt(r['msPerFrame'])} | {each} | "
                         f"{'**' + fmt(ratio) + '**' if ratio else ''} | {fmt(r['fps'], 1)} | {fmt(r['cores'], 3)} | "
                         f"{fmt(r['rssMiB'], 0)} | {fmt(r['peakRssMiB'], 0)} |")
        gst = rows.get((codec, "GStreamer"))
        if mine and gst:
            ratio = mine["msPerFrame"] / gst["msPerFrame"]
            verdicts.append(f"- {CODEC_NAMES.get(codec, codec)}: camagent / GStreamer CPU per frame **{ratio:.2f}**: "
                            f"{'met' if ratio <= TARGET_RATIO else 'NOT met'} (target ≤ {TARGET_RATIO})")
    latency = results.get("latency") or {}
    if latency:
        lines += ["", "Glass to glass through the router, ms: from the frame's capture (the publisher's own time "
                  "of it, through its sender reports) and from its place in the test pattern's schedule (start + "
                  "N/30 s), to the decoded frame leaving the subscriber (camagent: its last byte read from the Y4M "
                  "FIFO; aiortc: off the track)", "",
                  "| codec | path | p50 | p90 | p99 | max | from schedule p50 / p99 / max | frames | max counter gap | "
                  "publisher frames dropped | load |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for codec, entry in latency.items():
            for name, label in (("camagent", "camagent → router → camagent"), ("aiortc", "camagent → router → aiortc")):
                r = entry[name]
                c, sched = r["fromCapture"], r["fromSchedule"]
                dropped = (r.get("publisherInWindow") or {}).get("framesDropped")
                lines.append(f"| {CODEC_NAMES.get(codec, codec)} | {label} | {fmt(c['p50'], 1)} | {fmt(c['p90'], 1)} | "
                             f"{fmt(c['p99'], 1)} | {fmt(c['max'], 1)} | {fmt(sched['p50'], 1)} / {fmt(sched['p99'], 1)} / "
                             f"{fmt(sched['max'], 1)} | {r['frames']} | {r['maxCounterGap']} | "
                             f"{dropped if dropped is not None else '–'} | {r.get('load', '–')} |")
            direct = entry["clock"]["directAiortcMs"]
            lines.append(f"| {CODEC_NAMES.get(codec, codec)} | camagent → aiortc, no router (the clock's viewer) | "
                         f"{fmt(direct['p50'], 1)} | {fmt(direct['p90'], 1)} | {fmt(direct['p99'], 1)} | "
                         f"{fmt(direct['max'], 1)} | | {direct['frames']} | | | |")
            c, sched = entry["camagent"]["fromCapture"], entry["camagent"]["fromSchedule"]
            verdicts.append(f"- {CODEC_NAMES.get(codec, codec)}: glass to glass camagent → router → camagent p99 "
                            f"**{c['p99']:.0f} ms** from capture (p50 {c['p50']:.0f}; from the schedule p99 "
                            f"{sched['p99']:.0f}): {'met' if c['p99'] < TARGET_LATENCY_MS else 'NOT met'} "
                            f"(target < {TARGET_LATENCY_MS} ms)")
        clocks = [f"{CODEC_NAMES.get(codec, codec)}: {e['clock']['frames']} frames, drawn "
                  f"{fmt(e['clock']['drawDelayMs']['p50'], 1)} ms (p50) / {fmt(e['clock']['drawDelayMs']['p99'], 1)} ms "
                  f"(p99) after their scheduled time, the schedule's start "
                  f"{fmt(e['clock']['afterThreadStartTickMs'], 1)} ms after the pattern thread's start tick in /proc"
                  for codec, e in latency.items()]
        lines += ["", "Pattern clock: " + "; ".join(clocks) + "."]
    lines += ["", "Targets (issue 14):", *verdicts]
    receive = [r for r in results["runs"] if r["subscriber"] == "camagent" and r.get("receive")]
    for codec, entry in latency.items():
        if entry["camagent"].get("receive"):
            receive.append({"codec": codec, "run": "latency", "receive": entry["camagent"]["receive"]})
    if receive:
        lines += ["", "camagent subscribe's receive path in each run (connect to stop):", "",
                  "| codec | run | frames decoded | keyframes | dropped | decode errors | packets | lost | NACK | "
                  "retransmissions | PLI | jitter ms |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in receive:
            v = r["receive"]
            lines.append(f"| {CODEC_NAMES.get(r['codec'], r['codec'])} | {r['run']} | {v['framesDecoded']} | "
                         f"{v['keyframesDecoded']} | {v['framesDropped']} | {v['decodeErrors']} | "
                         f"{v['packetsReceived']} | {v['packetsLost']} | {v['nacksSent']} | "
                         f"{v['retransmissionsReceived']} | {v['keyframeRequestsSent']} | "
                         f"{v['jitterSeconds'] * 1000:.1f} |")
    context = []
    for codec in dict.fromkeys(r["codec"] for r in results["rows"]):
        runs = [r for r in results["runs"] if r["codec"] == codec]
        kbps = [r["publisherVideoKbps"] for r in runs if r.get("publisherVideoKbps") is not None]
        context.append(f"{CODEC_NAMES.get(codec, codec)}: publisher video {fmt(statistics.median(kbps), 0) if kbps else '–'} "
                       f"kbit/s, publisher {fmt(statistics.median(r['publisherCores'] for r in runs), 2)} cores, "
                       f"router {fmt(statistics.median(r['routerCores'] for r in runs), 3)} cores")
    load = [r["load"] for r in results["runs"]]
    lines += ["", f"In the windows (medians): {'; '.join(context)}. 1-minute load at each window's end, in run order: "
              f"{', '.join(fmt(x) for x in load)} (before the run {results['loadBefore'][0]}, after "
              f"{results.get('loadAfter', ['?'])[0]}; {results['machine'].get('cores', '?')} CPUs). "
              f"GStreamer {results.get('gstreamer')}, aiortc and PyAV {results.get('aiortc')}. "
              f"The run took {results.get('minutes')} min."]
    return "\n".join(lines)


def main():
    bench.command_line(__doc__, measure_all, report)


if __name__ == "__main__":
    main()
