"""What camagent.service's hardening forbids, checked against what camagent really does.

No systemd runs where the tests run, so the unit cannot be started. Instead
`strace -f` records camagent (publishing the test pattern on the host, vivid
and an ALSA card in the test VM), and each directive that could stop it is
compared with the calls it made:

- SystemCallFilter= (groups expanded by `systemd-analyze syscall-filter`);
- RestrictAddressFamilies= (the families of socket());
- MemoryDenyWriteExecute= (no mapping both writable and executable);
- DevicePolicy=closed with DeviceAllow= (only V4L2, ALSA and the pseudo
  devices systemd always allows are opened);
- ProtectSystem=strict (nothing opened for writing outside /dev, /proc, /tmp,
  /var/tmp and the state directory);
- ProtectHome= (nothing opened under /home, /root or /run/user).
Used by Tests/Service/test_unit.py and Tests/Device/test_service.py.
"""
import os
import re
import subprocess

UNIT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "packaging", "camagent.service")

# DevicePolicy=closed still allows these (systemd.resource-control(5)).
PSEUDO_DEVICES = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"}
DEVICE_CLASSES = {"char-video4linux": ("/dev/video", "/dev/v4l/"), "char-alsa": ("/dev/snd/",)}
WRITABLE = ("/dev/", "/proc/", "/tmp/", "/var/tmp/", "/var/lib/camagent/")
HOME = ("/home/", "/root/", "/run/user/")


def unit_directives(path=UNIT):
    """{key: [values]} of the unit (keys may repeat, as DeviceAllow= does)."""
    out = {}
    for line in open(path).read().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


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


def traced(command, trace_path, **kw):
    """Runs command under strace -f; returns (CompletedProcess, the calls as whole lines)."""
    proc = subprocess.run(["strace", "-f", "-qq", "-s", "256", "-o", str(trace_path)] + list(command),
                          capture_output=True, text=True, **kw)
    calls, pending = [], {}
    for line in open(trace_path):
        line = line.rstrip("\n")
        m = re.match(r"(\d+)\s+(.*)$", line)
        if not m:
            continue
        pid, rest = m.groups()
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = re.match(r"<\.\.\. \w+ resumed>\s?(.*)$", rest)
        if resumed:
            rest = pending.pop(pid, "") + resumed.group(1)
        calls.append(rest)
    return proc, calls


def problems(calls, unit_path=UNIT):
    """Every call the unit's hardening would refuse, as readable lines (empty: none)."""
    d = unit_directives(unit_path)
    found = []
    allowed = set()
    for group in d["SystemCallFilter"][0].split():
        allowed |= syscall_set(group) if group.startswith("@") else {group}
    assert "ioctl" in allowed and "sendto" in allowed, "the syscall group expansion failed"
    families = set(d["RestrictAddressFamilies"][0].split())
    device_prefixes = tuple(p for entry in d.get("DeviceAllow", []) for p in DEVICE_CLASSES.get(entry.split()[0], ()))
    for call in calls:
        m = re.match(r"([a-z0-9_]+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+|\?)", call)
        if not m:
            continue
        name, args, result = m.groups()
        ok = result != "?" and not result.startswith("-")
        if name not in allowed:
            found.append(f"SystemCallFilter: {call}")
        if name == "socket":
            family = args.split(",")[0]
            if family not in families:
                found.append(f"RestrictAddressFamilies: {call}")
        if name in ("mmap", "mprotect", "pkey_mprotect") and "PROT_WRITE" in args and "PROT_EXEC" in args:
            found.append(f"MemoryDenyWriteExecute: {call}")
        if name in ("openat", "open") and ok:
            p = re.search(r'"([^"]*)"', args)
            if not p:
                continue
            path = p.group(1)
            writing = re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args)
            if path.startswith("/dev/") and path not in PSEUDO_DEVICES and not path.startswith(device_prefixes) \
                    and not path.startswith(("/dev/shm/", "/dev/pts/")):
                found.append(f"DevicePolicy=closed: {call}")
            if writing and path.startswith("/") and not path.startswith(WRITABLE):
                found.append(f"ProtectSystem=strict: {call}")
            if path.startswith(HOME):
                found.append(f"ProtectHome: {call}")
    return found
