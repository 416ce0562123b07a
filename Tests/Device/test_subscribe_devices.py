"""`camagent subscribe` rendering into real drivers in the VM: video into a v4l2loopback
output node, which `camagent capture` then reads as a camera, and audio into snd-aloop's
playback side, which arecord (a tool nobody here wrote) records from the capture side.

The stream comes from `camagent publish` of the test pattern and the 1 kHz tone, served by
its built-in viewer on the guest's dummy address (see test_publish.py): the counters read
back from the loopback node and the pitch recorded from the sound card show the frames and
the tone went through receive, decode and render.
"""
import os
import signal
import socket
import subprocess
import time

import numpy as np

from conftest import BIN, EXIT_NO_SUCH_DEVICE, run, tool, wait_for
from pattern import decode_counter, read_y4m
from test_audio import PLAY, RATE, RECORD, analyse, loud_frames, read_wav
from test_publish import guest_address  # noqa: F401  (fixture)
from test_video_loopback import LOOP, fresh_loopback  # noqa: F401  (fixture)

PORT = 18555


def start_publisher(address, seconds):
    return subprocess.Popen([BIN, "publish", "--device", "test-pattern", "--audio", "test-tone", "--size", "320x240",
                             "--fps", "30", "--listen", f"{address}:{PORT}", "--open", "--duration", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def listening(address):
    try:
        socket.create_connection((address, PORT), timeout=2).close()
        return True
    except OSError:
        return False


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def tone_seconds_so_far(recording):
    """Seconds of tone (the 10 ms frames `analyse` counts as loud) in a WAV that arecord is
    still writing: its 44-byte header does not have the final size yet, so the samples are read raw."""
    data = np.frombuffer(recording.read_bytes()[44:], dtype="<i2").astype(np.float64) / 32768.0
    return len(loud_frames(data, RATE)) / 100.0


def test_subscribe_renders_into_v4l2loopback_and_an_alsa_loopback(tmp_path, guest_address, fresh_loopback):
    publisher = start_publisher(guest_address, 60)
    whep = f"http://{guest_address}:{PORT}/whep"
    recording = tmp_path / "arecord.wav"
    recorder = subprocess.Popen(["arecord", "-q", "-D", RECORD, "-f", "S16_LE", "-r", str(RATE), "-c", "1",
                                 str(recording)], stderr=subprocess.PIPE)
    subscriber = None
    try:
        # The viewer server takes a moment to listen.
        wait_for(lambda: listening(guest_address), 60, "the built-in viewer")
        subscriber = subprocess.Popen([BIN, "subscribe", "--whep", whep, "--video-out", LOOP, "--audio-out",
                                       f"alsa:{PLAY}", "--duration", "30"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        recorded_before = os.path.getsize(recording) if os.path.exists(recording) else 0
        # Once frames flow into the node, it has a capture side: read it as a camera.
        captured = tmp_path / "from-loopback.y4m"
        deadline = time.monotonic() + 60
        result = None
        while time.monotonic() < deadline:
            result = run(["capture", "--device", LOOP, "--frames", "45", "--output", str(captured)], timeout=60)
            if result.returncode == 0:
                break
            time.sleep(1)
        assert result is not None and result.returncode == 0, result.stderr if result else "no capture"
        frames = read_y4m(captured)
        assert frames[0][0].shape == (240, 320)
        counters = [decode_counter(y) for y, _, _ in frames]
        readable = [c for c in counters if c is not None]
        assert len(readable) >= 0.9 * len(frames), counters
        assert readable[-1] - readable[0] >= 20 and all(b >= a for a, b in zip(readable, readable[1:])), readable
        # The tone plays once the subscriber is connected: keep recording until 8 s more than before
        # its start are on file (the capture may have taken only a moment). 5 s once left only
        # 2.96 s of tone in CI: connecting comes first, and it is slow under the VM's emulation.
        wait_for(lambda: os.path.getsize(recording) > recorded_before + 8 * RATE * 2, 60,
                 "8 s of audio recorded since the subscriber started")
        # Under the VM's emulation the subscriber may connect late in those 8 s (2.77 s of
        # tone once): record, with a bound, until the tone itself has lasted long enough.
        wait_for(lambda: tone_seconds_so_far(recording) >= 4, 60, "4 s of tone recorded")
    finally:
        if subscriber is not None:
            _, sub_err = stop(subscriber)
        stop(publisher)
        time.sleep(0.5)
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=30)
    assert subscriber.returncode == 0, sub_err[-3000:]
    rate, channels, samples = read_wav(recording)
    peak, level, seconds = analyse(samples, rate)
    assert abs(peak - 1000) <= 15, peak
    assert seconds >= 3, f"only {seconds} s of tone recorded"


def test_a_missing_output_node_is_no_such_device():
    proc = subprocess.run([BIN, "subscribe", "--whep", "http://10.99.0.1:1/whep", "--video-out", "/dev/video99"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_NO_SUCH_DEVICE and "/dev/video99" in proc.stderr, (proc.returncode, proc.stderr)
