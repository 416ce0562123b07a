"""What a service's user sees from the command line: log lines that suit the
journal (or a file, without escape sequences), --device names that match
nothing, output files that cannot be written (exit 73), and --rotate-pixels
with --mirror checked by pixels, on a host with no camera and no sound card."""
import base64
import contextlib
import hashlib
import hmac
import json
import os
import signal
import subprocess
import time
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

from conftest import BIN, EXIT_NO_SUCH_DEVICE, EXIT_USAGE, ROOT, run

sys.path.insert(0, os.path.join(ROOT, "Tests", "Device"))
from pattern import decode_counter, read_y4m  # noqa: E402


@contextlib.contextmanager
def killed_if_left(proc):
    """A process the block should have ended is killed when the block is left without that
    (an assertion, a timeout), so that no test leaves one running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def run_with_stderr_file(args, tmp_path, journal):
    """camagent with stderr in a file; with journal=True, JOURNAL_STREAM names that file, as systemd names its stream."""
    err_path = tmp_path / "stderr.log"
    with open(err_path, "w") as err:
        env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
        if journal:
            st = os.fstat(err.fileno())
            env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        proc = subprocess.run([BIN] + args, stdout=subprocess.PIPE, stderr=err, text=True, timeout=90, env=env)
    return proc, open(err_path).read()


PUBLISH_VERBOSE = ["publish", "--device", "test-pattern", "--size", "320x240", "--audio", "none",
                   "--listen", "127.0.0.1:0", "--duration", "2", "-v"]


def test_journal_lines_carry_syslog_priorities(tmp_path):
    proc, err = run_with_stderr_file(PUBLISH_VERBOSE, tmp_path, journal=True)
    assert proc.returncode == 0, err
    logged = [l for l in err.splitlines() if l.startswith("<")]
    assert logged, err
    assert all(l[:3] in ("<2>", "<3>", "<4>", "<5>", "<6>", "<7>") and l[3:].startswith("camagent") for l in logged), logged
    assert "<7>camagent" in err, "-v debug lines should be priority 7"
    assert "\x1b" not in err
    # A failure's line is filed as an error.
    proc, err = run_with_stderr_file(["capture", "--device", "/dev/video-nope", "--frames", "1"], tmp_path, journal=True)
    assert proc.returncode == EXIT_NO_SUCH_DEVICE
    assert "<3>camagent: /dev/video-nope: no such device" in err, err


def test_a_file_gets_plain_lines_without_escape_sequences_or_priorities(tmp_path):
    proc, err = run_with_stderr_file(PUBLISH_VERBOSE, tmp_path, journal=False)
    assert proc.returncode == 0, err
    assert "debug camagent" in err, err   # the logger wrote, at debug level
    assert "\x1b" not in err, repr(err[:500])
    assert not any(l.startswith(("<3>", "<7>")) for l in err.splitlines()), err


def test_a_card_name_that_matches_nothing_is_no_such_device():
    proc = run(["capture", "--device", "No Such Camera", "--frames", "1"])
    assert proc.returncode == EXIT_NO_SUCH_DEVICE, proc.stderr
    assert "No Such Camera: no such device" in proc.stderr and "no camera has that name" in proc.stderr, proc.stderr


def test_a_usb_id_that_matches_nothing_is_no_such_device_for_devices_too():
    proc = run(["devices", "--device", "usb:1234:5678"])
    assert proc.returncode == EXIT_NO_SUCH_DEVICE, proc.stderr
    assert "usb:1234:5678" in proc.stderr, proc.stderr


def test_a_missing_by_id_link_is_no_such_device():
    proc = run(["capture", "--device", "/dev/v4l/by-id/usb-Nobody_Cam-video-index0", "--frames", "1"])
    assert proc.returncode == EXIT_NO_SUCH_DEVICE, proc.stderr
    assert "no camera has that name" in proc.stderr, proc.stderr


def test_a_malformed_usb_id_is_a_usage_error():
    proc = run(["capture", "--device", "usb:46d:825", "--frames", "1"])
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "usb:VID:PID" in proc.stderr, proc.stderr


EXIT_OUTPUT = 73


@pytest.mark.parametrize("where", ["missing-directory", "a-directory", "full-device"])
def test_an_unwritable_video_output_is_exit_73(tmp_path, where):
    # A path in a directory that does not exist, a directory, and /dev/full (it opens,
    # every write fails with ENOSPC): each ends the capture with 73, naming the file and why.
    path, why = {"missing-directory": (str(tmp_path / "no-such-dir" / "out.y4m"), "No such file or directory"),
                 "a-directory": (str(tmp_path), "Is a directory"),
                 "full-device": ("/dev/full", "No space left on device")}[where]
    proc = run(["capture", "--device", "test-pattern", "--size", "160x120", "--frames", "5", "--output", path])
    assert proc.returncode == EXIT_OUTPUT, (proc.returncode, proc.stderr[-2000:])
    assert f"camagent: {path}: " in proc.stderr and why in proc.stderr, proc.stderr
    assert not (tmp_path / "no-such-dir").exists()


@pytest.mark.parametrize("where", ["missing-directory", "full-device"])
def test_an_unwritable_audio_output_is_exit_73(tmp_path, where):
    # --audio auto captures silence where there is no sound card (the default device where
    # there is one), into --audio-output.
    path, why = {"missing-directory": (str(tmp_path / "no-such-dir" / "mic.wav"), "No such file or directory"),
                 "full-device": ("/dev/full", "No space left on device")}[where]
    proc = run(["capture", "--audio", "auto", "--duration", "1", "--audio-output", path])
    assert proc.returncode == EXIT_OUTPUT, (proc.returncode, proc.stderr[-2000:])
    assert f"camagent: {path}: " in proc.stderr and why in proc.stderr, proc.stderr


@pytest.mark.parametrize("rotation, mirror", [("90", True), ("270", False), ("180", True)])
def test_rotate_pixels_turns_the_test_pattern(tmp_path, rotation, mirror):
    # The test pattern's frame N is the same picture in every run, so a capture with
    # --rotation R [--mirror] --rotate-pixels must be an upright capture's frames mirrored
    # (left-right) and then turned R degrees clockwise: every plane, every pixel. The
    # summary says so, and the file has the turned size.
    upright, turned = tmp_path / "upright.y4m", tmp_path / "turned.y4m"
    size = ["--device", "test-pattern", "--size", "320x240", "--frames", "3", "--json"]
    proc = run(["capture", *size, "--output", str(upright)])
    assert proc.returncode == 0, proc.stderr
    proc = run(["capture", *size, "--rotation", rotation, *(["--mirror"] if mirror else []), "--rotate-pixels",
                "--output", str(turned)])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    quarter = rotation in ("90", "270")
    assert (summary["width"], summary["height"]) == ((240, 320) if quarter else (320, 240)), summary
    before, after = read_y4m(upright), read_y4m(turned)
    assert len(before) == len(after) == 3
    assert [decode_counter(y) for y, _, _ in before] == [0, 1, 2]
    k = -int(rotation) // 90   # numpy's rot90 turns counter-clockwise
    for planes, turned_planes in zip(before, after):
        for plane, got in zip(planes, turned_planes):
            expected = np.rot90(np.fliplr(plane) if mirror else plane, k)
            assert got.shape == expected.shape and np.array_equal(got, expected), (rotation, mirror, got.shape)
    # The check can fail: the picture the other way round is not what came out.
    wrong = np.rot90(before[0][0] if mirror else np.fliplr(before[0][0]), k)
    assert not np.array_equal(after[0][0], wrong)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_duration_that_is_no_number_of_seconds_is_a_usage_error(value):
    proc = run(["capture", "--device", "test-pattern", f"--duration={value}"])
    assert proc.returncode == EXIT_USAGE, (proc.returncode, proc.stderr[-2000:])
    assert "--duration must be a positive number of seconds" in proc.stderr, proc.stderr


@pytest.mark.parametrize("value", ["inf", "1e16", "3601"])
def test_a_frame_timeout_beyond_an_hour_is_a_usage_error(value):
    # inf passed "> 0" and trapped when made into milliseconds (with a real device; the usage
    # check comes first, so the test pattern shows it as well).
    proc = run(["capture", "--device", "test-pattern", f"--frame-timeout={value}", "--frames", "1"])
    assert proc.returncode == EXIT_USAGE, (proc.returncode, proc.stderr[-2000:])
    assert "--frame-timeout must be between 0 and 3600 seconds" in proc.stderr, proc.stderr


def router_url(router):
    """The URL a `camagent router --listen 127.0.0.1:0` says it listens on (within 30 s)."""
    from pipe_lines import PipeLines
    url, lines, deadline = None, PipeLines(router.stdout), time.monotonic() + 30
    while url is None and (line := lines.next(deadline, router)) is not None:
        if line.startswith("router: listening on "):
            url = line.split()[-1]
    assert url, f"the router did not say where it listens (exit {router.poll()})"
    return url


def test_subscribe_waits_with_seconds_past_what_an_int_holds(tmp_path):
    # subscribe printed --wait-for-stream (and --reconnect-window) as whole seconds through an
    # Int: 1e19 trapped as soon as it had joined the session. Now it waits for a stream, as
    # asked, until Ctrl-C.
    from pipe_lines import PipeLines
    secret = tmp_path / "router.secret"
    router = subprocess.Popen([BIN, "router", "--listen", "127.0.0.1:0", "--secret-file", str(secret)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    subscriber = None
    try:
        url = router_url(router)
        created = run(["session", "create", "--router", url, "--secret-file", str(secret)])
        assert created.returncode == 0, created.stderr
        token = run(["token", "--secret-file", str(secret), "--session", created.stdout.strip(), "--role", "subscriber"])
        assert token.returncode == 0, token.stderr
        subscriber = subprocess.Popen([BIN, "subscribe", "--session", f"{url}/v2/sessions/{created.stdout.strip()}",
                                       "--token", token.stdout.strip(), "--wait-for-stream", "1e19",
                                       "--reconnect-window", "1e19", "--audio-out", "none"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        said, errors, deadline = [], PipeLines(subscriber.stderr), time.monotonic() + 30
        while (line := errors.next(deadline, subscriber)) is not None:
            said.append(line)
            if "waiting for the first stream" in line:
                break
        assert any("waiting for the first stream" in line for line in said), (subscriber.poll(), "".join(said)[-2000:])
        subscriber.send_signal(signal.SIGINT)
        rest = errors.rest(subscriber, 30)
        # Ctrl-C while waiting for a stream ends it by the signal itself (-2), as before; a trap would be -4 or -5.
        assert subscriber.returncode in (0, -signal.SIGINT) and "Fatal error" not in rest, \
            (subscriber.returncode, ("".join(said) + rest)[-2000:])
    finally:
        for proc in (subscriber, router):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def _b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _hs256_signature(key, signed):
    """HS256 over a JWT's "header.claims" text, with Python's hmac."""
    return _b64url(hmac.new(key, signed.encode(), hashlib.sha256).digest())


def _hs256(key, claims):
    """A JWT made the way any library makes one (RFC 7519 with HS256)."""
    signed = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + _b64url(json.dumps(claims).encode())
    return signed + "." + _hs256_signature(key, signed)


def test_a_short_secret_of_ones_own_signs_tokens_any_jwt_library_makes(tmp_path):
    """The contract: the secret file's trimmed content is the HS256 key's bytes. A short one
    ("s3cret", 6 bytes) is used, with a warning; tokens made elsewhere with those bytes are
    taken, and `camagent token` signs with exactly them."""
    secret = tmp_path / "router.secret"
    secret.write_text("  s3cret\n")
    router = subprocess.Popen([BIN, "router", "--listen", "127.0.0.1:0", "--secret-file", str(secret)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = router_url(router)
        now = int(time.time())
        project = _hs256(b"s3cret", {"ist": "project", "iat": now, "exp": now + 300, "jti": "t1"})
        request = urllib.request.Request(f"{url}/v2/sessions", data=b'{"mediaMode": "routed"}', method="POST",
                                         headers={"Authorization": f"Bearer {project}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            session_id = json.loads(response.read())["sessionId"]
        # Another key's token is refused.
        forged = _hs256(b"s3cret!", {"ist": "project", "iat": now, "exp": now + 300, "jti": "t2"})
        request = urllib.request.Request(f"{url}/v2/sessions", data=b'{"mediaMode": "routed"}', method="POST",
                                         headers={"Authorization": f"Bearer {forged}", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
    finally:
        router.terminate()
        _, err = router.communicate(timeout=20)
    assert b"the secret in " + str(secret).encode() + b" is 6 bytes long" in err, err[-2000:]
    # `camagent token`: the token alone on stdout, the warning on stderr, signed with b"s3cret".
    minted = run(["token", "--secret-file", str(secret), "--session", session_id, "--role", "subscriber"])
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["session_id"] == session_id and claims["role"] == "subscriber", claims
    signed, signature = token.rsplit(".", 1)
    assert signature == _hs256_signature(b"s3cret", signed)
    assert "6 bytes long" in minted.stderr and "RFC 7518" in minted.stderr, minted.stderr


def signal_sweep(args, clean_wanted=60):
    """Starts `camagent args` again and again, sending SIGINT and SIGTERM in turn 0, 0.5, 1,
    1.5 ... ms after each start, until `clean_wanted` starts have stopped cleanly (exit 0).
    Every other start must have been killed by its signal (it came before the command took
    signals): none may be lost, leaving camagent running. Returns how many were killed."""
    outcomes = {"clean": 0, "killed": 0}
    attempt = 0
    while outcomes["clean"] < clean_wanted:
        assert attempt < 2000, outcomes   # 1 s after the start, still no signal taken
        sig = signal.SIGINT if attempt % 2 == 0 else signal.SIGTERM
        delay = attempt * 0.0005
        proc = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with killed_if_left(proc):
            time.sleep(delay)
            proc.send_signal(sig)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{args[0]}: {sig.name} {delay * 1000:.1f} ms after the start was lost: it went on")
        assert proc.returncode in (0, -sig), (args[0], attempt, proc.returncode, err[-2000:])
        outcomes["clean" if proc.returncode == 0 else "killed"] += 1
        attempt += 1
    return outcomes["killed"]


def test_a_signal_at_any_moment_of_the_start_is_never_lost():
    """Signals once went to libdispatch sources, armed some time after SIG_IGN was set: one
    that came in between left the capture running (here about one start in 60 of a sweep
    like this hit that window, and the sweep's wait failed). The sweep goes on until 60
    starts have ended cleanly, so it crosses that moment however slow the machine."""
    killed = signal_sweep(["capture", "--device", "test-pattern", "--size", "160x120", "--duration", "1e300"])
    assert killed > 0   # the sweep began before signals were taken


def test_a_signal_as_the_router_starts_stops_it(tmp_path):
    """The router takes SIGINT and SIGTERM from the same thread, into its ServiceGroup's graceful
    shutdown; one that comes before the group runs is remembered, and the router ends with
    exit 0, not as a listen failure."""
    secret = tmp_path / "secret"
    secret.write_text("x" * 32)
    killed = signal_sweep(["router", "--listen", "127.0.0.1:0", "--secret-file", str(secret)], clean_wanted=30)
    assert killed > 0


def interrupted_while_a_server_never_answers(args):
    """Runs camagent `args` (its URL's port given as {port}) against a loopback server that
    takes the TCP connection and never answers; once it is connected, SIGINT. Returns
    (exit code, stdout, stderr). It must end within 20 s: well within the 60 s
    --http-timeout the tests give, which it would otherwise wait out."""
    import socket
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(30)
        port = server.getsockname()[1]
        proc = subprocess.Popen([BIN, *(a.format(port=port) for a in args), "--http-timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with killed_if_left(proc):
            client, _ = server.accept()   # camagent waits for the answer now
            with client:
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def said_stopped(code, out, err, json_lines, *, event, reason, text):
    """Exit 0 and the stop said once: as the JSON event `event` with `reason`, or as `text` on stderr."""
    assert code == 0, (code, err[-2000:])
    if json_lines:
        stopped = [json.loads(l) for l in out.splitlines() if f'"{event}"' in l]
        assert [(e["state"], e["reason"]) for e in stopped] == [("stopped", reason)], out
    else:
        assert text in err, err


@pytest.mark.parametrize("json_lines", [False, True])
def test_ctrl_c_while_joining_a_router_that_never_answers(json_lines):
    """A router that never answers the WebSocket upgrade: Ctrl-C ends `subscribe --session` at
    once, saying so."""
    code, out, err = interrupted_while_a_server_never_answers(
        ["subscribe", "--session", "http://127.0.0.1:{port}/v2/sessions/s1", "--token", "t", "--audio-out", "none"]
        + (["--json"] if json_lines else []))
    said_stopped(code, out, err, json_lines, event="subscribe", reason="stopped while joining the session",
                 text="subscribe: stopped while joining the session")


@pytest.mark.parametrize("json_lines", [False, True])
def test_ctrl_c_while_publishing_to_a_whip_server_that_never_answers(json_lines):
    """A WHIP server that never answers the POST: Ctrl-C unpublishes at once, saying so, with
    exit 0."""
    code, out, err = interrupted_while_a_server_never_answers(
        ["publish", "--device", "test-pattern", "--size", "160x120", "--audio", "none",
         "--whip", "http://127.0.0.1:{port}/whip"] + (["--json"] if json_lines else []))
    said_stopped(code, out, err, json_lines, event="publish", reason="stopped while connecting",
                 text="publish:   stopped while connecting")


def test_ctrl_c_while_subscribing_to_a_whep_server_that_never_answers():
    """The same for `subscribe --whep`: Ctrl-C ends its stalled POST at once, with exit 0."""
    code, out, err = interrupted_while_a_server_never_answers(
        ["subscribe", "--whep", "http://127.0.0.1:{port}/whep", "--audio-out", "none", "--json"])
    assert code == 0, (code, err[-2000:])
    summaries = [json.loads(l) for l in out.splitlines() if '"summary"' in l]
    assert [e["state"] for e in summaries] == ["stopped"], out


@pytest.mark.parametrize("limit", [["--duration", "1e300"], ["--frames", "9223372036854775807"]])
def test_a_huge_limit_captures_until_interrupted(limit):
    # Both once trapped converting seconds to an Int (the first also printing them). Now the
    # capture runs (at most ten years) until Ctrl-C, which ends it cleanly.
    proc = subprocess.Popen([BIN, "capture", "--device", "test-pattern", "--size", "160x120", *limit],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with killed_if_left(proc):
        first = proc.stderr.readline()
        assert first.startswith("camagent: capturing ("), first
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (proc.returncode, (first + err)[-2000:])


def test_json_lines_survive_a_non_blocking_stdout_that_fills(tmp_path):
    # A parent may hand camagent a non-blocking pipe (O_NONBLOCK is shared by everyone who
    # holds it). Made small (one page) and left unread for 4 s, it fills: each write then
    # takes part of a line or nothing (EAGAIN). Every line must still arrive whole, in order.
    import fcntl
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)   # F_SETPIPE_SZ: one page
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    # Four cameras: four lines a second, so the page fills within the first seconds.
    proc = subprocess.Popen([BIN, "publish", *["--device", "test-pattern"] * 4, "--size", "160x120", "--audio", "none",
                             "--listen", "127.0.0.1:0", "--open", "--duration", "8", "--json"],
                            stdout=write_end, stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        time.sleep(4)
        data = b""
        while chunk := os.read(read_end, 65536):
            data += chunk
        proc.wait(timeout=60)
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, proc.returncode
    assert len(data) > 2 * 4096, len(data)   # the unread page was full for a while
    events = [json.loads(line) for line in data.decode().splitlines()]   # a cut line fails here
    # The four cameras' stats lines are written together each second: a lost line (a write
    # that took nothing, as before writeWhole) leaves one camera with fewer than the others.
    stats = [sum(1 for e in events if e.get("event") == "stats" and e.get("camera") == c) for c in (1, 2, 3, 4)]
    assert len(set(stats)) == 1 and stats[0] >= 4, stats
    summaries = [e.get("camera") for e in events if e.get("event") == "summary"]
    assert sorted(summaries) == [1, 2, 3, 4], summaries


@pytest.mark.parametrize("journal", [False, True], ids=["a-pipe", "the-journal"])
def test_a_stdout_reader_that_goes_away(tmp_path, journal):
    """`publish --json | head -1`: the broken pipe stops publish as SIGTERM would (exit 0, said on
    stderr) where SIGPIPE used to kill it. But not when that stdout is the journal's stream
    (JOURNAL_STREAM names it): a service stopping with exit 0 would not be restarted
    (Restart=on-failure), so it runs on, its --duration out, as it did before."""
    import select
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    if journal:
        st = os.fstat(write_end)
        env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    started = time.monotonic()
    with open(tmp_path / "stderr.log", "w") as err:
        proc = subprocess.Popen([BIN, "publish", "--device", "test-pattern", "--size", "160x120", "--audio", "none",
                                 "--listen", "127.0.0.1:0", "--duration", "4", "--json"],
                                stdout=write_end, stderr=err, env=env)
    os.close(write_end)
    try:
        first = b""
        while not first.endswith(b"\n") and select.select([read_end], [], [], 30)[0]:
            chunk = os.read(read_end, 1)
            if not chunk:
                break
            first += chunk
        assert json.loads(first)["event"] == "negotiated", first
    finally:
        os.close(read_end)   # the reader goes away; the next stats line (one a second) finds out
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    ran = time.monotonic() - started
    log = open(tmp_path / "stderr.log").read()
    assert proc.returncode == 0, (proc.returncode, log[-2000:])
    if journal:
        assert "went away" not in log, log[-2000:]
        assert ran >= 4, ran   # it ran its --duration out (a lower bound: no machine makes it shorter)
    else:
        assert "camagent: the reader of stdout went away (broken pipe); stopping" in log, log[-2000:]


def test_sigterm_ends_a_publish_whose_stdout_nobody_reads(tmp_path):
    # A reader that stops reading (a paused consumer) leaves the pipe full and write(2) blocked.
    # camagent used to print on the thread with something to say: its main loop then sat in
    # write(2), never saw SIGTERM, and never exited. Output now has a thread of its own; at
    # exit it gets 5 s to finish, and the lines it could not write are lost, not waited for.
    import array
    import fcntl
    import termios
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)   # F_SETPIPE_SZ: one page, full within seconds
    with open(tmp_path / "stderr.log", "w") as err:
        proc = subprocess.Popen([BIN, "publish", *["--device", "test-pattern"] * 4, "--size", "160x120", "--audio", "none",
                                 "--listen", "127.0.0.1:0", "--open", "--json"], stdout=write_end, stderr=err)
    os.close(write_end)

    def unread():
        count = array.array("i", [0])
        fcntl.ioctl(read_end, termios.FIONREAD, count)
        return count[0]
    try:
        # Full: the pipe holds the same bytes for 3 s in a row while four cameras print stats every second.
        held, same_since, give_up = -1, time.monotonic(), time.monotonic() + 60
        while time.monotonic() < give_up and proc.poll() is None:
            now_held = unread()
            if now_held != held:
                held, same_since = now_held, time.monotonic()
            elif now_held > 0 and time.monotonic() - same_since >= 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None, (proc.returncode, open(tmp_path / "stderr.log").read()[-2000:])
        assert held > 2048, held   # the page filled and stayed full
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("camagent publish did not exit within 30 s of SIGTERM while its stdout was full")
        data = b""
        while chunk := os.read(read_end, 65536):
            data += chunk
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, (proc.returncode, open(tmp_path / "stderr.log").read()[-2000:])
    events = [json.loads(line) for line in data.decode().splitlines()]   # what got through is whole
    assert any(e.get("event") == "stats" for e in events), events[:5]
