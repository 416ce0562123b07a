"""The fault link (fault_link.py) proven before any camagent test relies on it: UDP
echoes from side A to side B pass untouched on a clean link, are lost at about the
configured rate, vanish in a blackhole and come back after it, arrive late, out of order
or twice when told to, and TCP passes whatever UDP suffers. The link's own counters
must agree with what the echo client and server saw, packet for packet.

The client and the echo server are threads of the test that have joined side A and
side B (setns(2) moves only the calling thread). Every wait has a timeout; the one
assertion about time is a lower bound the link guarantees by construction (a delayed
packet is never released early), never an upper bound.
"""
import hashlib
import os
import socket
import subprocess
import threading
import time

import pytest

from fault_link import FaultLink, LinkError
from router_support import enter_namespace, in_namespace

WAIT = 20   # seconds for the echoes of one exchange to be accounted for


class Echo:
    """A UDP echo server on a thread inside a side; counts the datagrams it got."""

    def __init__(self, side):
        self.received = 0
        self.sent = 0
        self.error = None
        self._stop = threading.Event()
        self._bound = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(side,), daemon=True)
        self._thread.start()
        assert self._bound.wait(10), f"the echo server did not start: {self.error!r}"
        assert self.error is None, self.error

    def _run(self, side):
        try:
            enter_namespace(side)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((side.addr, 0))
                s.settimeout(0.2)
                self.address = s.getsockname()
                self._bound.set()
                while not self._stop.is_set():
                    try:
                        data, peer = s.recvfrom(2048)
                    except socket.timeout:
                        continue
                    self.received += 1
                    s.sendto(data, peer)
                    self.sent += 1
        except BaseException as e:   # reported by close()
            self.error = e
            self._bound.set()

    def close(self):
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive() and self.error is None, f"echo server: {self.error!r}"


@pytest.fixture
def echo(fault_link):
    server = Echo(fault_link.b)
    yield server
    server.close()


def exchange(link, echo, count, first=0, batch=100):
    """Sends `count` numbered datagrams from side A to the echo server, `batch` at a
    time, and after each batch collects the echoes until the exchange has settled:
    every datagram reached the proxy, none is held, every one the link delivered
    reached the echo server and was answered, and every answer the link delivered
    back reached the client. One batch at a time keeps every socket buffer and queue
    far from full, so whatever is missing was dropped by the link, never by the
    kernel. Returns [(sequence number, round-trip seconds)] in arrival order."""
    base = link.stats()
    base_echo = (echo.received, echo.sent)

    def delta(stats, direction, key):
        return stats[direction]["counts"][key] - base[direction]["counts"][key]

    def settled(got, count):
        answer = link.request(op="stats")
        stats = answer["directions"]
        received, sent = echo.received - base_echo[0], echo.sent - base_echo[1]
        return (delta(stats, "a->b", "udp") == count and answer["queued"] == 0
                and received == sent == delta(stats, "a->b", "delivered")
                and delta(stats, "b->a", "udp") == sent
                and len(got) == delta(stats, "b->a", "delivered"))

    def client():
        sent_at = {}
        got = []
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((link.a.addr, 0))
            s.settimeout(0.05)

            def collect():
                try:
                    data, _ = s.recvfrom(2048)
                except socket.timeout:
                    return False
                n = int(data[:8])
                got.append((n, time.monotonic() - sent_at[n]))
                return True
            for start in range(first, first + count, batch):
                end = min(start + batch, first + count)
                for n in range(start, end):
                    sent_at[n] = time.monotonic()
                    s.sendto(b"%08d" % n + b"." * 56, echo.address)
                deadline = time.monotonic() + WAIT
                while not settled(got, end - first):
                    assert time.monotonic() < deadline, f"the exchange did not settle in {WAIT} s: " \
                        f"{len(got)} echoes, echo server {echo.received}/{echo.sent}, {link.stats()}"
                    collect()
            return got
    return in_namespace(link.a, client, timeout=WAIT + 60)


def numbers(got):
    return [n for n, _ in got]


def test_a_clean_link_passes_every_packet_in_order(fault_link, echo):
    got = exchange(fault_link, echo, 1000)
    assert numbers(got) == list(range(1000))
    stats = fault_link.stats()
    for direction in ("a->b", "b->a"):
        c = stats[direction]["counts"]
        assert c["udp"] == c["delivered"] == 1000, stats
        assert c["lost"] == c["blackholed"] == c["delayed"] == c["outOfOrder"] == c["writeErrors"] == 0, stats


def test_loss_is_about_the_configured_share(fault_link, echo):
    fault_link.set(direction="a->b", loss=20)
    got = exchange(fault_link, echo, 2000)
    c = fault_link.counts("a->b")
    lost = 2000 - len(got)
    # 2000 trials at 20 %: the mean is 400 and the standard deviation 18; 200 and 600
    # are over 11 deviations away, so this never fails by chance.
    assert 200 <= lost <= 600, (lost, c)
    # What the link says it dropped is exactly what never reached the echo server.
    assert c["lost"] == lost and echo.received == len(got) == c["delivered"], (lost, echo.received, c)
    assert fault_link.counts("b->a")["lost"] == 0
    assert len(set(numbers(got))) == len(got)


def test_a_blackhole_drops_every_udp_packet_then_the_link_recovers(fault_link, echo):
    fault_link.blackhole(3)
    got = exchange(fault_link, echo, 200)
    stats = fault_link.stats()
    assert got == [] and echo.received == 0, stats
    assert stats["a->b"]["counts"]["blackholed"] == 200, stats
    fault_link.wait_blackhole_over(timeout=30)
    got = exchange(fault_link, echo, 200, first=200)
    assert numbers(got) == list(range(200, 400)), numbers(got)
    assert fault_link.counts("a->b")["blackholed"] == 200


def test_delay_and_jitter_hold_every_packet_and_lose_none(fault_link, echo):
    fault_link.set(delay=60, jitter=20)
    got = exchange(fault_link, echo, 300, batch=20)
    assert sorted(numbers(got)) == list(range(300))
    stats = fault_link.stats()
    for direction in ("a->b", "b->a"):
        c = stats[direction]["counts"]
        assert c["delayed"] == c["delivered"] == 300 and c["lost"] == 0, stats
    # Each way holds a packet at least 60 - 20 ms; the link never releases one early.
    assert min(rtt for _, rtt in got) >= 2 * 0.040, sorted(rtt for _, rtt in got)[:5]


def test_reordering_and_duplication_are_seen_by_the_receiver(fault_link, echo):
    fault_link.set(reorder=25, reorder_gap=20, duplicate=10)
    got = exchange(fault_link, echo, 500, batch=50)
    stats = fault_link.stats()
    ab, ba = stats["a->b"]["counts"], stats["b->a"]["counts"]
    arrived = numbers(got)
    assert set(arrived) == set(range(500)), stats
    # Every copy the link made arrived: 500 sent, one more per duplicate each way.
    assert len(arrived) == 500 + ab["duplicated"] + ba["duplicated"], (len(arrived), stats)
    assert ab["duplicated"] > 0 and ba["duplicated"] > 0, stats
    overtaken = sum(1 for x, y in zip(arrived, arrived[1:]) if y < x)
    assert overtaken > 0 and ab["outOfOrder"] > 0 and ab["reordered"] > 0, (overtaken, stats)


def test_tcp_passes_while_udp_is_blackholed_and_lossy(fault_link, echo):
    fault_link.blackhole(None)
    fault_link.set(loss=50)
    payload = os.urandom(1 << 20)
    digest = {}
    ready = threading.Event()

    def server():
        with socket.socket() as listener:
            listener.bind((fault_link.b.addr, 0))
            listener.listen(1)
            listener.settimeout(WAIT)
            digest["port"] = listener.getsockname()[1]
            ready.set()
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(WAIT)
                h = hashlib.sha256()
                while chunk := conn.recv(65536):
                    h.update(chunk)
                conn.sendall(h.hexdigest().encode())
    serving = threading.Thread(target=lambda: in_namespace(fault_link.b, server, timeout=WAIT * 2), daemon=True)
    serving.start()
    assert ready.wait(10)

    def client():
        with socket.create_connection((fault_link.b.addr, digest["port"]), timeout=WAIT) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            return s.recv(100).decode()
    assert in_namespace(fault_link.a, client, timeout=WAIT * 2) == hashlib.sha256(payload).hexdigest()
    serving.join(WAIT)
    got = exchange(fault_link, echo, 50)
    stats = fault_link.stats()
    assert got == [] and stats["a->b"]["counts"]["blackholed"] == 50, stats
    for direction in ("a->b", "b->a"):
        c = stats[direction]["counts"]
        assert c["other"] > 0 and c["writeErrors"] == 0, stats
    fault_link.clear()
    assert numbers(exchange(fault_link, echo, 50, first=50)) == list(range(50, 100))


def test_bad_settings_are_refused(fault_link):
    with pytest.raises(LinkError, match="loss must be a number from 0 to 100"):
        fault_link.set(loss=120)
    with pytest.raises(LinkError, match="unknown setting 'lag'"):
        fault_link.set(lag=5)
    with pytest.raises(LinkError, match="direction must be"):
        fault_link.set(direction="sideways", loss=1)


def test_a_link_that_cannot_be_made_fails_and_leaves_nothing(workdir):
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    with pytest.raises(LinkError, match="cannot make the TUN devices"):
        FaultLink(workdir, tun_device=os.path.join(workdir, "no-such-tun"))
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    assert "camagent-link-" not in after.replace(before, ""), after


def test_drop_dtls_drops_only_the_datagrams_asked_for(fault_link, echo):
    # Datagrams shaped like DTLS (RFC 7983: first byte 20-63): records of content type
    # 22 (handshake), then one holding 22 and 20 (ChangeCipherSpec) as a last flight does.
    def record(kind, body=b"x" * 10):
        return bytes([kind, 0xFE, 0xFD]) + bytes(8) + len(body).to_bytes(2, "big") + body
    flights = [record(22), record(22) + record(20, b"\x01") + record(22), record(22)]
    fault_link.drop_dtls(20, count=1, direction="a->b")

    def client():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(WAIT)
            for datagram in flights + flights:
                s.sendto(datagram, echo.address)
            return [s.recvfrom(2048)[0] for _ in range(5)]
    got = in_namespace(fault_link.a, client, timeout=WAIT + 10)
    # The first datagram carrying a ChangeCipherSpec is lost; its second sending passes.
    assert got == [flights[0], flights[2]] + flights, got
    c = fault_link.counts("a->b")
    assert c["dtlsDropped"] == 1 and c["delivered"] == 5, c
    assert fault_link.stats()["a->b"]["dtlsDrops"] == {}
