#!/usr/bin/env python3
"""Forwarding cost: camagent router against Janus's VideoRoom, the same publisher, the same subscribers.

  router.py OUT.json          measure (run by `Benchmarks/run router`), print the table
  router.py report OUT.json   the table again from OUT.json

One 1280x720 30 fps VP8 stream (`camagent publish --device test-pattern
--bitrate 1500 --audio test-tone`) goes to 1, 10 and 50 subscribers, through
each server in turn, inside a network namespace of the run's own
(publish_support.make_namespace):

  camagent router   the publisher sends over WHIP into a routed session
                    (`publish --session`); subscribers over WHEP
  Janus VideoRoom   the same publisher (`publish --whip`) through
                    Tests/Publish/janus_whip_bridge.py; subscribers over Janus's HTTP API

The subscribers are Benchmarks/router_subscribers.py: all N peer connections in
one aiortc process that counts RTP and decodes nothing (the same code for both
servers). Once every subscriber is connected and SETTLE seconds have passed, a
WINDOW-second window is measured: the server's CPU time (the kernel's CPU-time
clock of the router's, resp. janus's, process, in ns: every thread; the bridge
only signals and is not counted), the RTP packets the subscribers received in it, hence CPU
per forwarded packet, and the server's VmRSS at the window's end. Beside them:
the subscriber process's and the publisher's CPU (the machine is shared by all
three), the namespace's UDP receive-buffer drops (a subscriber process that
falls behind shows there), the router's own /metrics counters and the load.
Each count runs REPEATS (2) times, router and Janus alternating (router, Janus,
Janus, router) so that a drifting load hits both alike; CPU and packets are
pooled over the windows. A subscriber that fails to connect, drops out, or
receives no video in the window fails the run.

BENCH_ROUTER_SUBSCRIBERS (1,10,50), BENCH_ROUTER_WINDOW (20), BENCH_ROUTER_SETTLE
(10), BENCH_ROUTER_REPEATS (2) and BENCH_ROUTER_ONLY (router or janus) are for
development runs.
"""
import json
import os
import select
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
from publish_support import BIN, PY, JanusRoom, make_namespace  # noqa: E402
from router_support import prometheus_values  # noqa: E402

SIZE, FPS, BITRATE = "1280x720", 30, 1500
COUNTS = [int(n) for n in os.environ.get("BENCH_ROUTER_SUBSCRIBERS", "1,10,50").split(",")]
WINDOW = float(os.environ.get("BENCH_ROUTER_WINDOW", "20"))
# After the last subscriber connects, before the window: the joins' keyframe requests
# (Janus passes each one on, the router merges them) and the keyframes they cause stay out of it.
SETTLE = float(os.environ.get("BENCH_ROUTER_SETTLE", "10"))
SERVERS = [s for s in ("camagent router", "Janus VideoRoom")
           if os.environ.get("BENCH_ROUTER_ONLY", s).lower() in s.lower()]   # e.g. BENCH_ROUTER_ONLY=janus
REPEATS = int(os.environ.get("BENCH_ROUTER_REPEATS", "2"))
PUBLISH_FOR = 900       # seconds; the publisher is stopped (SIGTERM) when its row is done
SUBSCRIBERS = os.path.join(HERE, "router_subscribers.py")
# The targets.
TARGET_RATIO = 0.5      # router CPU per forwarded packet, at most this share of Janus's
TARGET_CORES = 1.0      # router CPU at 50 subscribers: within one core
ROUTER_PORT = 8090


def drain(proc):
    """Keeps reading a process's stdout on a thread (lines in proc.output), so it never
    blocks on a full pipe; returns proc."""
    proc.output = []

    def read():
        for line in proc.stdout:
            proc.output.append(line)
    threading.Thread(target=read, daemon=True).start()
    return proc


def http_get(net, url, token=None, timeout=20):
    """GET from inside the namespace: (status, body text)."""
    code = ("import sys, urllib.request, urllib.error\n"
            "h = {'Authorization': 'Bearer ' + sys.argv[2]} if sys.argv[2] else {}\n"
            "try:\n"
            "    r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], headers=h), timeout=10)\n"
            "    print(r.status); print(r.read().decode())\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code); print(e.read().decode())\n")
    done = net.run([PY, "-c", code, url, token or ""], timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"GET {url} failed: {done.stderr[-1000:]}")
    status, _, body = done.stdout.partition("\n")
    return int(status), body


class RouterServer:
    """`camagent router` in the namespace and the CLI calls around it (sessions, tokens),
    as Tests/Publish/router_support.py runs it; kept here so the benchmark does not move
    with the tests' helpers."""

    def __init__(self, net, workdir):
        self.net = net
        self.secret = os.path.join(workdir, "router.secret")
        self.base = f"http://{net.addr}:{ROUTER_PORT}"
        self.proc = net.start([BIN, "router", "--listen", f"{net.addr}:{ROUTER_PORT}", "--secret-file", self.secret],
                              "router", workdir)
        deadline = time.monotonic() + 60
        seen = []
        while not any("listening" in line for line in seen):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None or not select.select([self.proc.stdout], [], [], left)[0]:
                raise RuntimeError(f"camagent router did not say it is listening (exit {self.proc.poll()}):\n"
                                   + "".join(seen) + open(self.proc.log_path).read()[-3000:])
            seen.append(self.proc.stdout.readline())
        drain(self.proc)

    def camagent(self, *args):
        done = self.net.run([BIN, *args], timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"camagent {' '.join(args)} exited {done.returncode}: {done.stderr[-1000:]}")
        return done.stdout.strip()

    def create_session(self):
        return self.camagent("session", "create", "--router", self.base, "--secret-file", self.secret)

    def token(self, session, role):
        # --session=SID: a session id may begin with "-", which a separate argument cannot.
        return self.camagent("token", "--secret-file", self.secret, f"--session={session}", "--role", role)

    def session_url(self, session):
        return f"{self.base}/v2/sessions/{session}"

    def wait_for_stream(self, session, timeout=60):
        token = self.camagent("token", "--secret-file", self.secret, "--project")
        deadline = time.monotonic() + timeout
        while True:
            status, body = http_get(self.net, f"{self.session_url(session)}/streams", token)
            if status != 200:
                raise RuntimeError(f"GET streams answered {status}: {body[:500]}")
            streams = json.loads(body)
            if streams:
                return streams[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"no stream in session {session} after {timeout} s:\n"
                                   + open(self.proc.log_path).read()[-3000:])
            time.sleep(0.5)

    def metrics(self):
        status, body = http_get(self.net, f"{self.base}/metrics")
        if status != 200:
            raise RuntimeError(f"GET /metrics answered {status}: {body[:500]}")
        return prometheus_values(body)


def cpu_seconds(pid):
    """CPU time of the whole process (all its threads, live and exited), in
    nanoseconds: the kernel's CPU-time clock of another process
    (clock_getcpuclockid(3); its clock id is ~pid << 3 | CPUCLOCK_SCHED).
    /proc/PID/stat gives the same time truncated to clock ticks (10 ms): with
    one subscriber a 20 s window holds 0.15-0.3 s of the router's CPU, which
    that truncation moved by up to 8 %."""
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError as error:
        raise RuntimeError(f"CPU-time clock of pid {pid}: {error}") from error


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def process_name(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def udp_drops(net):
    """The namespace's UDP receive-buffer errors (/proc/net/snmp is per namespace)."""
    done = net.run(["cat", "/proc/net/snmp"], timeout=10)
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        raise RuntimeError(f"no Udp counters in /proc/net/snmp: {done.stdout[-500:]}")
    values = dict(zip(rows[0][1:], (int(v) for v in rows[1][1:])))
    return values.get("RcvbufErrors", 0)


def read_event(proc, kind, timeout):
    """The next JSON line of type `kind` from proc's stdout; a "failed" line, an exit or
    the timeout fail the run with the process's log."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        ready = select.select([proc.stdout], [], [], max(0, min(left, 1)))[0] if left > 0 else []
        if not ready:
            if left <= 0 or proc.poll() is not None:
                raise RuntimeError(f"{proc.label}: no {kind!r} within {timeout} s (exit {proc.poll()}):\n"
                                   + open(proc.log_path).read()[-3000:])
            continue
        line = proc.stdout.readline()
        if not line:
            continue
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event.get("event") == "failed":
            raise RuntimeError(f"{proc.label} failed: {event['error']}\n" + open(proc.log_path).read()[-3000:])
        if event.get("event") == kind:
            return event


def publisher_argv(target):
    return [BIN, "publish", "--device", "test-pattern", "--size", SIZE, "--fps", str(FPS), "--bitrate",
            str(BITRATE), "--audio", "test-tone", "--codec", "vp8", "--duration", str(PUBLISH_FOR), "--json", *target]


def start_router_row(net, workdir, count):
    """camagent router with the publisher in a routed session: (server pid, publisher, subscriber argv, router)."""
    router = RouterServer(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = drain(net.start(publisher_argv(["--session", url, "--token", router.token(session, "publisher")]),
                                "publisher", workdir))
    stream = router.wait_for_stream(session)
    argv = [PY, SUBSCRIBERS, "--count", str(count), "-v", "whep", "--url",
            f"{url}/streams/{stream['streamId']}/subscribe", "--token", router.token(session, "subscriber")]
    return router.proc.pid, publisher, argv, router


def start_janus_row(net, workdir, count):
    """Janus and the bridge with the publisher in the room: (janus pid, publisher, subscriber argv, room)."""
    room = JanusRoom(net, workdir)
    publisher = drain(net.start(publisher_argv(["--whip", room.url]), "publisher", workdir))
    argv = [PY, SUBSCRIBERS, "--count", str(count), "-v", "janus", "--janus", room.api, "--room", str(room.ROOM)]
    return room.janus.pid, publisher, argv, room


def router_counters(router):
    m = router.metrics()
    pick = lambda part: next((v for k, v in m.items() if part in k), None)  # noqa: E731
    return {"forwarded": pick("forwarded_packets_total"), "forwardedBytes": pick("forwarded_bytes_total"),
            "dropped": pick("dropped_packets_total"), "subscribers": pick("camagent_router_subscribers")}


def mark(subs, pid, publisher):
    """The server's and the others' CPU, then the subscribers' counts, as close together as can be."""
    before = time.monotonic()
    cpu = cpu_seconds(pid)
    pub = cpu_seconds(publisher.pid)
    sub_cpu = cpu_seconds(subs.pid)
    subs.stdin.write("mark\n")
    subs.stdin.flush()
    counts = read_event(subs, "mark", timeout=30)
    return {"at": before, "cpu": cpu, "publisherCpu": pub, "subscriberCpu": sub_cpu, "counts": counts}


def stats_lines(publisher):
    """The publisher's stats lines (--json, one a second), oldest first."""
    events = []
    for line in list(publisher.output):
        if line.startswith("{") and '"stats"' in line:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return events


def last_stats(publisher):
    """The publisher's last stats line: what its encoder and congestion control did."""
    events = stats_lines(publisher)
    return events[-1] if events else None


def publisher_video(stats):
    """Video counters from a publisher stats line: frames, keyframes, PLIs, packets, drops."""
    if not stats:
        return None
    rtp = next((r for r in stats.get("rtcStats", []) if r.get("type") == "outbound-rtp" and r.get("kind") == "video"),
               {})
    return {"framesEncoded": stats.get("framesEncoded"), "framesDropped": stats.get("framesDropped"),
            "keyFramesEncoded": rtp.get("keyFramesEncoded"), "pliReceived": rtp.get("pliCount"),
            "firReceived": rtp.get("firCount"), "nackReceived": rtp.get("nackCount"),
            "packetsSent": rtp.get("packetsSent"), "bytesSent": rtp.get("bytesSent")}


def difference(a, b):
    if not a or not b:
        return None
    return {k: b[k] - a[k] for k in a if a[k] is not None and b.get(k) is not None}


def one_row(net, workdir, server, count):
    start = start_router_row if server == "camagent router" else start_janus_row
    pid, publisher, argv, host = start(net, workdir, count)
    bench.log(f"{server}, {count} subscriber(s): server pid {pid} ({process_name(pid)}), connecting")
    subs = net.start(argv, f"subscribers-{count}", workdir, stdin=subprocess.PIPE)
    try:
        connected = read_event(subs, "connected", timeout=60 + 3 * count)
        bench.log(f"{server}: {count} connected in {connected['seconds']} s; settling {SETTLE:.0f} s")
        time.sleep(SETTLE)
        counters_a = router_counters(host) if server == "camagent router" else None
        drops_a = udp_drops(net)
        rss_start = rss_mib(pid)
        a = mark(subs, pid, publisher)
        publisher_a = publisher_video(last_stats(publisher))
        idle = [i for i, s in enumerate(a["counts"]["subscribers"]) if s["video"] == 0]
        if idle:
            raise RuntimeError(f"{server}: subscribers {idle} received no video before the window")
        bench.log(f"{server}: measuring {WINDOW:.0f} s")
        time.sleep(WINDOW)
        b = mark(subs, pid, publisher)
        publisher_b = publisher_video(last_stats(publisher))
        rss = rss_mib(pid)
        drops_b = udp_drops(net)
        counters_b = router_counters(host) if server == "camagent router" else None
        load = os.getloadavg()
        if publisher.poll() is not None:
            raise RuntimeError(f"{server}: the publisher ended during the window (exit {publisher.returncode}):\n"
                               + open(publisher.log_path).read()[-3000:])
    finally:
        if subs.poll() is None:
            try:
                subs.stdin.write("stop\n")
                subs.stdin.flush()
            except BrokenPipeError:
                pass
        net.stop(subs, timeout=30)
        net.stop(publisher)
        if server == "camagent router":
            net.stop(host.proc)
        else:
            net.stop(host.bridge)
            net.stop(host.janus)
    seconds = b["at"] - a["at"]
    per_sub = [{k: sb[k] - sa[k] for k in ("packets", "bytes", "video", "audio")}
               for sa, sb in zip(a["counts"]["subscribers"], b["counts"]["subscribers"])]
    starved = [i for i, s in enumerate(per_sub) if s["video"] == 0]
    if starved:
        raise RuntimeError(f"{server}: subscribers {starved} received no video in the window")
    packets = sum(s["packets"] for s in per_sub)
    cpu = b["cpu"] - a["cpu"]
    row = {"server": server, "subscribers": count, "seconds": seconds, "cpuSeconds": cpu, "cores": cpu / seconds,
           "packets": packets, "videoPackets": sum(s["video"] for s in per_sub),
           "audioPackets": sum(s["audio"] for s in per_sub), "bytes": sum(s["bytes"] for s in per_sub),
           "usPerPacket": cpu * 1e6 / packets if packets else None, "rssMiB": rss,
           "rssGrowthMiB": rss - rss_start,
           "packetsPerSecondPerSubscriber": packets / seconds / count,
           "kbpsPerSubscriber": sum(s["bytes"] for s in per_sub) * 8 / seconds / count / 1000,
           "minPackets": min(s["packets"] for s in per_sub), "maxPackets": max(s["packets"] for s in per_sub),
           "subscriberCores": (b["subscriberCpu"] - a["subscriberCpu"]) / seconds,
           "publisherCores": (b["publisherCpu"] - a["publisherCpu"]) / seconds,
           "udpReceiveBufferDrops": drops_b - drops_a, "connectSeconds": connected["seconds"],
           "framesGivenToNullDecoder": b["counts"]["decoderFrames"] - a["counts"]["decoderFrames"],
           "framesDecodedQueued": b["counts"]["decodedQueued"], "tracksEnded": b["counts"]["tracksEnded"],
           "rtcpByes": sum(s["byes"] for s in b["counts"]["subscribers"]), "load": [round(x, 2) for x in load]}
    # What the publisher did in (about) the window: its stats lines come every few seconds.
    row["publisherInWindow"] = difference(publisher_a, publisher_b)
    row["publisherBeforeWindow"] = publisher_a
    row["publisherStats"] = last_stats(publisher)
    # Its video bitrate, a second at a time, from start to end: shows the encoder's rate
    # control settling after the joins' keyframes.
    row["publisherVideoKbps"] = [round(e["video"]["bitrate"] / 1000) for e in stats_lines(publisher)
                                 if isinstance(e.get("video"), dict) and e["video"].get("bitrate") is not None]
    if counters_a and counters_b:
        row["routerMetrics"] = {k: (counters_b[k] - counters_a[k]) if k != "subscribers" else counters_b[k]
                                for k in counters_a if counters_a[k] is not None and counters_b[k] is not None}
    if row["framesDecodedQueued"]:
        raise RuntimeError(f"{server}: decoded frames were queued ({row['framesDecodedQueued']}): "
                           "the subscribers decoded")
    bench.log(f"{server}, {count}: {row['usPerPacket']:.1f} µs/packet, {row['cores']:.3f} cores, "
              f"{packets / seconds:.0f} packets/s received, RSS {rss:.0f} MiB, subscribers' process "
              f"{row['subscriberCores']:.2f} cores, UDP drops {row['udpReceiveBufferDrops']}, load {row['load'][0]}")
    return row


def measure_all(out_path):
    net = make_namespace()
    workdir = tempfile.mkdtemp(prefix="camagent-bench-router-")
    results = {"machine": bench.machine(), "size": SIZE, "fps": FPS, "bitrate_kbps": BITRATE,
               "window_s": WINDOW, "settle_s": SETTLE, "repeats": REPEATS,
               "loadBefore": [round(x, 2) for x in os.getloadavg()], "janus": janus_version(), "rows": []}
    started = time.monotonic()
    runs = results["runs"] = []
    results["discarded"] = []
    try:
        for count in COUNTS:
            for i in range(REPEATS):
                # router, Janus, Janus, router, ...: a load that drifts during a row hits both alike.
                for server in (SERVERS if i % 2 == 0 else SERVERS[::-1]):
                    bench.log(f"run {i + 1} of {REPEATS}")
                    row = dict(one_row(net, workdir, server, count), run=i + 1)
                    if row["udpReceiveBufferDrops"]:
                        # The subscribers' process fell behind and the kernel dropped what the
                        # server had sent: their counts are short. Kept in the JSON, run once more.
                        bench.log(f"{server}, {count}: {row['udpReceiveBufferDrops']} UDP drops at the "
                                  "subscribers; running it again")
                        results["discarded"].append(row)
                        row = dict(one_row(net, workdir, server, count), run=i + 1)
                    runs.append(row)
    finally:
        net.cleanup()
    results["rows"] = [combine([r for r in runs if (r["server"], r["subscribers"]) == key])
                       for key in dict.fromkeys((r["server"], r["subscribers"]) for r in runs)]
    results["loadAfter"] = [round(x, 2) for x in os.getloadavg()]
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(report(results))


def combine(runs):
    """One row from a server's runs at one count: CPU and packets pooled over the windows,
    so each run weighs by its length; RSS the largest; the runs' own figures kept beside."""
    total = lambda key: sum(r[key] for r in runs)  # noqa: E731
    seconds, cpu, packets = total("seconds"), total("cpuSeconds"), total("packets")
    count = runs[0]["subscribers"]
    publisher = {}
    for r in runs:
        for k, v in (r.get("publisherInWindow") or {}).items():
            publisher[k] = publisher.get(k, 0) + v
    row = {"server": runs[0]["server"], "subscribers": count, "runs": len(runs), "seconds": seconds,
           "cpuSeconds": cpu, "cores": cpu / seconds, "packets": packets, "bytes": total("bytes"),
           "videoPackets": total("videoPackets"), "audioPackets": total("audioPackets"),
           "usPerPacket": cpu * 1e6 / packets, "usPerPacketRuns": [r["usPerPacket"] for r in runs],
           "coresRuns": [r["cores"] for r in runs],
           "rssMiB": max(r["rssMiB"] for r in runs), "rssGrowthMiB": max(r["rssGrowthMiB"] for r in runs),
           "packetsPerSecondPerSubscriber": packets / seconds / count,
           "kbpsPerSubscriber": total("bytes") * 8 / seconds / count / 1000,
           "subscriberCores": sum(r["subscriberCores"] * r["seconds"] for r in runs) / seconds,
           "publisherCores": sum(r["publisherCores"] * r["seconds"] for r in runs) / seconds,
           "udpReceiveBufferDrops": total("udpReceiveBufferDrops"), "publisherInWindow": publisher,
           "tracksEnded": total("tracksEnded"), "rtcpByes": total("rtcpByes"),
           "load": [r["load"][0] for r in runs]}
    if all(r.get("routerMetrics") for r in runs):
        row["routerMetrics"] = {k: sum(r["routerMetrics"].get(k, 0) for r in runs) for k in ("forwarded", "dropped")}
    return row


def janus_version():
    done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "janus"], capture_output=True, text=True)
    return done.stdout.strip() or None


def fmt(value, digits=1):
    """bench.fmt, one digit unless told otherwise (this table's figures)."""
    return bench.fmt(value, digits)


def report(results):
    rows = {(r["server"], r["subscribers"]): r for r in results["rows"]}
    pairs = [(n, rows[("camagent router", n)], rows[("Janus VideoRoom", n)])
             for n in sorted({r["subscribers"] for r in results["rows"]})
             if ("camagent router", n) in rows and ("Janus VideoRoom", n) in rows]
    per_byte = lambda r: r["cpuSeconds"] * 1e9 / r["bytes"] if r["bytes"] else None  # noqa: E731
    lines = [f"Forwarding one {results['size']} @ {results['fps']} fps VP8 stream ({results['bitrate_kbps']} kbit/s "
             f"ceiling, with Opus) from `camagent publish` to N aiortc subscribers that do not decode. Server CPU "
             f"(user+sys, all threads) over a {results['window_s']:.0f} s window, per RTP packet the subscribers "
             "received in it; RSS at the window's end.",
             "",
             "| subscribers | router µs / packet | Janus µs / packet | router / Janus | each run's ratio | "
             "router cores | Janus cores | router RSS MiB | Janus RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for n, r, j in pairs:
        ratio = r["usPerPacket"] / j["usPerPacket"] if r["usPerPacket"] and j["usPerPacket"] else None
        each = ", ".join(fmt(a / b, 2) for a, b in zip(r.get("usPerPacketRuns", [r["usPerPacket"]]),
                                                       j.get("usPerPacketRuns", [j["usPerPacket"]])))
        # A run still short of packets after its repeat (the subscribers' process fell behind
        # again) makes no ratio: its CPU went to packets nobody counted.
        short = [x["server"] for x in (r, j) if x["udpReceiveBufferDrops"]]
        if short:
            lines.append(f"| {n} | {fmt(r['usPerPacket'])} | {fmt(j['usPerPacket'])} | not valid | "
                         f"UDP drops at the subscribers of {' and '.join(short)} | {fmt(r['cores'], 3)} | "
                         f"{fmt(j['cores'], 3)} | {fmt(r['rssMiB'], 0)} | {fmt(j['rssMiB'], 0)} |")
            verdicts.append(f"- {n} subscriber(s): not measured: behind {' and '.join(short)} the "
                            "subscribers' process fell behind even when run again (UDP receive drops)")
            continue
        lines.append(f"| {n} | {fmt(r['usPerPacket'])} | {fmt(j['usPerPacket'])} | **{fmt(ratio, 2)}** | {each} | "
                     f"{fmt(r['cores'], 3)} | {fmt(j['cores'], 3)} | {fmt(r['rssMiB'], 0)} | {fmt(j['rssMiB'], 0)} |")
        if ratio is not None:
            verdicts.append(f"- {n} subscriber(s): router / Janus CPU per packet **{ratio:.2f}**: "
                            f"{'met' if ratio <= TARGET_RATIO else 'NOT met'} (target ≤ {TARGET_RATIO})")
    top = rows.get(("camagent router", 50))
    if top:
        verdicts.append(f"- 50 subscribers within one core: router **{top['cores']:.3f}** cores: "
                        f"{'met' if top['cores'] < TARGET_CORES else 'NOT met'} (target < {TARGET_CORES})")
    lines += ["", "Targets (issue 13):", *verdicts, "",
              "What the subscribers received, and the rest of the machine (router / Janus):", "",
              "| subscribers | packets/s per subscriber | kbit/s per subscriber | bytes / packet | "
              "router / Janus CPU per byte | publisher video kbit/s in window | publisher keyframes in window | "
              "subscribers' process cores | publisher cores | UDP receive drops |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for n, r, j in pairs:
        both = lambda key, digits=0: f"{fmt(r[key], digits)} / {fmt(j[key], digits)}"  # noqa: E731
        size = lambda x: x["bytes"] / x["packets"] if x["packets"] else None  # noqa: E731
        kbps = lambda x: (x["publisherInWindow"] or {}).get("bytesSent", 0) * 8 / x["seconds"] / 1000  # noqa: E731
        keys = lambda x: (x["publisherInWindow"] or {}).get("keyFramesEncoded")  # noqa: E731
        byte_ratio = per_byte(r) / per_byte(j) if per_byte(r) and per_byte(j) else None
        lines.append(f"| {n} | {both('packetsPerSecondPerSubscriber')} | {both('kbpsPerSubscriber')} | "
                     f"{fmt(size(r), 0)} / {fmt(size(j), 0)} | {fmt(byte_ratio, 2)} | "
                     f"{fmt(kbps(r), 0)} / {fmt(kbps(j), 0)} | {keys(r)} / {keys(j)} | "
                     f"{both('subscriberCores', 2)} | {both('publisherCores', 2)} | "
                     f"{r['udpReceiveBufferDrops']} / {j['udpReceiveBufferDrops']} |")
    notes = []
    for r in results["rows"]:
        metrics = r.get("routerMetrics") or {}
        if metrics.get("dropped"):
            notes.append(f"- {r['server']}, {r['subscribers']}: the router counted {metrics['dropped']:.0f} "
                         "packets dropped in the window")
        if r.get("tracksEnded") or r.get("rtcpByes"):
            notes.append(f"- {r['server']}, {r['subscribers']}: {r.get('rtcpByes')} RTCP BYE(s) received, "
                         f"{r.get('tracksEnded')} aiortc track(s) ended (packets still counted)")
        if abs(r.get("rssGrowthMiB", 0)) >= 1:
            notes.append(f"- {r['server']}, {r['subscribers']}: RSS grew {r['rssGrowthMiB']:.1f} MiB in the window")
    for r in results.get("discarded", []):
        notes.append(f"- {r['server']}, {r['subscribers']}, run {r['run']}: repeated, not counted: "
                     f"{r['udpReceiveBufferDrops']} UDP drops at the subscribers (their process, "
                     f"{r['subscriberCores']:.2f} cores, fell behind); it measured {r['usPerPacket']:.1f} µs / packet")
    if notes:
        lines += ["", "Noticed:", *notes]
    load = [r["load"][0] for r in results.get("runs", results["rows"])]
    lines += ["", f"1-minute load at each window's end, in run order: {', '.join(fmt(x, 2) for x in load)} "
              f"(before the run {results['loadBefore'][0]}, after {results.get('loadAfter', ['?'])[0]}; "
              f"{results['machine'].get('cores', '?')} CPUs). {results.get('repeats', 1)} run(s) of each, "
              f"CPU and packets pooled over the runs' windows. Janus {results.get('janus')}. "
              f"The run took {results.get('minutes')} min. No latency row (see BENCHMARKS.md)."]
    return "\n".join(lines)


def main():
    bench.command_line(__doc__, measure_all, report)


if __name__ == "__main__":
    main()
