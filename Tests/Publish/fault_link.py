#!/usr/bin/env python3
"""A faulty network link between two namespaces, made in user space (no netem here).

The machines have no sch_netem, and ICE sends media straight to the addresses in
the candidates, so a UDP port relay would be bypassed. The link is therefore a
layer-3 one: two network namespaces of the test's own, side A (10.78.1.1/24,
for a publisher or client) and side B (10.78.2.1/24, for a server, router or
receiver), each with a TUN device (fa0, fb0) routing the other side's /24. One
proxy process owns both TUN devices: it reads each IP packet that one side
sends and writes it into the other side. TCP and everything else that is not
UDP passes at once, untouched (WHIP and WHEP signalling stay reliable); UDP
goes through per-direction impairments that the test changes while the link
runs: loss, delay, jitter, reordering, duplication, and a blackhole (every UDP
packet dropped) for a while. The proxy counts what it did to the packets, so a
test can check the impairment really happened.

    fault_link.py --a /run/netns/A --b /run/netns/B --control SOCKET [--seed N]

prints one JSON line once both TUN devices exist and the control socket
listens. The control socket (Unix, stream) takes one JSON request per
connection and answers one JSON line:
    {"op": "set", "direction": "both"|"a->b"|"b->a", "loss": %, "delay": ms,
     "jitter": ms, "reorder": %, "reorder_gap": ms, "duplicate": %}
    {"op": "blackhole", "direction": ..., "seconds": S}   (S null: until cleared; 0 clears)
    {"op": "drop-dtls", "direction": ..., "content_type": T, "count": N}
        (the next N datagrams carrying a DTLS record of content type T are dropped:
        20 ChangeCipherSpec, 21 alert, 22 handshake; a lost handshake flight on demand)
    {"op": "clear"}                                     (every impairment off)
    {"op": "stats"}                                     (settings and counters)

Test side: the `fault_link` fixture (FaultLink) makes the namespaces, starts
the proxy, configures addresses and routes, and removes everything afterwards
whatever the outcome. `link.a` and `link.b` are publish_support.Net objects, so
camagent_publish, Receiver and the other helpers run on either side. Where
anything cannot be made, the test fails and says why: it never falls back to
the host's network. Every wait has a timeout.
"""
import argparse
import ctypes
import fcntl
import heapq
import itertools
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from publish_support import PY, Net, NamespaceUnavailable, _run, read_line

# <linux/if_tun.h>, <sched.h>, <sys/prctl.h>
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1

SETTINGS = {"loss": 0.0, "delay": 0.0, "jitter": 0.0, "reorder": 0.0, "reorder_gap": 20.0, "duplicate": 0.0}
PERCENT_SETTINGS = ("loss", "reorder", "duplicate")
COUNTERS = ("packets", "other", "udp", "delivered", "lost", "blackholed", "dtlsDropped", "duplicated", "delayed",
            "reordered", "outOfOrder", "writeErrors")
IPPROTO_UDP = 17
READ_BURST = 64   # packets read from one TUN before the other gets its turn


# -- the proxy process -------------------------------------------------------------

def _setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns(CLONE_NEWNET): {os.strerror(code)}")


def open_tun(netns_path, name, device="/dev/net/tun"):
    """A TUN device made inside the namespace at netns_path: the kernel puts the device
    in the namespace of the thread that opens the clone device, so this thread enters
    it for the open and comes back home."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(netns_path, os.O_RDONLY)
    try:
        _setns(target)
        try:
            fd = os.open(device, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI))
            except OSError:
                os.close(fd)
                raise
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)
    return fd


def dtls_record_types(packet):
    """The content types of the DTLS records in an IPv4 UDP packet (empty when its
    payload is not DTLS: RFC 7983 gives DTLS the first bytes 20 to 63)."""
    fragment_offset = (packet[6] & 0x1F) << 8 | packet[7]
    if fragment_offset:
        return []
    payload = packet[(packet[0] & 0x0F) * 4 + 8:]
    types = []
    i = 0
    while i + 13 <= len(payload) and 20 <= payload[i] <= 63:
        types.append(payload[i])
        i += 13 + (payload[i + 11] << 8 | payload[i + 12])
    return types


def is_udp(packet):
    """IPv4 UDP (every fragment of a UDP datagram too). The namespaces have IPv6 off;
    anything else passes unimpaired."""
    return len(packet) >= 20 and packet[0] >> 4 == 4 and packet[9] == IPPROTO_UDP


class Direction:
    """One way through the link: its settings, its blackhole and its counters."""

    def __init__(self, name, source, sink):
        self.name = name
        self.source = source
        self.sink = sink
        self.settings = dict(SETTINGS)
        self.blackhole_until = None   # monotonic seconds; inf until cleared
        self.dtls_drops = {}          # DTLS content type: datagrams carrying one still to drop
        self.counts = {k: 0 for k in COUNTERS}
        self.arrivals = itertools.count()   # UDP arrival order, for counting reordering
        self.released = -1                  # highest arrival number delivered so far

    def blackholed(self, now):
        return self.blackhole_until is not None and now < self.blackhole_until

    def state(self, now):
        left = None
        if self.blackholed(now):
            left = None if self.blackhole_until == float("inf") else round(self.blackhole_until - now, 3)
        return {"settings": dict(self.settings), "blackhole": self.blackholed(now), "blackholeLeft": left,
                "dtlsDrops": {str(k): v for k, v in self.dtls_drops.items() if v}, "counts": dict(self.counts)}


class Proxy:
    """The packet loop: both TUN devices, a timer queue for held packets, the control socket."""

    def __init__(self, fd_a, fd_b, control, seed):
        self.directions = {"a->b": Direction("a->b", fd_a, fd_b), "b->a": Direction("b->a", fd_b, fd_a)}
        self.by_source = {fd_a: self.directions["a->b"], fd_b: self.directions["b->a"]}
        self.control = control
        self.seed = seed   # in every answer, so a failed test's message names it
        self.rng = random.Random(seed)
        self.queue = []   # (due, tiebreak, direction, arrival number, packet)
        self.tiebreak = itertools.count()
        self.stopping = False

    def write(self, direction, packet, arrival=None):
        try:
            os.write(direction.sink, packet)
        except OSError as e:
            direction.counts["writeErrors"] += 1
            print(f"fault_link: write {direction.name}: {e}", file=sys.stderr, flush=True)
            return
        if arrival is not None:
            direction.counts["delivered"] += 1
            if arrival < direction.released:
                direction.counts["outOfOrder"] += 1
            direction.released = max(direction.released, arrival)

    def on_packet(self, direction, packet, now):
        c = direction.counts
        c["packets"] += 1
        if not is_udp(packet):
            c["other"] += 1
            self.write(direction, packet)
            return
        c["udp"] += 1
        if direction.blackholed(now):
            c["blackholed"] += 1
            return
        if direction.dtls_drops:
            for kind in dtls_record_types(packet):
                if direction.dtls_drops.get(kind):
                    direction.dtls_drops[kind] -= 1
                    c["dtlsDropped"] += 1
                    return
        s = direction.settings
        if s["loss"] and self.rng.random() * 100 < s["loss"]:
            c["lost"] += 1
            return
        arrival = next(direction.arrivals)
        copies = 1
        if s["duplicate"] and self.rng.random() * 100 < s["duplicate"]:
            copies = 2
            c["duplicated"] += 1
        for _ in range(copies):
            hold = s["delay"]
            if s["jitter"]:
                hold = max(0.0, hold + self.rng.uniform(-s["jitter"], s["jitter"]))
            if s["reorder"] and self.rng.random() * 100 < s["reorder"]:
                hold += s["reorder_gap"]
                c["reordered"] += 1
            if hold <= 0:
                self.write(direction, packet, arrival)
            else:
                c["delayed"] += 1
                heapq.heappush(self.queue, (now + hold / 1000.0, next(self.tiebreak), direction.name, arrival, packet))

    def release_due(self, now):
        while self.queue and self.queue[0][0] <= now:
            _, _, name, arrival, packet = heapq.heappop(self.queue)
            self.write(self.directions[name], packet, arrival)

    def handle_request(self, request, now):
        op = request.get("op")
        if op == "stats":
            pass
        elif op == "clear":
            for d in self.directions.values():
                d.settings = dict(SETTINGS)
                d.blackhole_until = None
                d.dtls_drops = {}
        elif op in ("set", "blackhole", "drop-dtls"):
            chosen = self.chosen(request.get("direction", "both"))
            if op == "set":
                changes = {k: v for k, v in request.items() if k not in ("op", "direction")}
                for key, value in changes.items():
                    if key not in SETTINGS:
                        raise ValueError(f"unknown setting {key!r} (known: {', '.join(SETTINGS)})")
                    if not isinstance(value, (int, float)) or value < 0 or (key in PERCENT_SETTINGS and value > 100):
                        raise ValueError(f"{key} must be a number from 0 to {100 if key in PERCENT_SETTINGS else 'any'}")
                for d in chosen:
                    d.settings.update({k: float(v) for k, v in changes.items()})
            elif op == "drop-dtls":
                kind, count = request.get("content_type"), request.get("count", 1)
                if not isinstance(kind, int) or not 20 <= kind <= 63 or not isinstance(count, int) or count < 0:
                    raise ValueError("drop-dtls takes a content_type from 20 to 63 and a count >= 0")
                for d in chosen:
                    d.dtls_drops[kind] = count
            else:
                seconds = request.get("seconds")
                if seconds is not None and (not isinstance(seconds, (int, float)) or seconds < 0):
                    raise ValueError("seconds must be a number >= 0, or null for until cleared")
                for d in chosen:
                    d.blackhole_until = (float("inf") if seconds is None else
                                         None if seconds == 0 else now + seconds)
        else:
            raise ValueError(f"unknown op {op!r}")
        return {"ok": True, "seed": self.seed, "queued": len(self.queue),
                "directions": {name: d.state(now) for name, d in self.directions.items()}}

    def chosen(self, direction):
        if direction == "both":
            return list(self.directions.values())
        if direction not in self.directions:
            raise ValueError(f"direction must be both, a->b or b->a, not {direction!r}")
        return [self.directions[direction]]

    def serve_control(self):
        """One request, one answer, on a connection of its own (small and quick: the
        packet loop waits meanwhile, at most the client's few milliseconds)."""
        conn, _ = self.control.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                answer = self.handle_request(json.loads(data), time.monotonic())
            except (ValueError, socket.timeout) as e:
                answer = {"ok": False, "error": str(e)}
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError as e:
                print(f"fault_link: control answer not sent: {e}", file=sys.stderr, flush=True)

    def run(self, wakeup):
        """Until SIGTERM: its handler sets `stopping` and the signal's byte on the
        wakeup pipe ends the select at once."""
        sources = list(self.by_source)
        while not self.stopping:
            now = time.monotonic()
            self.release_due(now)
            timeout = max(0.0, self.queue[0][0] - now) if self.queue else 1.0
            try:
                ready, _, _ = select.select(sources + [self.control, wakeup], [], [], timeout)
            except InterruptedError:
                continue
            now = time.monotonic()
            for fd in ready:
                if fd == wakeup:
                    os.read(wakeup, 64)
                    continue
                if fd is self.control:
                    self.serve_control()
                    continue
                direction = self.by_source[fd]
                for _ in range(READ_BURST):
                    try:
                        packet = os.read(fd, 65536)
                    except BlockingIOError:
                        break
                    self.on_packet(direction, packet, now)


def serve(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, metavar="NETNS", help="side A's namespace (a /run/netns path)")
    p.add_argument("--b", required=True, metavar="NETNS", help="side B's namespace")
    p.add_argument("--tun-a", default="fa0")
    p.add_argument("--tun-b", default="fb0")
    p.add_argument("--tun-device", default="/dev/net/tun", help="the TUN clone device (tests point it elsewhere)")
    p.add_argument("--control", required=True, metavar="SOCKET", help="Unix socket path for the control channel")
    p.add_argument("--seed", type=int, help="random seed (default: a random one, printed)")
    args = p.parse_args(argv)
    # The test's process owns this one: when it dies, so does the link.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    try:
        fd_a = open_tun(args.a, args.tun_a, args.tun_device)
        fd_b = open_tun(args.b, args.tun_b, args.tun_device)
    except OSError as e:
        print(f"fault_link: cannot make the TUN devices ({args.tun_device}): {e}", file=sys.stderr, flush=True)
        return 1
    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    control.bind(args.control)
    control.listen(8)
    proxy = Proxy(fd_a, fd_b, control, seed)

    def stop(*_):
        proxy.stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    wakeup, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wakeup_write)
    print(json.dumps({"ready": True, "tunA": args.tun_a, "tunB": args.tun_b, "seed": seed}), flush=True)
    proxy.run(wakeup)
    # What the link did, for the test's log.
    print(json.dumps(proxy.handle_request({"op": "stats"}, time.monotonic())), file=sys.stderr, flush=True)
    return 0



# -- the test's side ---------------------------------------------------------------

A_ADDR, B_ADDR, PREFIX = "10.78.1.1", "10.78.2.1", 24
A_NET, B_NET = "10.78.1.0/24", "10.78.2.0/24"
_links = itertools.count()


class LinkError(AssertionError):
    """The link could not be made, or its proxy failed: the test fails with this."""


class FaultLink:
    """Two namespaces joined by the proxy; `a` and `b` are the sides (publish_support.Net)."""

    def __init__(self, workdir, tun_device="/dev/net/tun", seed=None):
        if not shutil.which("ip"):
            raise NamespaceUnavailable("the fault link needs `ip` (iproute2; scripts/install --test installs "
                                       "it); not using the host's network")
        base = f"camagent-link-{os.getpid()}-{next(_links)}"
        self.workdir = workdir
        self.a = Net(f"{base}-a", A_ADDR, "fa0")
        self.b = Net(f"{base}-b", B_ADDR, "fb0")
        self.proxy = None
        self.control_path = os.path.join(workdir, f"{base}.sock")
        self._made = []
        try:
            for side in (self.a, self.b):
                self._add_namespace(side)
            self._start_proxy(tun_device, seed)
            self._configure(self.a, A_ADDR, B_NET)
            self._configure(self.b, B_ADDR, A_NET)
        except BaseException:
            self.cleanup()
            raise

    def _add_namespace(self, side):
        try:
            _run(["ip", "netns", "add", side.name])
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            raise NamespaceUnavailable(f"`ip netns add {side.name}` failed ({e}); the fault link needs root "
                                       "and network namespaces, and does not fall back to the host's "
                                       "network") from e
        self._made.append(side)
        _run(["ip", "-n", side.name, "link", "set", "lo", "up"])
        # IPv6 off: the one IPv4 address is every peer's only candidate.
        _run(["ip", "netns", "exec", side.name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])

    def _start_proxy(self, tun_device, seed):
        log = open(self.control_path[:-len(".sock")] + ".log", "w")
        self.proxy = subprocess.Popen(
            [PY, os.path.abspath(__file__), "--a", f"/run/netns/{self.a.name}", "--b", f"/run/netns/{self.b.name}",
             "--tun-a", self.a.iface, "--tun-b", self.b.iface, "--tun-device", tun_device,
             "--control", self.control_path] + ([] if seed is None else ["--seed", str(seed)]),
            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        self.proxy.log_path = log.name
        self.proxy.label = "fault_link.py"
        try:
            ready = json.loads(read_line(self.proxy, 30))
        except AssertionError as e:
            raise LinkError(f"the fault link's proxy did not start: {e}") from e
        self.seed = ready["seed"]

    def _configure(self, side, addr, other):
        try:
            _run(["ip", "-n", side.name, "addr", "add", f"{addr}/{PREFIX}", "dev", side.iface])
            _run(["ip", "-n", side.name, "link", "set", side.iface, "up"])
            _run(["ip", "-n", side.name, "route", "add", other, "dev", side.iface])
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            raise LinkError(f"the fault link's {side.iface} in {side.name} cannot be configured: {e}") from e

    # -- control -------------------------------------------------------------

    def request(self, **request):
        """One control request; the answer, or the test fails with the proxy's log."""
        if self.proxy.poll() is not None:
            raise LinkError(f"the fault link's proxy has exited ({self.proxy.returncode}):\n{self.log()}")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10)
                s.connect(self.control_path)
                s.sendall(json.dumps(request).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError as e:
            raise LinkError(f"the fault link's control socket failed ({e}):\n{self.log()}") from e
        answer = json.loads(data)
        if not answer.get("ok"):
            raise LinkError(f"the fault link refused {request}: {answer.get('error')}")
        return answer

    def set(self, direction="both", **settings):
        """Changes impairments (loss %, delay ms, jitter ms, reorder %, reorder_gap ms,
        duplicate %) for UDP in one direction ("a->b", "b->a") or both."""
        return self.request(op="set", direction=direction, **settings)

    def blackhole(self, seconds=None, direction="both"):
        """Drops every UDP packet for `seconds` (None: until cleared; 0 clears)."""
        return self.request(op="blackhole", direction=direction, seconds=seconds)

    def drop_dtls(self, content_type, count=1, direction="both"):
        """Drops the next `count` UDP datagrams that carry a DTLS record of
        `content_type` (20 ChangeCipherSpec, 21 alert, 22 handshake)."""
        return self.request(op="drop-dtls", direction=direction, content_type=content_type, count=count)

    def clear(self):
        """Every impairment off, both ways (the counters stay)."""
        return self.request(op="clear")

    def stats(self):
        """{"a->b": {"settings", "blackhole", "blackholeLeft", "counts"}, "b->a": ...}."""
        return self.request(op="stats")["directions"]

    def counts(self, direction):
        return self.stats()[direction]["counts"]

    def wait_blackhole_over(self, timeout):
        """Waits until neither direction is blackholed (the proxy's own clock decides)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(d["blackhole"] for d in self.stats().values()):
                return
            time.sleep(0.1)
        raise LinkError(f"the blackhole was still on after {timeout} s: {self.stats()}")

    def log(self):
        path = getattr(self.proxy, "log_path", None)
        return open(path).read()[-4000:] if path and os.path.exists(path) else ""

    # -- teardown ------------------------------------------------------------

    def cleanup(self):
        """Peers first, then the proxy (its TUN devices go with it), then the namespaces."""
        for side in self._made:
            for proc in side.procs:
                side.stop(proc, timeout=10)
        proxy_died = self.proxy is not None and self.proxy.poll() is not None
        if self.proxy is not None and self.proxy.poll() is None:
            try:
                os.killpg(self.proxy.pid, signal.SIGTERM)
                self.proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proxy.pid, signal.SIGKILL)
                self.proxy.wait(timeout=10)
            except ProcessLookupError:
                pass
        for side in self._made:
            side.cleanup()
        if os.path.exists(self.control_path):
            os.unlink(self.control_path)
        return proxy_died


@pytest.fixture
def fault_link(workdir):
    """A link of the test's own: side A and side B, UDP impaired as the test says.
    A proxy that died during the test fails it here, after the cleanup."""
    link = FaultLink(workdir)
    died = False
    try:
        yield link
    finally:
        died = link.cleanup()
    if died:
        raise LinkError(f"the fault link's proxy exited during the test ({link.proxy.returncode}):\n{link.log()}")


if __name__ == "__main__":
    sys.exit(serve())
