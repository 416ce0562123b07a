"""Shared helpers for the service tests (host): camagent as systemd runs it.

No systemd is running on these machines (CI containers), so the tests play the
manager's part themselves: a real AF_UNIX datagram socket as NOTIFY_SOCKET,
JOURNAL_STREAM naming the file stderr goes to, systemd-analyze for the unit.
"""
import os
import select
import socket
import subprocess
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CAMAGENT_BIN", os.path.join(ROOT, ".build", "release", "camagent"))
UNIT = os.path.join(ROOT, "packaging", "camagent.service")

EXIT_USAGE = 64
EXIT_NO_SUCH_DEVICE = 66


class NotifySocket:
    """The manager's end of sd_notify: a datagram socket bound to a path or an abstract name."""

    def __init__(self, directory, abstract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"camagent-test-{uuid.uuid4().hex}"
            self.sock.bind("\0" + name)
            self.env_value = "@" + name
        else:
            path = os.path.join(directory, "notify.sock")
            self.sock.bind(path)
            self.env_value = path
        self.messages = []   # (monotonic time, text)

    def receive(self, timeout):
        """The next datagram's text, or None when none comes within timeout seconds."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        text = self.sock.recv(65536).decode()
        self.messages.append((time.monotonic(), text))
        return text

    def wait_for(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.receive(max(0.05, deadline - time.monotonic()))
            if text is not None and predicate(text):
                return text
        raise AssertionError(f"no {what} within {timeout} s; received: {[m for _, m in self.messages]}")

    def close(self):
        self.sock.close()


@pytest.fixture(params=["path", "abstract"])
def notify_socket(request, tmp_path):
    s = NotifySocket(str(tmp_path), abstract=request.param == "abstract")
    yield s
    s.close()


def run(args, timeout=60, **kw):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=timeout, **kw)
