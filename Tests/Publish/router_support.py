"""`camagent router` in the test's network namespace, and what the router tests share:
tokens and sessions made with camagent's own commands, and HTTP from inside the namespace."""
import asyncio
import ctypes
import json
import os
import select
import threading
import time

import websockets

from publish_support import BIN, PY

ROUTER_PORT = 8090


def http(net, method, url, body=None, headers=None, timeout=20):
    """One HTTP request from inside the test's network: (status, headers dict, body text)."""
    code = ("import json, sys, urllib.request, urllib.error\n"
            "a = json.loads(sys.argv[1])\n"
            "req = urllib.request.Request(a['url'], data=a['body'].encode() if a['body'] is not None else None,\n"
            "                             method=a['method'], headers=a['headers'])\n"
            "try:\n"
            "    r = urllib.request.urlopen(req, timeout=10); status, h, text = r.status, dict(r.headers), r.read().decode()\n"
            "except urllib.error.HTTPError as e:\n"
            "    status, h, text = e.code, dict(e.headers), e.read().decode()\n"
            "print(json.dumps([status, h, text]))\n")
    arg = json.dumps({"url": url, "method": method, "body": body, "headers": headers or {}})
    done = net.run([PY, "-c", code, arg], timeout=timeout)
    assert done.returncode == 0, done.stderr
    status, h, text = json.loads(done.stdout)
    return status, h, text


def drain(proc):
    """Reads a background process's stdout in a thread (kept in proc.output), so a chatty
    process never blocks on a full pipe; returns proc."""
    proc.output = []

    def read():
        for line in proc.stdout:
            proc.output.append(line)
    proc.reader = threading.Thread(target=read, daemon=True)
    proc.reader.start()
    return proc


class Router:
    """`camagent router` inside the test's network, with its secret in the test's workdir."""

    def __init__(self, net, workdir, *extra):
        self.net = net
        self.workdir = workdir
        self.secret = os.path.join(workdir, "router.secret")
        self.base = f"http://{net.addr}:{ROUTER_PORT}"
        self.proc = net.start([BIN, "router", "--listen", f"{net.addr}:{ROUTER_PORT}", "--secret-file", self.secret,
                               *extra], "router", workdir)
        self.lines = []
        self._wait_for("listening", timeout=60)

    def _wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if not ready:
                if self.proc.poll() is not None:
                    break
                continue
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"camagent router printed no {text!r} line (exit {self.proc.poll()}):\n"
                             + "".join(self.lines) + self.log())

    def log(self):
        return open(self.proc.log_path).read()[-4000:]

    def camagent(self, *args, timeout=30):
        """A camagent command inside the namespace: its stdout, stripped; fails the test on a non-zero exit."""
        done = self.net.run([BIN, *args], timeout=timeout)
        assert done.returncode == 0, f"camagent {' '.join(args)} exited {done.returncode}: {done.stderr}"
        return done.stdout.strip()

    def create_session(self, relayed=False):
        return self.camagent("session", "create", "--router", self.base, "--secret-file", self.secret,
                             *(["--relayed"] if relayed else []))

    def token(self, session, role, *extra):
        return self.camagent("token", "--secret-file", self.secret, "--session", session, "--role", role, *extra)

    def project_token(self):
        return self.camagent("token", "--secret-file", self.secret, "--project")

    def session_url(self, session):
        return f"{self.base}/v2/sessions/{session}"

    def streams(self, session):
        status, _, text = http(self.net, "GET", f"{self.session_url(session)}/streams",
                               headers={"Authorization": f"Bearer {self.project_token()}"})
        assert status == 200, (status, text)
        return json.loads(text)

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
        status, _, text = http(self.net, "GET", f"{self.base}/metrics")
        assert status == 200, (status, text)
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def enter_namespace(net):
    """Moves the calling thread (only it: setns(2) is per thread) into the test's namespace."""
    fd = os.open(f"/run/netns/{net.name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns into the test namespace failed")
    finally:
        os.close(fd)


class SessionWatcher:
    """A signalling client (PyPI `websockets`) on a thread inside the test's namespace that
    keeps every message the router sends it, in order, for the test to wait on."""

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
        async with websockets.connect(url, open_timeout=10) as ws:
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
