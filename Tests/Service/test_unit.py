"""packaging/camagent.service, checked without a running systemd.

`systemd-analyze verify` (Debian's systemd package, installed by
scripts/install --test) loads the unit as systemd would and reports unknown
keys, bad values and a missing ExecStart binary; the ExecStart path is pointed
at the binary under test, since nothing is installed in /usr/local here. The
unit's hardening is checked against what camagent really does (unit_checks.py):
strace records a publish of the test pattern with a viewer server, and no
call it made may be one the unit forbids.
"""
import subprocess

from conftest import BIN, UNIT
from unit_checks import problems, traced, unit_directives


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
    d = unit_directives()
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


def test_publish_does_nothing_the_units_hardening_forbids(tmp_path):
    proc, calls = traced([BIN, "publish", "--device", "test-pattern", "--size", "320x240", "--fps", "15",
                          "--audio", "test-tone", "--listen", "127.0.0.1:0", "--duration", "4"],
                         tmp_path / "strace.log", timeout=180, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(c.startswith("execve(") for c in calls) and len(calls) > 1000, len(calls)
    assert any(c.startswith("socket(AF_INET") for c in calls)   # the viewer server was traced
    found = problems(calls)
    assert not found, "\n".join(found[:20])


def test_the_hardening_check_catches_what_it_looks_for(tmp_path):
    """problems() can fail: calls each directive forbids are each reported."""
    calls = [
        'socket(AF_PACKET, SOCK_RAW, 768) = 3',
        'mmap(NULL, 4096, PROT_READ|PROT_WRITE|PROT_EXEC, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000',
        'openat(AT_FDCWD, "/dev/sda", O_RDONLY) = 4',
        'openat(AT_FDCWD, "/etc/camagent.conf", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 5',
        'openat(AT_FDCWD, "/root/.config/x", O_RDONLY) = 6',
        'kexec_load(0, 0, NULL, 0) = -1 EPERM (Operation not permitted)',
        'openat(AT_FDCWD, "/dev/video0", O_RDWR|O_NONBLOCK|O_CLOEXEC) = 7',
        'openat(AT_FDCWD, "/dev/snd/pcmC0D0c", O_RDWR|O_NONBLOCK|O_CLOEXEC) = 8',
        'openat(AT_FDCWD, "/var/lib/camagent/token", O_WRONLY|O_CREAT, 0600) = 9',
    ]
    found = problems(calls)
    for directive in ("RestrictAddressFamilies", "MemoryDenyWriteExecute", "DevicePolicy=closed",
                      "ProtectSystem=strict", "ProtectHome", "SystemCallFilter"):
        assert any(f.startswith(directive) for f in found), (directive, found)
    assert not any("/dev/video0" in f or "/dev/snd/" in f or "/var/lib/camagent" in f for f in found), found
