"""Shared helpers for the device tests.

These tests run inside the test VM (scripts/vm-test), against real drivers:
vivid, v4l2loopback, snd-aloop and snd-dummy. They drive the camagent binary
(CAMAGENT_BIN, default .build/release/camagent) and compare what it says with
tools nobody on this team wrote (v4l2-ctl, ffmpeg, aplay, sox).
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CAMAGENT_BIN", os.path.join(ROOT, ".build", "release", "camagent"))

# Exit codes, as documented in README.md.
EXIT_USAGE = 64
EXIT_NO_SUCH_DEVICE = 66
EXIT_NOT_CAPTURE = 67
EXIT_BUSY = 68
EXIT_UNSUPPORTED = 69
EXIT_DRIVER = 70
EXIT_DEVICE_LOST = 74
EXIT_TIMEOUT = 75


def in_vm():
    return os.environ.get("CAMAGENT_IN_VM") == "1"


def run(args, timeout=120, check=False, **kw):
    """Runs camagent with args; returns CompletedProcess (text)."""
    proc = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"camagent {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def last_json(stdout):
    """The JSON object on the last non-empty line of stdout."""
    lines = [l for l in stdout.splitlines() if l.strip()]
    assert lines, "no output"
    return json.loads(lines[-1])


def tool(args, timeout=60, check=True):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def v4l2_list_formats(device):
    """Parses `v4l2-ctl --list-formats-ext` into {fourcc: {(w, h): [fps...]}}."""
    out = tool(["v4l2-ctl", "-d", device, "--list-formats-ext"]).stdout
    formats = {}
    fourcc = size = None
    for line in out.splitlines():
        m = re.match(r"\s*\[\d+\]: '([^']+)'", line)
        if m:
            fourcc = m.group(1)
            formats[fourcc] = {}
            continue
        m = re.match(r"\s*Size: Discrete (\d+)x(\d+)", line)
        if m and fourcc:
            size = (int(m.group(1)), int(m.group(2)))
            formats[fourcc][size] = []
            continue
        m = re.match(r"\s*Interval: Discrete [\d.]+s \(([\d.]+) fps\)", line)
        if m and fourcc and size:
            formats[fourcc][size].append(float(m.group(1)))
    return formats


def v4l2_controls(device):
    """Maps control names (as v4l2-ctl prints them) to their description line."""
    out = tool(["v4l2-ctl", "-d", device, "-L"]).stdout
    controls = {}
    for line in out.splitlines():
        m = re.match(r"\s*([a-z0-9_]+) 0x[0-9a-f]+ \((\w+)\)", line)
        if m:
            controls[m.group(1)] = line.strip()
    return controls


def find_control(device, *words):
    """The name of the first control whose name contains all words."""
    for name in v4l2_controls(device):
        if all(w in name for w in words):
            return name
    raise AssertionError(f"{device} has no control with {words}: {sorted(v4l2_controls(device))}")


def set_control(device, name, value):
    tool(["v4l2-ctl", "-d", device, "-c", f"{name}={value}"])


def rate_by_rule(rates, desired):
    """The project's rule, computed independently: highest <= desired, else lowest."""
    at_or_below = [r for r in rates if r <= desired + 0.001]
    return max(at_or_below) if at_or_below else min(rates)


@pytest.fixture(scope="session")
def vivid():
    dev = os.environ.get("CAMAGENT_VIVID_CAPTURE", "/dev/video0")
    assert os.path.exists(dev), f"vivid capture node {dev} missing: is the test VM running?"
    return dev


@pytest.fixture
def reload_vivid(vivid):
    """Reloads vivid after a test that disconnected it, so later tests have it back."""
    yield
    if not os.path.exists(vivid) or subprocess.run(["v4l2-ctl", "-d", vivid, "--all"], capture_output=True).returncode != 0:
        reload_vivid_now(vivid)


def reload_vivid_now(vivid):
    reload_module("vivid", "CAMAGENT_VIVID_MODPROBE_OPTS", [vivid], f"{vivid} back after reload")


def reload_loopback(*nodes):
    """Loads v4l2loopback afresh and waits for `nodes`: v4l2loopback 0.12.7 keeps
    showing a capture side (and the old format) after a writer leaves, and the next
    writer then fails (ffmpeg: VIDIOC_G_FMT: Invalid argument)."""
    reload_module("v4l2loopback", "CAMAGENT_LOOPBACK_MODPROBE_OPTS", nodes, "loopback nodes")


def reload_module(module, options_variable, nodes, what):
    """Unloads `module` (retrying while its users let go), loads it again with the options
    in $options_variable, and waits for its device `nodes`."""
    opts = os.environ.get(options_variable, "").split()
    for _ in range(50):
        if subprocess.run(["modprobe", "-r", module], capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    tool(["modprobe", module] + opts)
    wait_for(lambda: all(os.path.exists(n) for n in nodes), 30, what)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def have(cmd):
    return shutil.which(cmd) is not None
