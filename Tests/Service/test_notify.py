"""`camagent publish` speaks systemd's notification protocol (Type=notify).

The test is the service manager: it binds a real AF_UNIX datagram socket
(a path, and an abstract '@' name) and gives it to camagent as NOTIFY_SOCKET,
with WATCHDOG_USEC as systemd sets it for WatchdogSec=. Checked: STATUS lines
while starting, READY=1 only once the viewer server listens, WATCHDOG=1 pings
while test-pattern frames flow, STOPPING=1 on SIGTERM with no ping after it;
no pings at all when the watchdog is off or meant for another process.
"""
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import BIN, NotifySocket

PUBLISH = ["publish", "--device", "test-pattern", "--size", "320x240", "--fps", "15", "--audio", "none",
           "--listen", "127.0.0.1:0", "--open", "--json"]


class Agent:
    """camagent publish with its stdout (JSON lines) and stderr in files."""

    def __init__(self, tmp_path, env):
        self.out_path = tmp_path / "stdout.jsonl"
        self.err_path = tmp_path / "stderr.log"
        self.proc = subprocess.Popen([BIN] + PUBLISH, stdout=open(self.out_path, "w"), stderr=open(self.err_path, "w"),
                                     env=dict(os.environ, **env))

    def events(self):
        return [json.loads(line) for line in open(self.out_path) if line.startswith("{")]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def log(self):
        return open(self.err_path).read()[-3000:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def agents():
    started = []
    yield lambda tmp_path, env: started.append(Agent(tmp_path, env)) or started[-1]
    for a in started:
        a.kill()


def test_ready_after_the_server_listens_then_watchdog_pings_then_stopping(notify_socket, tmp_path, agents):
    agent = agents(tmp_path, {"NOTIFY_SOCKET": notify_socket.env_value, "WATCHDOG_USEC": "1000000"})
    ready = notify_socket.wait_for(lambda m: "READY=1" in m.split("\n"), 90, "READY=1")
    # The server answers by the time READY=1 arrives: its "serving" line came first.
    serving = [e for e in agent.events() if e.get("event") == "serving"]
    assert serving, agent.log()
    socket.create_connection(("127.0.0.1", serving[0]["port"]), timeout=10).close()
    assert "STATUS=Publishing test-pattern 320x240" in ready, ready
    before_ready = [m for _, m in notify_socket.messages[:-1]]
    assert any(m.startswith("STATUS=Starting") for m in before_ready), before_ready

    # WATCHDOG_USEC=1 s: a ping every half second while frames flow.
    for _ in range(3):
        notify_socket.wait_for(lambda m: m.startswith("WATCHDOG=1"), 30, "WATCHDOG=1")

    assert agent.stop() == 0, agent.log()
    notify_socket.wait_for(lambda m: "STOPPING=1" in m.split("\n"), 30, "STOPPING=1")
    # The process has exited: whatever it sent is queued. Nothing after STOPPING=1 is a ping.
    while notify_socket.receive(0) is not None:
        pass
    texts = [m for _, m in notify_socket.messages]
    stopping = max(i for i, m in enumerate(texts) if "STOPPING=1" in m.split("\n"))
    assert not any("WATCHDOG=1" in m for m in texts[stopping:]), texts[stopping:]
    assert sum(1 for m in texts if m.startswith("WATCHDOG=1")) >= 3
    assert sum(1 for m in texts if "READY=1" in m.split("\n")) == 1, texts


@pytest.mark.parametrize("watchdog_env", [{}, {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}],
                         ids=["no-watchdog", "watchdog-for-another-pid"])
def test_no_pings_when_the_watchdog_is_not_ours(notify_socket, tmp_path, agents, watchdog_env):
    # A control agent with the watchdog on runs alongside: while it pings four
    # times, the agent under test (the same frames, the same time) pings never.
    control_socket = NotifySocket(str(tmp_path), abstract=True)
    (tmp_path / "control").mkdir()
    (tmp_path / "subject").mkdir()
    try:
        agents(tmp_path / "control", {"NOTIFY_SOCKET": control_socket.env_value, "WATCHDOG_USEC": "1000000"})
        agent = agents(tmp_path / "subject", {"NOTIFY_SOCKET": notify_socket.env_value, **watchdog_env})
        notify_socket.wait_for(lambda m: "READY=1" in m.split("\n"), 90, "READY=1")
        control_socket.wait_for(lambda m: "READY=1" in m.split("\n"), 90, "READY=1 from the control agent")
        for _ in range(4):
            control_socket.wait_for(lambda m: m.startswith("WATCHDOG=1"), 30, "WATCHDOG=1 from the control agent")
    finally:
        control_socket.close()
    assert agent.stop() == 0, agent.log()
    notify_socket.wait_for(lambda m: "STOPPING=1" in m.split("\n"), 30, "STOPPING=1")
    texts = [m for _, m in notify_socket.messages]
    assert not any("WATCHDOG=1" in m for m in texts), texts


def test_without_notify_socket_nothing_is_sent_and_publish_runs():
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
    proc = subprocess.run([BIN] + PUBLISH + ["--duration", "2"], capture_output=True, text=True, timeout=90, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "notif" not in proc.stderr.lower(), proc.stderr


def test_a_broken_notify_socket_is_reported_not_fatal():
    env = dict(os.environ, NOTIFY_SOCKET="relative/path")
    proc = subprocess.run([BIN] + PUBLISH + ["--duration", "2"], capture_output=True, text=True, timeout=90, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "NOTIFY_SOCKET relative/path" in proc.stderr, proc.stderr
