"""The viewer token in a file (as the service keeps it) and `camagent status`.

`publish --viewer-token-file` makes the file (mode 0600, a random token) when
missing and then never prints the token; `camagent status` reads the running
publisher's /stats with it and prints the state and the whole viewer URL. The
token is checked against the server itself (/stats with and without it).
"""
import json
import os
import signal
import stat
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import BIN, run

EXIT_SECRET_FILE = 78
EXIT_UNREACHABLE = 80
EXIT_UNAUTHORIZED = 81


class Publisher:
    def __init__(self, tmp_path, token_file, cameras=1):
        # Port 0: the kernel picks a free one and the serving event says which (a port found free
        # beforehand could be taken by someone else before camagent binds it).
        self.port = None
        self.out_path = tmp_path / "stdout.jsonl"
        self.err_path = tmp_path / "stderr.log"
        devices = ["--device", "test-pattern"] * cameras
        self.proc = subprocess.Popen([BIN, "publish", *devices, "--size", "320x240", "--audio", "none",
                                      "--listen", "127.0.0.1:0", "--viewer-token-file", str(token_file),
                                      "--json"], stdout=open(self.out_path, "w"), stderr=open(self.err_path, "w"))

    def serving(self, timeout=60):
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in open(self.out_path):
                if line.startswith("{") and json.loads(line).get("event") == "serving":
                    event = json.loads(line)
                    self.port = event["port"]
                    return event
            assert self.proc.poll() is None, open(self.err_path).read()[-3000:]
            time.sleep(0.1)
        raise AssertionError("no serving event in 60 s:\n" + open(self.err_path).read()[-3000:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def output(self):
        return open(self.out_path).read() + open(self.err_path).read()


@pytest.fixture
def publisher(tmp_path):
    made = []
    yield lambda token_file, cameras=1: made.append(Publisher(tmp_path, token_file, cameras)) or made[-1]
    for p in made:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(timeout=30)


def stats_status(port, token):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/stats")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_token_file_is_made_kept_secret_and_status_shows_the_url(tmp_path, publisher):
    token_file = tmp_path / "viewer-token"
    pub = publisher(token_file)
    serving = pub.serving()
    mode = stat.S_IMODE(os.stat(token_file).st_mode)
    assert mode == 0o600, oct(mode)
    token = token_file.read_text().strip()
    assert len(token) == 64 and int(token, 16) >= 0
    # The server takes that token, and only it.
    assert stats_status(pub.port, token) == 200
    assert stats_status(pub.port, None) == 401
    # Never printed: not in the serving event, not on stderr.
    assert serving.get("token") is None and serving["tokenFile"] == str(token_file), serving
    assert "?token=" not in serving["url"]

    status = run(["status", "--url", f"http://127.0.0.1:{pub.port}", "--viewer-token-file", str(token_file)])
    assert status.returncode == 0, status.stderr
    assert "state:     serving" in status.stdout, status.stdout
    assert "viewers:   0 connected" in status.stdout
    viewer = [l for l in status.stdout.splitlines() if l.startswith("viewer:")]
    assert viewer and viewer[0].endswith(f":{pub.port}/?token={token}"), status.stdout
    as_json = run(["status", "--url", f"http://127.0.0.1:{pub.port}", "--viewer-token-file", str(token_file), "--json"])
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["state"] == "serving", as_json.stdout

    assert pub.stop() == 0
    assert token not in pub.output()


def test_an_existing_token_file_is_used_as_it_is(tmp_path, publisher):
    token_file = tmp_path / "viewer-token"
    token = "kiosk-viewer-token-0123456789abcdefghij"
    token_file.write_text(token + "\n")
    pub = publisher(token_file)
    pub.serving()
    assert stats_status(pub.port, token) == 200
    assert token_file.read_text() == token + "\n"
    assert pub.stop() == 0
    assert token not in pub.output()


def test_status_says_what_went_wrong(tmp_path, publisher):
    token_file = tmp_path / "viewer-token"
    pub = publisher(token_file)
    pub.serving()
    url = f"http://127.0.0.1:{pub.port}"
    wrong = run(["status", "--url", url, "--viewer-token", "x" * 40])
    assert wrong.returncode == EXIT_UNAUTHORIZED and "not this publisher's" in wrong.stderr, wrong.stderr
    missing = run(["status", "--url", url, "--viewer-token-file", str(tmp_path / "none")])
    assert missing.returncode == EXIT_UNAUTHORIZED and "no token was sent" in missing.stderr, missing.stderr
    short = tmp_path / "short"
    short.write_text("abc\n")
    too_short = run(["status", "--url", url, "--viewer-token-file", str(short)])
    assert too_short.returncode == EXIT_SECRET_FILE, too_short.stderr
    assert pub.stop() == 0
    nobody = run(["status", "--url", url, "--viewer-token-file", str(token_file)])
    assert nobody.returncode == EXIT_UNREACHABLE and "is camagent publish running" in nobody.stderr, nobody.stderr


def test_publish_refuses_a_token_file_it_cannot_use(tmp_path):
    short = tmp_path / "short"
    short.write_text("abc\n")
    proc = run(["publish", "--device", "test-pattern", "--audio", "none", "--listen", "127.0.0.1:0",
                "--viewer-token-file", str(short), "--duration", "1"])
    assert proc.returncode == EXIT_SECRET_FILE and str(short) in proc.stderr, proc.stderr
    both = run(["publish", "--open", "--viewer-token-file", str(short), "--duration", "1"])
    assert both.returncode == 64, both.stderr


def test_status_shows_every_camera(tmp_path, publisher):
    token_file = tmp_path / "viewer-token"
    pub = publisher(token_file, cameras=2)
    pub.serving()
    status = run(["status", "--url", f"http://127.0.0.1:{pub.port}", "--viewer-token-file", str(token_file)])
    assert status.returncode == 0, status.stderr
    token = token_file.read_text().strip()
    lines = status.stdout.splitlines()
    assert lines[0] == "camera 1:" and "camera 2:" in lines and "camera 3:" not in lines, status.stdout
    viewers = [l for l in lines if l.startswith("viewer:")]
    assert len(viewers) == 2, status.stdout
    assert viewers[0].endswith(f":{pub.port}/?token={token}") and viewers[1].endswith(f":{pub.port}/cameras/2/?token={token}"), viewers
    as_json = run(["status", "--url", f"http://127.0.0.1:{pub.port}", "--viewer-token-file", str(token_file), "--json"])
    assert as_json.returncode == 0 and len([json.loads(l) for l in as_json.stdout.splitlines()]) == 2, as_json.stdout
    assert pub.stop() == 0, pub.output()
