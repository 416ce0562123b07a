"""The configuration file (/etc/camagent/camagent.toml, or --config): every
option of publish, subscribe and router is a key of its section, the command
line overrides the file, and every mistake names the key and its line (exit 65).
`camagent check-config` validates the file and prints the settings in effect."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import BIN, ROOT, run

EXIT_CONFIG = 65
EXIT_UNREACHABLE = 80
COMMANDS = ("publish", "subscribe", "router")
EXAMPLE = os.path.join(ROOT, "packaging", "camagent.toml")


def write(tmp_path, text, name="camagent.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def check_config(*args):
    proc = run(["check-config", *args, "--json"])
    report = json.loads(proc.stdout) if proc.returncode == 0 else None
    return proc, report


def options_in_help(command):
    """The long options `camagent COMMAND --help` shows: what a user can type."""
    proc = run([command, "--help"])
    assert proc.returncode == 0, proc.stderr
    names = set(re.findall(r"--([a-z0-9][a-z0-9-]*)", proc.stdout))
    # --x/--no-x is one switch: its key is x.
    names -= {n for n in names if n.startswith("no-") and n[3:] in names}
    return names - {"help", "config"}


def test_every_option_of_the_three_commands_is_a_key(tmp_path):
    proc, report = check_config("--config", write(tmp_path, "[publish]\n"))
    assert proc.returncode == 0, proc.stderr
    for command in COMMANDS:
        keys = {s["key"] for s in report["sections"][command]}
        assert keys == options_in_help(command), command


def test_the_file_sets_publish_and_the_command_line_overrides_it(tmp_path):
    config = write(tmp_path, """
# a kiosk
[publish]
device = "test-pattern"
size = "640x480"
fps = 15
audio = "none"
listen = "127.0.0.1:0"
duration = 2
json = true
reconnect = true
""")
    # --no-reconnect beside the file's reconnect = true: the command line's switch wins, no conflict.
    proc = run(["publish", "--config", config, "--size", "320x240", "--no-reconnect"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    negotiated = [json.loads(l) for l in proc.stdout.splitlines() if '"negotiated"' in l]
    assert negotiated, proc.stdout[:2000]
    assert negotiated[0]["size"] == "320x240"      # the command line
    assert negotiated[0]["fps"] == 15              # the file
    assert negotiated[0]["listen"] == "127.0.0.1:0"


def test_the_router_reads_its_section(tmp_path):
    secret = tmp_path / "router.secret"
    # Port 0 (the kernel's pick, said in the listening line): a port found free beforehand could be
    # taken before the router binds it. The file's host, not the default's, shows the file was read.
    config = write(tmp_path, f'[router]\nlisten = "127.0.0.1:0"\nsecret-file = "{secret}"\nmax-sessions = 3\n')
    proc = subprocess.Popen([BIN, "router", "--config", config], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.startswith("router: listening"):
                break
        assert any(re.fullmatch(r"router: listening on http://127\.0\.0\.1:[1-9][0-9]*", l) for l in lines), \
            (lines, proc.stderr.read() if proc.poll() is not None else "")
        assert f"secret: created {secret}" in lines
        assert secret.exists() and (secret.stat().st_mode & 0o777) == 0o600
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_subscribe_reads_its_section(tmp_path):
    # Nothing listens on port 9 of loopback: the file's WHEP URL is what subscribe tried.
    config = write(tmp_path, '[subscribe]\nwhep = "http://127.0.0.1:9/whep"\nhttp-timeout = 3\n')
    proc = run(["subscribe", "--config", config], timeout=60)
    assert proc.returncode == EXIT_UNREACHABLE, (proc.returncode, proc.stderr)
    assert "127.0.0.1:9" in proc.stderr, proc.stderr


MISTAKES = {
    "unknown key": ('[publish]\nfps = 15\nframe_rate = 10\n', 3, "unknown key [publish] frame_rate"),
    "bad value": ('[publish]\nfps = 15\nsize = "12x"\n', 3, '[publish] size = "12x": The value \'12x\' is invalid'),
    "value out of range": ('[publish]\n\nbitrate = 5\n', 3, "[publish] bitrate = 5: --bitrate takes 50 to 50000"),
    "switch not a boolean": ('[publish]\nreconnect = "yes"\n', 2, '[publish] reconnect is a switch: write true or false, not "yes"'),
    "list for one value": ('[publish]\nsize = ["1x1", "2x2"]\n', 2, "[publish] size takes one value, not a list"),
    "unknown section": ('[publish]\nfps = 15\n\n[publsh]\nfps = 5\n', 4, "unknown section [publsh]"),
    "key outside a section": ('# top\nfps = 15\n[publish]\n', 2, "'fps' is outside a section"),
    "not TOML": ('[publish]\nfps = 15\nsize = \n', 3, "not valid TOML"),
    "a bad key of another section": ('[publish]\nfps = 15\n[router]\nlisten = "nowhere"\n', 4, "[router] listen"),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_a_mistake_names_the_key_and_line(tmp_path, name):
    text, line, message = MISTAKES[name]
    config = write(tmp_path, text)
    proc = run(["check-config", "--config", config])
    assert proc.returncode == EXIT_CONFIG, (proc.returncode, proc.stdout, proc.stderr)
    assert f"{config}:{line}: " in proc.stderr and message in proc.stderr, proc.stderr
    if name == "a bad key of another section":
        return   # publish reads [publish] only: the router's key stops the router, not publish
    # publish refuses to start on it, with the same words.
    proc = run(["publish", "--config", config, "--duration", "1", "--audio", "none", "--listen", "127.0.0.1:0"])
    assert proc.returncode == EXIT_CONFIG, (proc.returncode, proc.stderr)
    assert f"{config}:{line}: " in proc.stderr and message in proc.stderr, proc.stderr


def test_a_section_that_needs_the_command_line_is_valid_with_a_note(tmp_path):
    config = write(tmp_path, '[subscribe]\nvideo-out = "out.y4m"\n')
    proc, report = check_config("--config", config)
    assert proc.returncode == 0, proc.stderr
    assert report["notes"] == ["[subscribe] is not a whole command line by itself: give one of --session URL or --whep URL"]
    proc = run(["check-config", "--config", config])
    assert "note: [subscribe] is not a whole command line by itself" in proc.stdout


def test_the_command_line_can_mend_a_bad_value_of_the_file(tmp_path):
    config = write(tmp_path, '[publish]\nsize = "12x"\naudio = "none"\nlisten = "127.0.0.1:0"\nduration = 1\n')
    proc = run(["publish", "--config", config, "--size", "320x240", "--device", "test-pattern"])
    assert proc.returncode == 0, proc.stderr


def test_a_missing_config_file_is_an_error(tmp_path):
    missing = str(tmp_path / "nope.toml")
    for args in (["check-config", "--config", missing], ["publish", "--config", missing]):
        proc = run(args)
        assert proc.returncode == EXIT_CONFIG, proc.stderr
        assert f"{missing}: cannot read the configuration file: no such file" in proc.stderr


def test_help_is_shown_whatever_the_file_holds(tmp_path):
    proc = run(["publish", "--config", write(tmp_path, "not toml ="), "--help"])
    assert proc.returncode == 0 and "--config" in proc.stdout, proc.stderr


def test_check_config_prints_where_each_setting_comes_from(tmp_path):
    config = write(tmp_path, '[publish]\n\nsize = "640x480"\nreconnect = true\n')
    proc = run(["check-config", "--config", config])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{config}: valid"
    assert f'size = "640x480"  # {config}:3' in lines
    assert f"reconnect = true  # {config}:4" in lines
    assert "fps = 30.0  # default" in lines
    assert "whip-reconnect = true  # default" in lines
    assert "# whip: not set" in lines
    assert "[router]" in lines and 'listen = "127.0.0.1:8090"  # default' in lines


def test_the_shipped_example_is_valid_as_it_is_and_with_every_setting_uncommented(tmp_path):
    proc, report = check_config("--config", EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    assert all(s["source"] != "file" for section in report["sections"].values() for s in section)
    text = open(EXAMPLE).read()
    uncommented = re.sub(r"(?m)^#([a-z][a-z0-9-]* = )", r"\1", text)
    assert uncommented != text
    proc, report = check_config("--config", write(tmp_path, uncommented))
    assert proc.returncode == 0, proc.stderr
    set_keys = {(c, s["key"]) for c, section in report["sections"].items() for s in section if s["source"] == "file"}
    written = set()
    section = None
    for line in uncommented.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif re.match(r"^[a-z][a-z0-9-]* = ", line):
            written.add((section, line.split(" = ")[0]))
    assert set_keys == written


def test_the_default_path_is_read_when_there_is_no_config_option(tmp_path):
    """/etc/camagent/camagent.toml, in a mount namespace of the test's own so the host's /etc is untouched."""
    made = not os.path.isdir("/etc/camagent")
    os.makedirs("/etc/camagent", exist_ok=True)
    try:
        own = write(tmp_path, '[publish]\nsize = "640x480"\n')
        script = ("mount -t tmpfs camagent-test /etc/camagent && "
                  f"{BIN} check-config --json && cp {own} /etc/camagent/camagent.toml && {BIN} check-config --json")
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        without, with_file = [json.loads(l) for l in proc.stdout.splitlines()]
        assert "path" not in without
        assert with_file["path"] == "/etc/camagent/camagent.toml"
        size = next(s for s in with_file["sections"]["publish"] if s["key"] == "size")
        assert size == {"key": "size", "value": '"640x480"', "source": "file", "line": 2}
    finally:
        if made:
            os.rmdir("/etc/camagent")


def test_a_list_of_cameras_in_the_file_publishes_each(tmp_path):
    config = write(tmp_path, """
[publish]
device = ["test-pattern", "test-pattern"]
size = "320x240"
audio = "none"
listen = "127.0.0.1:0"
duration = 2
json = true
""")
    proc = run(["publish", "--config", config], timeout=60)
    assert proc.returncode == 0, proc.stderr
    serving = [e for e in map(json.loads, proc.stdout.splitlines()) if e.get("event") == "serving"]
    assert sorted(e["camera"] for e in serving) == [1, 2], proc.stdout[:2000]
    assert serving[0]["port"] == serving[1]["port"]
    # One --device on the command line replaces the file's whole list.
    proc = run(["publish", "--config", config, "--device", "test-pattern"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    serving = [e for e in map(json.loads, proc.stdout.splitlines()) if e.get("event") == "serving"]
    assert len(serving) == 1 and "camera" not in serving[0], serving
