"""`camagent publish --stun HOST:PORT` behind a NAT: the STUN binding happens and the
server-reflexive candidate it yields is in the offer the WHIP server gets.

Three network namespaces of the test's own: camagent's (10.78.0.2, its only
address), a router's that masquerades it (nftables) as 10.77.0.254, and the
servers' (10.77.0.1): coturn as a STUN-only server (a STUN server nobody here
wrote, logging each binding it answers) and the aiortc WHIP receiver. camagent
cannot know 10.77.0.254 but from the STUN server's answer, so an srflx
candidate with that address in its offer is the binding's result. Nothing
leaves the namespaces; a namespace that cannot be made fails the test.
"""
import itertools
import os
import re
import shutil
import time

import pytest

from publish_support import EXIT_OK, Net, Receiver, _run, camagent_publish, check_video, describe, states, json_lines

INSIDE = "10.78.0.2"
ROUTER_INSIDE = "10.78.0.1"
ROUTER_OUTSIDE = "10.77.0.254"
SERVERS = "10.77.0.1"
STUN_PORT = 3478
DURATION = 5

_counter = itertools.count()


@pytest.fixture
def nat():
    """(camagent's Net, the servers' Net), joined by a masquerading router namespace."""
    for tool in ("ip", "nft", "turnserver"):
        assert shutil.which(tool), f"{tool} is not installed (scripts/install --test installs it)"
    base = f"camagent-stun-{os.getpid()}-{next(_counter)}"
    inside, router, outside = Net(f"{base}-in", INSIDE, "in0"), Net(f"{base}-nat", ROUTER_INSIDE, "nat0"), \
        Net(f"{base}-out", SERVERS, "out0")
    made = []
    try:
        for n in (inside, router, outside):
            _run(["ip", "netns", "add", n.name])
            made.append(n)
            _run(["ip", "-n", n.name, "link", "set", "lo", "up"])
            _run(["ip", "netns", "exec", n.name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
        _run(["ip", "-n", inside.name, "link", "add", "in0", "type", "veth", "peer", "name", "nat0",
              "netns", router.name])
        _run(["ip", "-n", outside.name, "link", "add", "out0", "type", "veth", "peer", "name", "nat1",
              "netns", router.name])
        for ns, dev, addr in ((inside.name, "in0", INSIDE), (router.name, "nat0", ROUTER_INSIDE),
                              (router.name, "nat1", ROUTER_OUTSIDE), (outside.name, "out0", SERVERS)):
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
        _run(["ip", "-n", inside.name, "route", "add", "default", "via", ROUTER_INSIDE])
        _run(["ip", "netns", "exec", router.name, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        ruleset = ('table ip camagent_nat {\n chain post {\n  type nat hook postrouting priority 100;\n'
                   '  oifname "nat1" masquerade\n }\n}\n')
        proc = router.run(["nft", "-f", "-"], timeout=20, input=ruleset)
        assert proc.returncode == 0, f"nft could not set up the NAT: {proc.stderr}"
        yield inside, outside
    finally:
        for n in reversed(made):
            n.cleanup()


def start_coturn(net, workdir):
    """coturn, STUN only, on SERVERS:STUN_PORT; returns (process, its log path) once it listens on UDP."""
    log = os.path.join(workdir, "coturn.log")
    proc = net.start(["turnserver", "-n", "-v", "--stun-only", "--no-auth", "-L", SERVERS, "-p", str(STUN_PORT),
                      "--log-binding", "--no-cli", "--no-tls", "--no-dtls", "--simple-log", "-l", log,
                      "--db", os.path.join(workdir, "turndb")], "coturn", workdir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(log) and f"UDP listener opened on: {SERVERS}:{STUN_PORT}" in open(log).read():
            return proc, log
        assert proc.poll() is None, f"coturn exited {proc.returncode}: {open(proc.log_path).read()[-2000:]}"
        time.sleep(0.2)
    raise AssertionError("coturn did not open its UDP listener in 30 s:\n"
                         + (open(log).read()[-2000:] if os.path.exists(log) else ""))


def candidates(sdp):
    """(address, port, type, raddr) of every RTP-component a=candidate line."""
    found = []
    for m in re.finditer(r"a=candidate:\S+ 1 udp \d+ (\S+) (\d+) typ (\w+)(?: raddr (\S+))?", sdp):
        found.append((m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return found


def test_stun_gives_a_server_reflexive_candidate_behind_a_nat(nat, workdir):
    inside, outside = nat
    coturn, coturn_log = start_coturn(outside, workdir)
    receiver = Receiver(outside, workdir)
    proc = camagent_publish(inside, receiver.url, duration=DURATION, extra=["--stun", f"{SERVERS}:{STUN_PORT}"])
    summary = receiver.stop()
    outside.stop(coturn)
    assert proc.returncode == EXIT_OK, describe(proc, receiver.log())
    assert "connected" in states(json_lines(proc.stdout)), proc.stdout[-2000:]

    # coturn answered a binding request, and saw it come from the NAT's outside address.
    log = open(coturn_log).read()
    assert re.search(rf"remote addr {re.escape(ROUTER_OUTSIDE)}:\d+", log), log[-3000:]
    assert "BINDING processed, success" in log, log[-3000:]

    # camagent's offer: its host candidate, and the server-reflexive one only the STUN
    # server could have told it (the NAT's address, based on the host candidate).
    assert len(summary["sessions"]) == 1, [s["id"] for s in summary["sessions"]]
    session = summary["sessions"][0]
    offered = sorted(set(candidates(session["offer"])))   # each m-section repeats them
    hosts = [c for c in offered if c[2] == "host"]
    srflx = [c for c in offered if c[2] == "srflx"]
    assert [c[0] for c in hosts] == [INSIDE], offered
    assert len(srflx) == 1 and srflx[0][0] == ROUTER_OUTSIDE and srflx[0][3] == INSIDE, offered
    # And the media went through the NAT to the receiver.
    check_video(session["video"][0], duration=DURATION, codec="VP8")
