"""Helpers and fixtures for the publish tests: a network namespace per test and the peers in it.

Each test gets its own network namespace (`ip netns add camagent-test-<pid>-<n>`)
with loopback up and a veth pair whose end cam0 has 10.77.0.1/24. aioice
(aiortc's ICE) gathers no candidate on 127.0.0.1, and Janus is told to use
cam0 only, so every peer meets on 10.77.0.1 and nothing leaves the namespace.
The receiver, Janus, the bridge and the publisher all run inside it through
`ip netns exec`; the namespace and every process in it are removed afterwards,
whatever the outcome. Where a namespace cannot be made (not root, no
iproute2), the test fails and says why: test traffic never goes to the host's
own interfaces (that would be a real LAN address). A test that needs a faulty
network between two sides (loss, delay, a blackhole) takes the `fault_link`
fixture of fault_link.py instead: two namespaces, each side a Net as here.

Every wait has a timeout; no assertion is about time.
"""
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "Tests", "Device"))
from pipe_lines import PipeLines  # noqa: E402

BIN = os.environ.get("CAMAGENT_BIN", os.path.join(ROOT, ".build", "release", "camagent"))
PY = sys.executable

# Exit codes of `camagent publish` (and of aiortc_publisher.py, which copies them).
EXIT_OK = 0
EXIT_USAGE = 64
EXIT_UNREACHABLE = 80
EXIT_UNAUTHORIZED = 81
EXIT_REFUSED = 82
EXIT_CONNECTION = 83

NS_ADDR = "10.77.0.1"
NS_PREFIX = 24
NS_IFACE = "cam0"

_counter = itertools.count()


def _run(args, timeout=20, check=True):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def host_address():
    """The host's first non-loopback IPv4 address. Not used by the tests (they run only in a
    namespace); Benchmarks/publish.py imports it."""
    out = _run(["ip", "-4", "-o", "addr", "show", "scope", "global"], check=False).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            return fields[fields.index("inet") + 1].split("/")[0]
    return "127.0.0.1"


class NamespaceUnavailable(RuntimeError):
    """No network namespace for the test: it fails rather than use the host's network."""


class Net:
    """Where the peers run: a network namespace of the test's own."""

    def __init__(self, name, addr, iface):
        self.name = name
        self.addr = addr
        self.iface = iface
        self.procs = []

    def prefix(self):
        return ["ip", "netns", "exec", self.name] if self.name else []

    def run(self, args, timeout, **kw):
        """Runs a command inside; returns CompletedProcess (text)."""
        return subprocess.run(self.prefix() + list(args), capture_output=True, text=True,
                              timeout=timeout, **kw)

    def start(self, args, name, logdir, **kw):
        """Starts a long-running process inside; stdout is a pipe, stderr goes to a log file."""
        err = open(os.path.join(logdir, f"{name}.log"), "w")
        proc = subprocess.Popen(self.prefix() + list(args), stdout=subprocess.PIPE, stderr=err,
                                text=True, start_new_session=True, **kw)
        proc.log_path = err.name
        proc.label = name
        self.procs.append(proc)
        return proc

    def stop(self, proc, timeout=20):
        """SIGTERM, then SIGKILL if it does not end in time; returns the exit code."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        return proc.returncode

    def cleanup(self):
        for proc in self.procs:
            self.stop(proc, timeout=10)
        if self.name:
            # Anything still inside (a child that escaped its group) was started by this test.
            pids = _run(["ip", "netns", "pids", self.name], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _run(["ip", "netns", "del", self.name], check=False)


def make_namespace():
    """A fresh namespace with cam0 up at 10.77.0.1; raises NamespaceUnavailable if it cannot be made."""
    if not shutil.which("ip"):
        raise NamespaceUnavailable("publish tests need `ip` (iproute2; scripts/install --test installs it) "
                                   "to run each test in a network namespace; not using the host's network")
    name = f"camagent-test-{os.getpid()}-{next(_counter)}"
    try:
        _run(["ip", "netns", "add", name])
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        raise NamespaceUnavailable(f"`ip netns add {name}` failed ({e}); publish tests need root and network "
                                   "namespaces, and do not fall back to the host's network") from e
    net = Net(name, NS_ADDR, NS_IFACE)
    try:
        _run(["ip", "-n", name, "link", "set", "lo", "up"])
        _run(["ip", "-n", name, "link", "add", NS_IFACE, "type", "veth", "peer", "name", "cam1"])
        _run(["ip", "-n", name, "addr", "add", f"{NS_ADDR}/{NS_PREFIX}", "dev", NS_IFACE])
        _run(["ip", "-n", name, "link", "set", NS_IFACE, "up"])
        _run(["ip", "-n", name, "link", "set", "cam1", "up"])
        # IPv6 off: only the IPv4 address is a candidate, for every peer.
        _run(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
    except Exception:
        net.cleanup()
        raise
    return net


@pytest.fixture
def net():
    """A fresh network namespace for one test; the test fails if none can be made."""
    made = make_namespace()
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="camagent-publish-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


# A background process's stdout is read here from its descriptor, with the lines split
# here. Not with proc.stdout.readline(): that reads whatever the pipe holds, so a second
# line printed with the first waits in Python's buffer, where select() cannot see it,
# and a test waiting for it times out though the process printed it. Whatever these
# readers took and did not hand out stays in the process's PipeLines
# (Tests/Device/pipe_lines.py): read the rest with rest_of_output(), never with
# proc.stdout.read() or communicate().

def _stdout_lines(proc):
    """The process's stdout, read from its descriptor and split into lines (PipeLines)."""
    if not hasattr(proc, "_stdout_lines"):
        proc._stdout_lines = PipeLines(proc.stdout)
    return proc._stdout_lines


def next_line(proc, deadline):
    """The next line the process printed (a last unterminated one included), or None when
    none comes before `deadline` (time.monotonic()) or nothing more will come."""
    return _stdout_lines(proc).next(deadline, proc)


def read_line(proc, timeout):
    """The first stdout line of a process, or an error with its log if none comes in time."""
    line = next_line(proc, time.monotonic() + timeout)
    if not line:
        proc_log = open(proc.log_path).read()[-3000:] if os.path.exists(proc.log_path) else ""
        raise AssertionError(f"{proc.label} printed nothing (exit {proc.poll()}):\n{proc_log}")
    return line.strip()


def output_lines(proc, timeout, seen):
    """Yields a background process's stdout lines as they come, for at most `timeout`
    seconds, appending each to `seen`; ends early at end of file or when the process exits."""
    deadline = time.monotonic() + timeout
    while (line := next_line(proc, deadline)) is not None:
        seen.append(line)
        yield line


def rest_of_output(proc, timeout):
    """Everything the process prints from here to its end (after what read_line and
    output_lines took), once it has exited: communicate(), for a process those read.
    subprocess.TimeoutExpired if it has not ended within `timeout` seconds."""
    return _stdout_lines(proc).rest(proc, timeout)


def drain(proc):
    """Reads a background process's stdout in a thread (kept in proc.output), so a chatty
    process never blocks on a full pipe; returns proc."""
    proc.output = []

    def read():
        # Through next_line: lines an earlier output_lines read and did not hand out come first.
        while True:
            line = next_line(proc, time.monotonic() + 3600)
            if line is not None:
                proc.output.append(line)
            elif proc.poll() is not None:
                return
            else:
                time.sleep(0.1)   # its stdout ended, the process not yet
    proc.reader = threading.Thread(target=read, daemon=True)
    proc.reader.start()
    return proc


def drained_lines(proc, start, timeout):
    """Yields (index, line) from a drained process's proc.output, from index `start`, as
    the reader thread adds them, for at most `timeout` seconds; ends sooner once the
    process has exited and its reader has read everything."""
    deadline = time.monotonic() + timeout
    index = start
    while True:
        while index < len(proc.output):
            yield index, proc.output[index]
            index += 1
        if time.monotonic() >= deadline:
            return
        if not proc.reader.is_alive():
            if index >= len(proc.output):
                return
            continue
        time.sleep(0.05)


def finish_drained(proc, timeout):
    """Waits for a drained process to end and its reader to read the last of it; the
    whole of its output. subprocess.TimeoutExpired if it has not ended in `timeout` s."""
    proc.wait(timeout=timeout)
    proc.reader.join(timeout=30)
    assert not proc.reader.is_alive(), f"{proc.label} exited but its stdout did not end in 30 s"
    return "".join(proc.output)


class Receiver:
    """whip_receiver.py running inside the test's network."""

    def __init__(self, net, workdir, *flags, token=None):
        self.net = net
        self.summary_path = os.path.join(workdir, f"receiver-{next(_counter)}.json")
        args = [PY, os.path.join(HERE, "whip_receiver.py"), "--host", "0.0.0.0", "--port", "0",
                "--summary", self.summary_path, "-v"]
        if token:
            args += ["--token", token]
        args += list(flags)
        self.proc = net.start(args, "whip-receiver", workdir)
        self.port = int(read_line(self.proc, 30))
        self.url = f"http://{net.addr}:{self.port}/whip"
        self._summary = None

    def stop(self):
        """Stops the receiver and returns its summary (written on SIGTERM). A frame the
        receiver could not analyse (a session's "error") fails the test here."""
        if self._summary is None:
            self.net.stop(self.proc)
            with open(self.summary_path) as f:
                self._summary = json.load(f)
        errors = [(s["id"], s["error"]) for s in self._summary["sessions"] if s.get("error")]
        assert not errors, f"whip_receiver.py failed to analyse what it received: {errors}\n{self.log()}"
        return self._summary

    def log(self):
        return open(self.proc.log_path).read()[-4000:]


@pytest.fixture
def receiver_factory(net, workdir):
    made = []

    def make(*flags, token=None):
        r = Receiver(net, workdir, *flags, token=token)
        made.append(r)
        return r
    yield make
    for r in made:
        net.stop(r.proc)


def json_lines(stdout):
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return events


def states(events):
    return [e.get("state") for e in events if e.get("event") == "state"]


def describe(proc, extra=""):
    return (f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n"
            f"{proc.stderr[-3000:]}\n{extra}")


@pytest.fixture(scope="session")
def pattern_y4m():
    """Ten seconds of the camagent test pattern at 640x480 and 30 fps, counters drawn in
    (aiortc_publisher.py plays it once: no test publishes it for longer)."""
    d = tempfile.mkdtemp(prefix="camagent-pattern-")
    path = os.path.join(d, "pattern.y4m")
    proc = subprocess.run([BIN, "capture", "--device", "test-pattern", "--size", "640x480",
                           "--fps", "30", "--frames", "300", "--output", path],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, describe(proc)
    yield path
    shutil.rmtree(d, ignore_errors=True)


def aiortc_publish(net, url, y4m, *, codec="vp8", token=None, duration=4, tone=1000, timeout=90):
    """Runs aiortc_publisher.py inside the test's network; returns CompletedProcess."""
    args = [PY, os.path.join(HERE, "aiortc_publisher.py"), "--video", y4m, "--whip", url,
            "--codec", codec, "--duration", str(duration), "--json"]
    if tone:
        args += ["--tone", str(tone)]
    if token:
        args += ["--token", token]
    return net.run(args, timeout=timeout)


def camagent_publish_args(url, *, codec="vp8", token=None, duration=5, audio="test-tone", extra=()):
    """`camagent publish` of the test pattern to a WHIP URL, as the tests run it."""
    args = [BIN, "publish", "--device", "test-pattern", "--audio", audio, "--whip", url,
            "--codec", codec, "--size", "640x480", "--fps", "30", "--bitrate", "800",
            "--duration", str(duration), "--json"]
    if token:
        args += ["--token", token]
    return args + list(extra)


def camagent_publish(net, url, *, codec="vp8", token=None, duration=5, audio="test-tone",
                     extra=(), timeout=None):
    """Runs `camagent publish` inside the test's network; returns CompletedProcess."""
    args = camagent_publish_args(url, codec=codec, token=token, duration=duration, audio=audio, extra=extra)
    return net.run(args, timeout=timeout if timeout is not None else duration + 60)


# -- what a good stream looks like -------------------------------------------------

# Frames decoded, as a share of duration x fps (loose: the machine is shared and slow).
MIN_FRAME_SHARE = 0.4
# Counter steps: the largest jump allowed between consecutive decoded frames, and the
# share of the counter span that may be missing (frames dropped by encoder or network).
MAX_COUNTER_GAP = 10
MAX_MISSING_SHARE = 0.10
# Share of decoded frames whose barcode must read (a decoded frame is a clean frame).
MIN_READ_SHARE = 0.9
TONE_HZ = 1000.0
TONE_TOLERANCE_HZ = 15.0


def check_video(track, *, duration, fps=30, size="640x480", codec=None):
    """Asserts a decoded video track looks like the test pattern, sent without gaps."""
    assert track["frames"] >= MIN_FRAME_SHARE * duration * fps, track_brief(track)
    assert set(track["sizes"]) == {size}, track["sizes"]
    if codec:
        assert track["codec"] == codec, (track["codec"], track["codecs"])
    assert track["countersRead"] >= MIN_READ_SHARE * track["frames"], track_brief(track)
    assert track["backwards"] == 0 and track["repeats"] == 0, track_brief(track)
    assert track["maxGap"] <= MAX_COUNTER_GAP, track_brief(track)
    span = track["lastCounter"] - track["firstCounter"]
    assert span > 0, track_brief(track)
    assert track["missing"] <= MAX_MISSING_SHARE * span, track_brief(track)


def check_audio(track, *, duration):
    """Asserts a decoded audio track is the 1 kHz test tone at 48 kHz."""
    assert track["frames"] >= MIN_FRAME_SHARE * duration * 50, track_brief(track)
    assert track["codec"] == "opus", track["codecs"]
    assert track["sampleRate"] == 48000, track["sampleRate"]
    assert track["dominantFrequency"] is not None, track_brief(track)
    assert abs(track["dominantFrequency"] - TONE_HZ) <= TONE_TOLERANCE_HZ, track_brief(track)
    assert track["rms"] > 0.01, track_brief(track)


def track_brief(track):
    t = dict(track)
    if "counters" in t:
        c = t["counters"]
        t["counters"] = c[:10] + ["..."] + c[-10:] if len(c) > 20 else c
    return json.dumps(t)


def total_frames(summary, kind):
    return sum(t["frames"] for s in summary["sessions"] for t in s[kind])


# -- Janus ------------------------------------------------------------------------

class JanusRoom:
    """Janus (VideoRoom, HTTP API) and the WHIP bridge in front of it, in the test's network."""

    ROOM = 1234

    def __init__(self, net, workdir, ice_lite=False):
        from janus_whip_bridge import write_config
        self.net = net
        self.workdir = workdir
        self.http_port = 8088   # the namespace is the test's own: the port is free
        conf = os.path.join(workdir, "janus")
        write_config(conf, ice_address=net.addr, http_port=self.http_port, room=self.ROOM, ice_lite=ice_lite)
        self.api = f"http://{net.addr}:{self.http_port}/janus"
        self.janus = self._start_janus(conf)
        self.bridge_summary_path = os.path.join(workdir, "bridge.json")
        self.bridge = net.start([PY, os.path.join(HERE, "janus_whip_bridge.py"), "--janus", self.api,
                                 "--room", str(self.ROOM), "--port", "0", "-v",
                                 "--summary", self.bridge_summary_path], "janus-bridge", workdir)
        self.bridge_port = int(read_line(self.bridge, 30))
        self.url = f"http://{net.addr}:{self.bridge_port}/whip"

    def _start_janus(self, conf):
        proc = self.net.start(["janus", "-F", conf, "-o", "-d", "4", "-N",
                               "-L", os.path.join(self.workdir, "janus-file.log")], "janus", self.workdir)
        # Ready when its HTTP API answers "info".
        probe = ("import json, sys, time, urllib.request\n"
                 "for _ in range(100):\n"
                 "    try:\n"
                 "        r = urllib.request.urlopen(sys.argv[1] + '/info', timeout=2)\n"
                 "        print(json.load(r)['janus']); sys.exit(0)\n"
                 "    except Exception:\n"
                 "        time.sleep(0.2)\n"
                 "sys.exit(1)\n")
        ready = self.net.run([PY, "-c", probe, self.api], timeout=60)
        if ready.returncode != 0:
            raise AssertionError(f"Janus did not come up (exit {proc.poll()}):\n" + self.log())
        return proc

    def subscribe(self, duration, wait=30, extra=()):
        """Starts the aiortc subscriber; returns (process, summary path). It waits for a publisher."""
        path = os.path.join(self.workdir, f"subscriber-{next(_counter)}.json")
        proc = self.net.start([PY, os.path.join(HERE, "janus_subscriber.py"), "--janus", self.api,
                               "--room", str(self.ROOM), "--duration", str(duration), "--wait", str(wait),
                               "--summary", path, "-v", *extra], "janus-subscriber", self.workdir)
        return proc, path

    def watch(self, publish, *, watch):
        """A subscriber watches for `watch` seconds while publish() runs a publisher
        (returning its CompletedProcess); checks what any path through Janus must
        show and returns (subscriber summary, bridge summary)."""
        sub, sub_path = self.subscribe(duration=watch)
        proc = publish()
        if proc.returncode != EXIT_OK:
            self.net.stop(sub)  # it would wait for a publisher that never comes
            raise AssertionError(describe(proc, self.log()))
        summary = subscriber_result(sub, sub_path, timeout=60)
        bridge = self.stop_bridge()
        assert summary["error"] is None and summary["exit"] == 0, (summary["error"], summary["exit"],
                                                                   summary.get("janusEvents"))
        assert [r["deleted"] for r in bridge["resources"]] == [True], bridge["requests"]
        return summary, bridge

    def stop_bridge(self):
        self.net.stop(self.bridge)
        with open(self.bridge_summary_path) as f:
            return json.load(f)

    def log(self):
        path = os.path.join(self.workdir, "janus-file.log")
        return open(path).read()[-4000:] if os.path.exists(path) else ""


def subscriber_result(proc, path, timeout):
    """Waits for the subscriber and returns its summary (its exit code as "exit")."""
    proc.wait(timeout=timeout)
    with open(path) as f:
        summary = json.load(f)
    summary["exit"] = proc.returncode
    return summary


def _janus(net, workdir, ice_lite):
    if not shutil.which("janus"):
        raise AssertionError("janus is not installed (scripts/install --test installs it)")
    room = JanusRoom(net, workdir, ice_lite=ice_lite)
    room.ice_lite = ice_lite
    try:
        yield room
    finally:
        for proc in (room.bridge, room.janus):
            net.stop(proc)


@pytest.fixture
def janus_room(net, workdir):
    """Janus (full ICE) behind the WHIP bridge."""
    yield from _janus(net, workdir, ice_lite=False)


@pytest.fixture(params=[False, True], ids=["full-ice", "ice-lite"])
def janus_any_ice(net, workdir, request):
    """Janus behind the WHIP bridge, once as a full ICE agent and once ICE-lite."""
    yield from _janus(net, workdir, ice_lite=request.param)
