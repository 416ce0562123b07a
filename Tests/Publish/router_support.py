"""`camagent router` in the test's network namespace, and what the router tests share:
tokens and sessions made with camagent's own commands, REST calls and signalling clients
(the PyPI `websockets` package) run on a thread that has joined the namespace (setns(2)
moves only that thread), so the tests see every message themselves."""
import asyncio
import ctypes
import json
import os
import selectors
import socket
import ssl
import struct
import threading
import time
import urllib.error
import urllib.request

import websockets

from publish_support import BIN, drain, output_lines  # noqa: F401 (drain: for the modules that import it from here)

ROUTER_PORT = 8090
WAIT = 10  # seconds any single message, answer or command may take

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def enter_namespace(net):
    """Moves the calling thread (only it) into the test's namespace."""
    fd = os.open(f"/run/netns/{net.name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns into the test namespace failed")
    finally:
        os.close(fd)


def in_namespace(net, function, timeout=60):
    """Runs function() on a thread inside the test's namespace and returns its result (or
    raises its exception); a coroutine function is run to completion within `timeout`."""
    outcome = {}

    def target():
        try:
            enter_namespace(net)
            result = function()
            if asyncio.iscoroutine(result):
                result = asyncio.run(asyncio.wait_for(result, timeout))
            outcome["value"] = result
        except BaseException as e:  # handed to the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout + 15)
    assert not thread.is_alive(), f"the namespace client did not finish within {timeout + 15} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def request(method, url, token=None, body=None, headers=None, context=None, timeout=WAIT):
    """One HTTP call (blocking; call it on a namespace thread): (status, headers, body).
    A dict body goes as JSON; a JSON answer comes back parsed, anything else as text.
    `context` is the ssl.SSLContext an https:// URL is checked with."""
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if isinstance(body, dict):
        headers.setdefault("Content-Type", "application/json")
        body = json.dumps(body)
    data = body.encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as response:
            status, answer_headers, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        status, answer_headers, raw = e.code, dict(e.headers), e.read()
    text = raw.decode()
    try:
        return status, answer_headers, json.loads(text) if text else None
    except json.JSONDecodeError:
        return status, answer_headers, text


def http(net, method, url, token=None, body=None, headers=None, context=None):
    """request() from the test's own thread: (status, headers, body)."""
    return in_namespace(net, lambda: request(method, url, token=token, body=body, headers=headers, context=context),
                        timeout=WAIT + 5)


def thread_states(pid):
    """Each thread of a process that hangs: its name, state and where the kernel has it
    waiting (/proc: wchan), so a start-up that never finishes says where it stopped."""
    rows = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            def read(name):
                try:
                    with open(f"/proc/{pid}/task/{tid}/{name}") as f:
                        return f.read().strip()
                except OSError:
                    return "?"
            state = read("stat").rsplit(")", 1)[-1].split()[:1]
            rows.append(f"  {tid} {read('comm')} {state[0] if state else '?'} {read('wchan')}")
    except OSError as e:
        return f"\n(threads of {pid}: {e})"
    return f"\nthreads of {pid} (tid, name, state, wchan):\n" + "\n".join(rows)


class Router:
    """`camagent router` inside the test's network, with its secret in the test's workdir,
    and the CLI calls around it. With a --tls flag it is reached over https and wss; with
    --tls-self-signed the camagent clients and `context` trust its router-tls.crt."""

    def __init__(self, net, workdir, *flags):
        self.net = net
        self.workdir = workdir
        self.secret = os.path.join(workdir, "router.secret")
        tls = any(f.startswith("--tls") for f in flags)
        self.base = f"{'https' if tls else 'http'}://{net.addr}:{ROUTER_PORT}"
        self.ws_base = f"{'wss' if tls else 'ws'}://{net.addr}:{ROUTER_PORT}"
        self.tls_ca = os.path.join(workdir, "router-tls.crt") if "--tls-self-signed" in flags else None
        self.proc = net.start([BIN, "router", "--listen", f"{net.addr}:{ROUTER_PORT}", "--secret-file", self.secret,
                               *flags], "router", workdir)
        self.lines = []
        self.listen_line = self._wait_for("listening", timeout=60)
        # The certificate exists once the router listens.
        self.context = ssl.create_default_context(cafile=self.tls_ca) if self.tls_ca else None
        self.secret_line = self.lines[0].strip()

    def _wait_for(self, text, timeout):
        for line in output_lines(self.proc, timeout, self.lines):
            if text in line:
                return line.strip()
        raise AssertionError(f"camagent router printed no {text!r} line (exit {self.proc.poll()}):\n"
                             + "".join(self.lines) + self.log() + thread_states(self.proc.pid))

    def log(self):
        return open(self.proc.log_path).read()[-4000:]

    def cli(self, *args, check=True):
        """A camagent command inside the namespace; fails the test on a non-zero exit unless check=False."""
        proc = self.net.run([BIN, *args], timeout=30)
        if check:
            assert proc.returncode == 0, f"camagent {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
        return proc

    def client_flags(self):
        """What a camagent client needs to trust this router (nothing over plain HTTP)."""
        return ["--tls-ca", self.tls_ca] if self.tls_ca else []

    def create_session(self, *extra):
        return self.cli("session", "create", "--router", self.base, "--secret-file", self.secret,
                        *self.client_flags(), *extra).stdout.strip()

    def token(self, session, role, *extra):
        return self.cli("token", "--secret-file", self.secret, "--session", session, "--role", role,
                        *extra).stdout.strip()

    def project_token(self):
        return self.cli("token", "--secret-file", self.secret, "--project").stdout.strip()

    def session_url(self, session):
        return f"{self.base}/v2/sessions/{session}"

    def connect_url(self, session, token):
        return f"{self.ws_base}/v2/sessions/{session}/connect?token={token}"

    def streams(self, session):
        status, _, body = http(self.net, "GET", f"{self.session_url(session)}/streams", token=self.project_token(),
                               context=self.context)
        assert status == 200, (status, body)
        return body

    def wait_for_streams(self, session, count, timeout=30):
        deadline = time.monotonic() + timeout
        streams = []
        while time.monotonic() < deadline:
            streams = self.streams(session)
            if len(streams) >= count:
                return streams
            time.sleep(0.5)
        raise AssertionError(f"{count} streams expected in session {session}, have {streams}\n{self.log()}")

    def metrics(self):
        status, _, text = http(self.net, "GET", f"{self.base}/metrics", context=self.context)
        assert status == 200, (status, text)
        return prometheus_values(text)


def prometheus_values(text):
    """A Prometheus text exposition's samples: {name (with labels): value}."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


class SessionWatcher:
    """A signalling client on a thread inside the test's namespace that keeps every
    message the router sends it, in order, for the test to wait on."""

    def __init__(self, net, url, token):
        self.messages = []
        self.error = None
        self.closed = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(net, f"{url}/connect?token={token}"), daemon=True)
        self._thread.start()

    def _run(self, net, url):
        try:
            enter_namespace(net)
            asyncio.run(self._listen(url.replace("http://", "ws://", 1)))
        except BaseException as e:   # reported by wait_for
            self.error = e
        finally:
            self.closed.set()
            with self._lock:
                self._lock.notify_all()

    async def _listen(self, url):
        async with websockets.connect(url, open_timeout=WAIT) as ws:
            while not self._stop.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.5)
                except asyncio.TimeoutError:
                    continue
                with self._lock:
                    self.messages.append(json.loads(raw))
                    self._lock.notify_all()

    def wait_for(self, kind, match=lambda m: True, timeout=30):
        """The first message of type `kind` for which match(m) holds; fails the test if none comes in time."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for m in self.messages:
                    if m.get("type") == kind and match(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.closed.is_set():
                    raise AssertionError(f"no {kind!r} message within {timeout} s (error {self.error!r}); "
                                         f"got {json.dumps(self.messages)[-2000:]}")
                self._lock.wait(min(left, 0.5))

    def types(self):
        with self._lock:
            return [m.get("type") for m in self.messages]

    def close(self):
        self._stop.set()
        self._thread.join(timeout=10)


def watched_session(net, workdir):
    """A router with one new session: (router, session, url, watcher), the watcher a moderator's
    SessionWatcher that has seen `connected`. The caller closes the watcher."""
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    watcher = SessionWatcher(net, url, router.token(session, "moderator"))
    try:
        watcher.wait_for("connected")
    except BaseException:
        watcher.close()
        raise
    return router, session, url, watcher


class CuttableLink:
    """A TCP relay in front of the router, inside the test's namespace, whose open
    connections the test can cut (both ends reset at once), as a network drop or a NAT
    that forgot them would; new connections are relayed again straight away. A client
    given the relay's port sends its signalling WebSocket and its WHIP/WHEP requests
    through it; its media (UDP) goes straight to the router's candidates.

    One thread relays everything with select(), so `cut` happens between two reads and
    no socket is closed under a thread blocked on it. Every wait has a timeout; a relay
    that cannot start fails the test."""

    def __init__(self, net, target_port, port):
        self.net = net
        self.port = port
        self.target_port = target_port
        self.accepted = 0
        self.cut_connections = 0
        # Until when (time.monotonic()) new connections are reset as they come: a longer outage.
        self.refusing_until = 0.0
        self.refused = 0
        self.error = None
        self._stop = threading.Event()
        self._cut_asked = threading.Event()
        self._cut_done = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(WAIT) or self.error:
            raise AssertionError(f"the TCP relay on port {port} did not start: {self.error!r}")

    def _run(self):
        peers = {}
        selector = selectors.DefaultSelector()

        def drop(sock, reset=False):
            if reset:   # SO_LINGER 0: close() sends RST, not FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            selector.unregister(sock)
            sock.close()

        try:
            enter_namespace(self.net)
            server = socket.create_server((self.net.addr, self.port))
            selector.register(server, selectors.EVENT_READ, None)
        except BaseException as e:   # reported by __init__
            self.error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                if self._cut_asked.is_set():
                    self.cut_connections += len(peers) // 2
                    for sock in list(peers):
                        drop(sock, reset=True)
                    peers.clear()
                    self._cut_asked.clear()
                    self._cut_done.set()
                for key, _ in selector.select(0.1):
                    if key.data is None:
                        client, _ = server.accept()
                        if time.monotonic() < self.refusing_until:
                            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            client.close()
                            self.refused += 1
                            continue
                        upstream = socket.create_connection((self.net.addr, self.target_port), timeout=WAIT)
                        upstream.settimeout(None)
                        peers[client], peers[upstream] = upstream, client
                        selector.register(client, selectors.EVENT_READ, "peer")
                        selector.register(upstream, selectors.EVENT_READ, "peer")
                        self.accepted += 1
                        continue
                    sock = key.fileobj
                    if sock not in peers:
                        continue
                    try:
                        data = sock.recv(65536)
                        if data:
                            peers[sock].sendall(data)
                            continue
                    except OSError:
                        pass
                    other = peers.pop(sock)
                    peers.pop(other, None)
                    drop(sock)
                    drop(other)
        except BaseException as e:   # reported by cut and close
            self.error = e
        finally:
            for sock in list(peers):
                drop(sock)
            server.close()

    def cut(self, outage=0.0):
        """Resets every connection open through the relay, and for `outage` seconds every new
        one as it comes; returns how many were open."""
        self.refusing_until = time.monotonic() + outage
        before = self.cut_connections
        self._cut_done.clear()
        self._cut_asked.set()
        assert self._cut_done.wait(WAIT), f"the TCP relay did not cut within {WAIT} s (error {self.error!r})"
        return self.cut_connections - before

    def close(self):
        self._stop.set()
        self._thread.join(timeout=WAIT)
        assert self.error is None, f"the TCP relay failed: {self.error!r}"
