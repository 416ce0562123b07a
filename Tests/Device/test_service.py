"""camagent as a kiosk service, against vivid in the test VM.

- The watchdog follows the frame path: `publish` pings while vivid delivers,
  withholds its pings (saying so in STATUS) while vivid drops every buffer,
  and pings again when frames return. The test is the service manager: a real
  AF_UNIX datagram socket as NOTIFY_SOCKET, WATCHDOG_USEC as systemd sets it.
- Stable names: a capture by card name ("vivid") or by a /dev/v4l/by-id link
  finds vivid again after it is unloaded and loaded under other node numbers
  (vid_cap_nr=5). The guest has no udev, so the test does udev's part: the
  by-id link, and group video on the new node.
- `scripts/install --service` in the guest (no systemd running: its /etc and
  /var are writable layers): the camagent user in video and audio, the state
  directory, the unit (which then passes `systemd-analyze verify` with its real
  ExecStart), run twice. With vivid's node given to group video as udev does:
  a user outside the group gets exit 77, the camagent user captures.
- The unit's hardening against real drivers: strace of `publish` from vivid
  and snd-aloop shows no call the unit forbids (Tests/Service/unit_checks.py).
"""
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from conftest import BIN, ROOT, find_control, last_json, set_control, tool, wait_for
from pipe_lines import PipeLines

sys.path.insert(0, os.path.join(ROOT, "Tests", "Service"))
from unit_checks import problems, traced  # noqa: E402

EXIT_PERMISSION = 77
VIVID_OPTS = os.environ.get("CAMAGENT_VIVID_MODPROBE_OPTS", "").split()
MOVED_OPTS = VIVID_OPTS + ["vid_cap_nr=5", "vid_out_nr=6"]
BY_ID = "/dev/v4l/by-id/usb-camagent-test-vivid-video-index0"


class NotifySocket:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.path = path
        self.messages = []   # (monotonic time, text)

    def wait_for(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.sock], [], [], max(0.05, deadline - time.monotonic()))
            if ready:
                text = self.sock.recv(65536).decode()
                self.messages.append((time.monotonic(), text))
                if predicate(text):
                    return len(self.messages) - 1
        raise AssertionError(f"no {what} within {timeout} s; received: {[m for _, m in self.messages][-12:]}")


def reload_vivid_with(opts, node):
    """Unloads vivid (failing if it stays loaded: loading would then keep the old
    node numbers) and loads it with `opts`."""
    removed = None
    for _ in range(100):
        removed = subprocess.run(["modprobe", "-r", "vivid"], capture_output=True, text=True)
        if removed.returncode == 0:
            break
        time.sleep(0.2)
    assert removed.returncode == 0, f"vivid stays loaded: {removed.stderr}"
    tool(["modprobe", "vivid"] + opts)
    wait_for(lambda: os.path.exists(node), 30, f"{node} after loading vivid")


@pytest.fixture
def vivid_back_at_video0(vivid):
    """Whatever a test did to vivid's node numbers, the next test finds it as the VM loaded it."""
    yield
    if os.path.lexists(BY_ID):
        os.remove(BY_ID)
    if not os.path.exists(vivid) or os.path.exists("/dev/video5"):
        reload_vivid_with(VIVID_OPTS, vivid)
    os.chown(vivid, 0, 0)
    os.chmod(vivid, 0o600)


# With a second camera that keeps delivering (the test pattern), vivid's stall must stop the pings all the same.
@pytest.mark.parametrize("cameras", [["vivid"], ["vivid", "test-pattern"]], ids=["one camera", "two cameras"])
def test_watchdog_pings_stop_while_vivid_stalls_and_resume_after(vivid, tmp_path, cameras):
    tool(["ip", "link", "set", "lo", "up"])   # the viewer server listens on 127.0.0.1
    manager = NotifySocket(str(tmp_path / "notify.sock"))
    dropped = find_control(vivid, "dropped", "buffers")
    env = dict(os.environ, NOTIFY_SOCKET=manager.path, WATCHDOG_USEC="2000000")   # a ping each second
    devices = [arg for camera in cameras for arg in ("--device", camera)]
    # By card name; a long frame timeout, so the stall is the watchdog's to notice, not the capturer's.
    proc = subprocess.Popen([BIN, "publish", *devices, "--size", "320x180", "--fps", "15", "--audio", "none",
                             "--listen", "127.0.0.1:0", "--open", "--frame-timeout", "300"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "camagent.log", "w"), env=env)
    try:
        manager.wait_for(lambda m: "READY=1" in m.split("\n"), 120, "READY=1")
        for _ in range(2):
            manager.wait_for(lambda m: m.startswith("WATCHDOG=1"), 30, "WATCHDOG=1 while vivid delivers")
        set_control(vivid, dropped, 100)   # vivid keeps streaming but returns no buffer: a stalled camera
        try:
            stalled = manager.wait_for(lambda m: m.startswith("STATUS=No frame"), 30, "the stall status")
            # Hold the stall for several ping intervals; a ping in that window would be a failure.
            time.sleep(5)
        finally:
            set_control(vivid, dropped, 0)
        resumed = manager.wait_for(lambda m: "Frames flowing again" in m, 30, "pings resuming")
        manager.wait_for(lambda m: m.startswith("WATCHDOG=1"), 30, "WATCHDOG=1 after the stall")
        assert proc.poll() is None, open(tmp_path / "camagent.log").read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, open(tmp_path / "camagent.log").read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    texts = [m for _, m in manager.messages]
    during = texts[stalled + 1:resumed]
    assert not any("WATCHDOG=1" in m for m in during), during
    assert texts[resumed].startswith("WATCHDOG=1"), texts[resumed]
    # The status goes back to what READY=1 said.
    assert "STATUS=Frames flowing again: Publishing /dev/video0 320x180" in texts[resumed], texts[resumed]
    times = [t for t, _ in manager.messages]
    assert times[resumed] - times[stalled] > 3 * 1.0, "the stall lasted less than three ping intervals"


def streaming(device, *args):
    return subprocess.Popen([BIN, "capture", "--device", device, "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc, needle, timeout):
    """The first stderr line with `needle` in it, read through the process's PipeLines."""
    if not hasattr(proc, "stderr_lines"):
        proc.stderr_lines = PipeLines(proc.stderr)
    seen = []
    deadline = time.monotonic() + timeout
    while (line := proc.stderr_lines.next(deadline)) is not None:
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError(f"no '{needle}' within {timeout} s; stderr so far: {''.join(seen)[-3000:]}")


def video_gid():
    return int(tool(["getent", "group", "video"]).stdout.split(":")[2])


def give_to_video_group(node):
    """What udev's rule does for a new V4L2 node (the guest has no udev)."""
    os.chown(node, 0, video_gid())
    os.chmod(node, 0o660)


@pytest.mark.parametrize("form", ["card", "by-id"])
def test_a_named_camera_is_found_again_under_another_node_number(vivid, vivid_back_at_video0, form):
    """vivid's Disconnect is a one-shot error: its node opens again at once, so
    camagent (as root) would take it back before the module could be unloaded.
    So camagent runs as a user in the video group, and the old node is closed to
    it before the unplug: it waits, holding nothing, while vivid is reloaded as
    /dev/video5, which then gets udev's group and mode."""
    give_to_video_group(vivid)
    if form == "by-id":
        os.makedirs(os.path.dirname(BY_ID), exist_ok=True)
        os.symlink("../../video0", BY_ID)
    name = "vivid" if form == "card" else BY_ID
    proc = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", f"--groups={video_gid()}", BIN, "capture",
                             "--device", name, "--json", "--size", "320x180", "--reconnect", "--duration", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/tmp")
    try:
        wait_for_line(proc, "capturing", 60)
        os.chmod(vivid, 0)   # the open descriptor keeps working; a new open is refused
        set_control(vivid, find_control(vivid, "disconnect"), 1)
        wait_for_line(proc, "device lost", 30)
        reload_vivid_with(MOVED_OPTS, "/dev/video5")
        assert not os.path.exists(vivid)
        give_to_video_group("/dev/video5")
        if form == "by-id":
            os.remove(BY_ID)
            os.symlink("../../video5", BY_ID)   # what udev does when the camera comes back
        line = wait_for_line(proc, "reconnected", 60)
        assert "/dev/video5" in line, line
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    summary = last_json(out)
    assert summary["reconnects"] == 1 and summary["frames"] > 0, summary


def test_devices_names_the_camera_by_card_and_link(vivid, vivid_back_at_video0):
    os.makedirs(os.path.dirname(BY_ID), exist_ok=True)
    os.symlink("../../video0", BY_ID)
    listing = json.loads(tool([BIN, "devices", "--json"]).stdout)["video"]
    ours = [d for d in listing if d["path"] == vivid]
    assert ours and ours[0]["names"] == [BY_ID, "vivid"], ours
    assert ours[0]["stableNames"] == [BY_ID] and "usbID" not in ours[0]   # vivid is no USB device
    text = tool([BIN, "devices"]).stdout
    assert f"also --device {BY_ID}" in text and "also --device vivid" in text, text
    described = json.loads(tool([BIN, "devices", "--json", "--device", BY_ID]).stdout)["video"]
    assert [d["path"] for d in described] == [vivid]


def test_install_service_then_only_the_video_group_may_capture(vivid, tmp_path):
    env = dict(os.environ, CAMAGENT_PREFIX="/var/local", CAMAGENT_BIN=BIN)
    for _ in range(2):   # idempotent: the second run finds everything in place
        proc = subprocess.run([os.path.join(ROOT, "scripts", "install"), "--service"], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "systemd is not running here" in proc.stdout, proc.stdout
    groups = tool(["id", "-nG", "camagent"]).stdout.split()
    assert {"video", "audio"} <= set(groups), groups
    st = os.stat("/var/lib/camagent")
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == int(tool(["id", "-u", "camagent"]).stdout)
    unit = "/etc/systemd/system/camagent.service"
    assert "ExecStart=/var/local/bin/camagent publish" in open(unit).read()
    verify = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0 and "camagent" not in verify.stdout + verify.stderr, verify.stderr

    # udev's rule for V4L2 nodes: group video, mode 0660.
    give_to_video_group(vivid)
    installed = "/var/local/bin/camagent"
    try:
        outsider = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", installed,
                                   "capture", "--device", vivid, "--frames", "1"],
                                  capture_output=True, text=True, timeout=120, cwd="/tmp")
        assert outsider.returncode == EXIT_PERMISSION, outsider.stderr
        assert "permission denied" in outsider.stderr and "video" in outsider.stderr, outsider.stderr
        member = subprocess.run(["setpriv", "--reuid=camagent", "--regid=camagent", "--init-groups", installed,
                                 "capture", "--device", "vivid", "--size", "320x180", "--frames", "5", "--json"],
                                capture_output=True, text=True, timeout=120, cwd="/tmp")
        assert member.returncode == 0, member.stderr
        assert last_json(member.stdout)["frames"] == 5
    finally:
        os.chmod(vivid, 0o600)
        os.chown(vivid, 0, 0)


def test_publishing_vivid_and_alsa_does_nothing_the_units_hardening_forbids(vivid, tmp_path):
    tool(["ip", "link", "set", "lo", "up"])
    proc, calls = traced([BIN, "publish", "--device", "vivid", "--size", "320x180", "--fps", "15",
                          "--audio", "hw:Loopback,1,0", "--listen", "127.0.0.1:0", "--open", "--duration", "5"],
                         tmp_path / "strace.log", timeout=300, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The real devices were opened and streamed from.
    assert any(c.startswith('openat(AT_FDCWD, "/dev/video0"') and "= -" not in c for c in calls)
    assert any(c.startswith('openat(AT_FDCWD, "/dev/snd/pcmC') and "= -" not in c for c in calls)
    assert any(c.startswith("ioctl(") and "VIDIOC_DQBUF" in c for c in calls)
    found = problems(calls)
    assert not found, "\n".join(found[:20])
