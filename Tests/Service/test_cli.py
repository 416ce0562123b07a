"""What a service's user sees from the command line: log lines that suit the
journal (or a file, without escape sequences) and --device names that match
nothing, on a host with no camera."""
import os
import subprocess

from conftest import BIN, EXIT_NO_SUCH_DEVICE, EXIT_USAGE, run


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
