"""camagent against vivid, the kernel's virtual video test driver."""
import json
import os
import subprocess
import signal
import time

import numpy as np
import pytest

from conftest import (EXIT_BUSY, EXIT_DEVICE_LOST, EXIT_DRIVER, EXIT_NO_SUCH_DEVICE, EXIT_NOT_CAPTURE,
                      EXIT_UNSUPPORTED, BIN, find_control, last_json, rate_by_rule, reload_vivid_now, run,
                      set_control, tool, v4l2_list_formats, wait_for)


def camagent_listing(device):
    proc = run(["devices", "--json", "--device", device], check=True)
    listing = json.loads(proc.stdout)
    assert len(listing["video"]) == 1
    return listing["video"][0]


def test_devices_matches_v4l2_ctl(vivid):
    ours = camagent_listing(vivid)
    assert ours["driver"] == "vivid"
    theirs = v4l2_list_formats(vivid)
    assert "YUYV" in theirs
    ours_formats = {f["fourcc"]: f for f in ours["formats"]}
    # Every format v4l2-ctl lists is listed by camagent, with the same sizes and rates.
    assert set(theirs) == set(ours_formats), (set(theirs) ^ set(ours_formats))
    for fourcc, sizes in theirs.items():
        ours_sizes = {(s["width"], s["height"]): sorted(round(i["fps"], 3) for i in s["intervals"])
                      for s in ours_formats[fourcc]["sizes"] if s["kind"] == "discrete"}
        assert set(ours_sizes) == set(sizes), fourcc
        for size, rates in sizes.items():
            assert ours_sizes[size] == sorted(round(r, 3) for r in rates), (fourcc, size)


def test_devices_lists_vivid_without_device_option(vivid):
    proc = run(["devices", "--json"], check=True)
    paths = [d["path"] for d in json.loads(proc.stdout)["video"]]
    assert vivid in paths
    text = run(["devices"], check=True).stdout
    assert vivid in text and "YUYV" in text


def capture(device, *args, timeout=240):
    proc = run(["capture", "--device", device, "--json", *args], timeout=timeout)
    return proc, (last_json(proc.stdout) if proc.returncode in (0, EXIT_DEVICE_LOST, 75) and proc.stdout.strip() else None)


@pytest.mark.parametrize("fourcc,size,desired", [
    ("YUYV", (640, 480), 30),     # above every rate at this size: the highest (25)
    ("YUYV", (1280, 720), 1000),  # far above: the highest
    ("NV12", (640, 480), 30),
    ("YUYV", (320, 180), 0.5),    # below every rate: the lowest
])
def test_capture_negotiates_by_rule(vivid, fourcc, size, desired):
    listed = v4l2_list_formats(vivid)[fourcc][size]
    expected = rate_by_rule(listed, desired)
    frames = 12
    proc, summary = capture(vivid, "--format", fourcc.lower(), "--size", f"{size[0]}x{size[1]}",
                            "--fps", str(desired), "--frames", str(frames))
    assert proc.returncode == 0, proc.stderr
    assert summary["format"] == fourcc
    assert (summary["width"], summary["height"]) == size
    assert abs(summary["grantedFps"] - expected) < 0.01, (summary["grantedFps"], expected, listed)
    assert summary["frames"] == frames
    assert summary["timestampsMonotonic"] is True
    assert summary["timestampsRejected"] == 0
    assert "granted" in proc.stdout  # the negotiation is printed
    # Delivered rate near the granted one; loose bounds because the guest runs under TCG.
    if expected >= 2:
        assert 0.3 * expected <= summary["measuredFps"] <= 1.3 * expected, summary


def test_capture_y4m_matches_ffmpeg(vivid, tmp_path):
    """Our YUYV->NV12->Y4M frames look like ffmpeg's capture of the same device."""
    ours = tmp_path / "ours.y4m"
    proc, summary = capture(vivid, "--format", "yuyv", "--size", "640x480", "--frames", "5", "--output", str(ours))
    assert proc.returncode == 0, proc.stderr
    probe = tool(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height",
                  "-of", "json", str(ours)])
    stream = json.loads(probe.stdout)["streams"][0]
    assert (stream["width"], stream["height"], int(stream["nb_read_frames"])) == (640, 480, 5)

    theirs = tmp_path / "theirs.yuv"
    tool(["ffmpeg", "-v", "error", "-f", "v4l2", "-input_format", "yuyv422", "-video_size", "640x480", "-i", vivid,
          "-frames:v", "1", "-pix_fmt", "yuv420p", "-f", "rawvideo", str(theirs)], timeout=120)
    a = read_y4m_luma(ours)[-1].astype(np.float64)
    b = np.frombuffer(theirs.read_bytes()[:640 * 480], dtype=np.uint8).reshape(480, 640).astype(np.float64)
    # vivid's picture moves a little between frames (its clock text), so compare by PSNR.
    mse = np.mean((a - b) ** 2)
    psnr = 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse)
    assert psnr > 20, psnr


def read_y4m_luma(path):
    data = path.read_bytes()
    header, rest = data.split(b"\n", 1)
    fields = {f[:1]: f[1:] for f in header.split(b" ")[1:]}
    w, h = int(fields[b"W"]), int(fields[b"H"])
    frame = w * h * 3 // 2
    out = []
    while rest.startswith(b"FRAME"):
        _, rest = rest.split(b"\n", 1)
        out.append(np.frombuffer(rest[:w * h], dtype=np.uint8).reshape(h, w))
        rest = rest[frame:]
    return out


def test_orientation_metadata_and_pixels(vivid, tmp_path):
    proc, summary = capture(vivid, "--size", "640x480", "--frames", "3", "--rotation", "90", "--mirror")
    assert proc.returncode == 0, proc.stderr
    assert (summary["width"], summary["height"]) == (640, 480)
    assert summary["rotation"] == 90 and summary["mirrored"] is True
    out = tmp_path / "rotated.y4m"
    proc, summary = capture(vivid, "--size", "640x480", "--frames", "3", "--rotation", "90", "--rotate-pixels",
                            "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (summary["width"], summary["height"]) == (480, 640)
    assert read_y4m_luma(out)[0].shape == (640, 480)


# MARK: bad input

def test_missing_device():
    proc = run(["capture", "--device", "/dev/video-does-not-exist", "--frames", "1"])
    assert proc.returncode == EXIT_NO_SUCH_DEVICE
    assert "/dev/video-does-not-exist" in proc.stderr and "no such device" in proc.stderr


def test_not_a_device(tmp_path):
    f = tmp_path / "plain-file"
    f.write_text("x")
    proc = run(["capture", "--device", str(f), "--frames", "1"])
    assert proc.returncode == EXIT_NOT_CAPTURE
    assert str(f) in proc.stderr and "not a character device" in proc.stderr


def test_dev_null_is_not_a_capture_device():
    proc = run(["capture", "--device", "/dev/null", "--frames", "1"])
    assert proc.returncode == EXIT_NOT_CAPTURE
    assert "/dev/null" in proc.stderr and "not a V4L2 device" in proc.stderr


def test_vivid_output_node_is_not_a_capture_device():
    out = os.environ.get("CAMAGENT_VIVID_OUTPUT")
    assert out and os.path.exists(out)
    proc = run(["capture", "--device", out, "--frames", "1"])
    assert proc.returncode == EXIT_NOT_CAPTURE, proc.stderr
    assert out in proc.stderr and "output" in proc.stderr


def test_exact_size_not_offered(vivid):
    proc = run(["capture", "--device", vivid, "--format", "yuyv", "--size", "1000x1000", "--exact", "--frames", "1"])
    assert proc.returncode == EXIT_UNSUPPORTED
    assert "1000x1000" in proc.stderr and "640x480" in proc.stderr


def test_exact_rate_not_offered(vivid):
    proc = run(["capture", "--device", vivid, "--format", "yuyv", "--size", "640x480", "--fps", "1000", "--exact",
                "--frames", "1"])
    assert proc.returncode == EXIT_UNSUPPORTED
    assert "1000.00 fps" in proc.stderr


def test_format_not_offered(vivid):
    proc = run(["capture", "--device", vivid, "--format", "mjpeg", "--frames", "1"])
    assert proc.returncode == EXIT_UNSUPPORTED
    assert "MJPEG" in proc.stderr and "YUYV" in proc.stderr


def test_nearest_size_without_exact(vivid):
    proc, summary = capture(vivid, "--format", "yuyv", "--size", "1000x700", "--frames", "2")
    assert proc.returncode == 0, proc.stderr
    assert (summary["width"], summary["height"]) == (1280, 720)
    assert "nearest" in proc.stdout


def test_busy_device(vivid):
    holder = subprocess.Popen([BIN, "capture", "--device", vivid, "--size", "320x180", "--duration", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: "capturing" in (holder.stderr.readline() or ""), 60, "first capture to start")
        proc = run(["capture", "--device", vivid, "--frames", "1"], timeout=60)
        assert proc.returncode == EXIT_BUSY, proc.stderr
        assert vivid in proc.stderr and "busy" in proc.stderr
    finally:
        holder.terminate()
        holder.wait(timeout=30)


# MARK: faults injected through vivid's controls

def streaming(device, *args):
    return subprocess.Popen([BIN, "capture", "--device", device, "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc, needle, timeout):
    """Reads stderr lines until one contains needle; returns the lines read."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"no '{needle}' within {timeout} s; stderr so far: {''.join(seen)}")


def test_error_buffers_are_counted(vivid):
    control = find_control(vivid, "inject", "buf_flag_error")  # a button: flags the next buffer
    proc = streaming(vivid, "--size", "320x180", "--duration", "60")  # a bound: Ctrl-C ends it
    wait_for_line(proc, "capturing", 60)
    for _ in range(5):
        time.sleep(0.5)
        set_control(vivid, control, 1)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    summary = last_json(out)
    assert summary["corrupt"] >= 1, summary
    assert summary["frames"] > 0


def test_fatal_streaming_error_recovers_with_reconnect(vivid):
    """vivid's fatal streaming error makes DQBUF fail with EIO; with --reconnect
    the device is reopened and frames flow again, without reloading anything."""
    proc = streaming(vivid, "--size", "320x180", "--reconnect", "--duration", "60")
    wait_for_line(proc, "capturing", 60)
    time.sleep(2)
    set_control(vivid, find_control(vivid, "inject_fatal_streaming_error"), 1)
    wait_for_line(proc, "reconnected", 50)
    # A few seconds on the reopened device, then SIGINT ends it cleanly, with its
    # summary (--duration is only the ceiling).
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = last_json(out)
    assert summary["reconnects"] == 1, summary


def test_fatal_streaming_error_without_reconnect_ends_cleanly(vivid):
    proc = streaming(vivid, "--size", "320x180", "--duration", "60")
    wait_for_line(proc, "capturing", 60)
    time.sleep(2)
    set_control(vivid, find_control(vivid, "inject_fatal_streaming_error"), 1)
    out, err = proc.communicate(timeout=60)  # ends on its own, long before --duration
    assert proc.returncode == EXIT_DEVICE_LOST, err
    assert vivid in err


def test_dropped_buffers_are_counted(vivid):
    control = find_control(vivid, "dropped", "buffers")
    proc = streaming(vivid, "--size", "320x180", "--duration", "60")  # a bound: Ctrl-C ends it
    try:
        wait_for_line(proc, "capturing", 60)
        set_control(vivid, control, 50)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        set_control(vivid, control, 0)
    assert proc.returncode == 0, err
    summary = last_json(out)
    assert summary["droppedByDriver"] > 0, summary


def test_governor_reports_and_adapts(vivid):
    control = find_control(vivid, "dropped", "buffers")
    set_control(vivid, control, 70)
    try:
        # Ended (Ctrl-C) once the governor has renegotiated, which it does a few seconds in;
        # the duration is only a bound.
        proc = streaming(vivid, "--format", "yuyv", "--size", "640x480", "--fps", "25", "--adapt", "--duration", "120")
        wait_for_line(proc, "adapted: renegotiated", 100)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        set_control(vivid, control, 0)
    assert proc.returncode == 0, err
    summary = last_json(out)
    events = " | ".join(summary["events"])
    assert "delivered" in events and "granted" in events, events
    # vivid has no exposure_auto_priority and no MJPEG: the governor steps down in size.
    assert "adapted: renegotiated" in events, events
    # A step down may keep the width (a wide size of the same width): the picture is smaller.
    assert summary["width"] * summary["height"] < 640 * 480, (summary["width"], summary["height"], events)


def test_streamon_error_is_reported(vivid):
    control = find_control(vivid, "streamon", "error")
    set_control(vivid, control, 1)  # a button: fails the next STREAMON
    proc = run(["capture", "--device", vivid, "--frames", "1"], timeout=60)
    assert proc.returncode == EXIT_DRIVER, (proc.returncode, proc.stderr)
    assert vivid in proc.stderr and "STREAMON" in proc.stderr


def test_disconnect_is_device_lost(vivid, reload_vivid):
    proc = streaming(vivid, "--size", "320x180", "--duration", "60")
    wait_for_line(proc, "capturing", 60)
    time.sleep(2)
    set_control(vivid, find_control(vivid, "disconnect"), 1)
    out, err = proc.communicate(timeout=60)  # never hangs
    assert proc.returncode == EXIT_DEVICE_LOST, err
    assert "device lost" in err and vivid in err
    assert last_json(out)["frames"] > 0


def test_reconnect_after_disconnect_and_reload(vivid, reload_vivid):
    proc = streaming(vivid, "--size", "320x180", "--reconnect", "--duration", "90")
    wait_for_line(proc, "capturing", 60)
    time.sleep(2)
    set_control(vivid, find_control(vivid, "disconnect"), 1)
    wait_for_line(proc, "device lost", 30)
    reload_vivid_now(vivid)
    wait_for_line(proc, "reconnected", 60)
    time.sleep(3)
    proc.send_signal(2)  # Ctrl-C: stop with a summary
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = last_json(out)
    assert summary["reconnects"] == 1, summary
    events = " | ".join(summary["events"])
    assert "device lost" in events and "reconnected" in events
    assert summary["frames"] > 0
