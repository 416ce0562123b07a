"""packaging/camagent.service, checked without a running systemd.

`systemd-analyze verify` (Debian's systemd package, installed by
scripts/install --test) loads the unit as systemd would and reports unknown
keys, bad values and a missing ExecStart binary; the ExecStart path is pointed
at the binary under test, since nothing is installed in /usr/local here. The
unit's SystemCallFilter and RestrictAddressFamilies are checked against what
camagent really does: strace records a publish of the test pattern with a
viewer server, and every system call and socket family it used must be allowed.
"""
import os
import re
import subprocess

import pytest

from conftest import BIN, UNIT


def unit_directives(text):
    """{key: [values]} of the unit (keys may repeat, as DeviceAllow= does)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def verify(text, tmp_path):
    """systemd-analyze verify on `text` as camagent.service, ExecStart pointed at the binary under test."""
    unit = tmp_path / "camagent.service"
    unit.write_text(text.replace("ExecStart=/usr/local/bin/camagent ", f"ExecStart={BIN} "))
    proc = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=120)
    # Warnings about the host's own units are not ours; any line naming this unit is.
    ours = [l for l in (proc.stdout + proc.stderr).splitlines() if "camagent" in l]
    return proc.returncode, ours


def test_the_unit_passes_systemd_analyze_verify(tmp_path):
    code, messages = verify(open(UNIT).read(), tmp_path)
    assert code == 0 and not messages, messages


def test_verify_would_catch_a_broken_unit(tmp_path):
    """The check above can fail: a misspelt key and a missing binary are reported."""
    broken = open(UNIT).read().replace("ProtectHome=yes", "ProtectHomes=yes")
    code, messages = verify(broken, tmp_path)
    assert any("ProtectHomes" in m for m in messages), messages
    missing = open(UNIT).read().replace("/usr/local/bin/camagent ", "/nonexistent/camagent ")
    unit = tmp_path / "missing.service"
    unit.write_text(missing)
    proc = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "/nonexistent/camagent" in proc.stderr, proc.stderr


def test_the_unit_says_what_the_kiosk_needs():
    d = unit_directives(open(UNIT).read())
    assert d["Type"] == ["notify"] and d["NotifyAccess"] == ["main"]
    assert d["Restart"] == ["on-failure"]
    assert int(d["WatchdogSec"][0]) > 0
    assert d["User"] == ["camagent"] and set(d["SupplementaryGroups"][0].split()) == {"video", "audio"}
    assert d["StateDirectory"] == ["camagent"] and d["StateDirectoryMode"] == ["0700"]
    assert d["ExecStart"][0].startswith("/usr/local/bin/camagent publish")
    assert d["DevicePolicy"] == ["closed"]
    assert sorted(d["DeviceAllow"]) == ["char-alsa rw", "char-video4linux rw"]
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert d[key] == ["yes"], key
    assert d["ProtectSystem"] == ["strict"]
    assert "PrivateDevices" not in d, "PrivateDevices= would hide the cameras"


def syscall_set(group, seen=None):
    """The system calls a @group allows, nested groups expanded (systemd-analyze syscall-filter)."""
    seen = set() if seen is None else seen
    if group in seen:
        return set()
    seen.add(group)
    out = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        calls |= syscall_set(name, seen) if name.startswith("@") else {name}
    return calls


def test_publish_stays_within_the_units_system_call_filter_and_address_families(tmp_path):
    d = unit_directives(open(UNIT).read())
    allowed = set()
    for group in d["SystemCallFilter"][0].split():
        allowed |= syscall_set(group) if group.startswith("@") else {group}
    assert "ioctl" in allowed and "sendto" in allowed  # the expansion worked
    families = set(d["RestrictAddressFamilies"][0].split())

    trace = tmp_path / "strace.log"
    proc = subprocess.run(["strace", "-f", "-qq", "-o", str(trace), BIN, "publish", "--device", "test-pattern",
                           "--size", "320x240", "--fps", "15", "--audio", "test-tone", "--listen", "127.0.0.1:0",
                           "--duration", "4"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    used, used_families = set(), set()
    for line in open(trace):
        m = re.match(r"\d+\s+([a-z0-9_]+)\(", line)
        if m:
            used.add(m.group(1))
        m = re.search(r"\bsocket\((AF_[A-Z0-9]+)", line)
        if m:
            used_families.add(m.group(1))
    assert "execve" in used and len(used) > 20, sorted(used)
    assert not (used - allowed), f"system calls outside SystemCallFilter: {sorted(used - allowed)}"
    assert used_families and not (used_families - families), \
        f"socket families outside RestrictAddressFamilies: {sorted(used_families - families)}"
