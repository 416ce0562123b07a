"""camagent's ALSA driver against snd-aloop and snd-dummy, checked with aplay,
arecord and sox (tools nobody here wrote)."""
import json
import os
import re
import signal
import subprocess
import time
import wave

import numpy as np
import pytest

from conftest import EXIT_BUSY, EXIT_NO_SUCH_DEVICE, BIN, last_json, run, tool, wait_for

PLAY = "hw:Loopback,0,0"     # what is played here...
RECORD = "hw:Loopback,1,0"   # ...is captured here
RATE = 48000
LEVEL_DBFS = -6.0


@pytest.fixture(scope="module")
def tone(tmp_path_factory):
    """3 s of 1 kHz at -6 dBFS, 48 kHz mono, made by sox, padded with silence."""
    path = tmp_path_factory.mktemp("audio") / "tone.wav"
    tool(["sox", "-n", "-r", str(RATE), "-c", "1", "-b", "16", str(path),
          "synth", "3", "sine", "1000", "vol", f"{LEVEL_DBFS}dB", "pad", "0", "0.5"])
    return path


def read_wav(path):
    with wave.open(str(path)) as w:
        assert w.getsampwidth() == 2
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return w.getframerate(), w.getnchannels(), data.astype(np.float64) / 32768.0


def frame_levels(samples, rate):
    """The RMS level of each 10 ms frame of `samples` (in [-1, 1]); the last whole frame is left out."""
    frame = rate // 100
    count = len(range(0, len(samples) - frame, frame))
    return np.sqrt(np.mean(np.asarray(samples[:count * frame], dtype=np.float64).reshape(count, frame) ** 2, axis=1))


def loud_frames(samples, rate):
    """Indices of the 10 ms frames that hold the tone (RMS above 0.05)."""
    return np.where(frame_levels(samples, rate) > 0.05)[0]


def analyse(samples, rate):
    """Peak frequency and RMS level (dBFS) of the loud part of a recording."""
    frame = rate // 100
    levels = frame_levels(samples, rate)
    loud = np.where(levels > 0.05)[0]
    assert len(loud) > 50, f"no tone captured (max level {levels.max() if len(levels) else 0:.4f})"
    # The middle of the loud part, away from the edges.
    a, b = loud[len(loud) // 5] * frame, loud[-len(loud) // 5] * frame
    seg = samples[a:b]
    spectrum = np.abs(np.fft.rfft(seg * np.hanning(len(seg))))
    peak = np.fft.rfftfreq(len(seg), 1 / rate)[np.argmax(spectrum)]
    rms_dbfs = 20 * np.log10(np.sqrt(np.mean(seg ** 2)) * np.sqrt(2))  # as a sine's peak level
    return peak, rms_dbfs, len(loud) / 100.0


def start_capture(tmp_path, device=RECORD, seconds=6, extra=(), channels=1):
    out = tmp_path / "captured.wav"
    proc = subprocess.Popen([BIN, "capture", "--audio", device, "--rate", str(RATE), "--channels", str(channels),
                             "--duration", str(seconds), "--audio-output", str(out), "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until it is capturing, so the tone is not half missed.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "capturing" in line or not line and proc.poll() is not None:
            break
    return proc, out


def finish(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return last_json(out)["audio"], err


def finish_after_playing(proc):
    """Ends a capture that ran until the player was done (as the arecord test below does):
    a fixed --duration window lost the tone's end when the player started late in the guest.
    Half a second for the last period to arrive, then Ctrl-C, which ends it cleanly."""
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    return finish(proc)


def check_tone(path, seconds_expected=3.0):
    rate, channels, samples = read_wav(path)
    assert (rate, channels) == (RATE, 1)
    peak, level, seconds = analyse(samples, rate)
    assert abs(peak - 1000) < 5, peak
    assert abs(level - LEVEL_DBFS) < 1.0, level
    assert seconds > seconds_expected * 0.8, seconds


def test_devices_lists_alsa_cards_like_aplay():
    listing = json.loads(run(["devices", "--json"], check=True).stdout)["audio"]
    ours = {(a["cardId"], a["device"], a["direction"]) for a in listing}
    for tool_name, direction in (("aplay", "playback"), ("arecord", "capture")):
        out = tool([tool_name, "-l"]).stdout
        theirs = {(m.group(1), int(m.group(2)), direction)
                  for m in re.finditer(r"card \d+: (\w+) \[.*?\], device (\d+):", out)}
        assert theirs and theirs <= ours, (tool_name, theirs - ours)
    loop = [a for a in listing if a["cardId"] == "Loopback" and a["direction"] == "capture" and a["device"] == 1][0]
    assert 48000 in loop["rates"] and 16000 in loop["rates"]
    assert loop["minChannels"] == 1 and loop["maxChannels"] >= 2
    assert any(a["cardId"] == "Dummy" for a in listing)
    text = run(["devices"], check=True).stdout
    assert "hw:0,0" in text or "hw:1,0" in text


def test_own_render_into_own_capture(tmp_path, tone):
    proc, out = start_capture(tmp_path, seconds=120)
    played = run(["play", str(tone), "--audio", PLAY, "--json"], timeout=120)
    assert played.returncode == 0, played.stderr
    summary, _ = finish_after_playing(proc)
    check_tone(out)
    # Overruns depend on how busy the host is (a CI run once saw 6 while other work shared its
    # 2 cores): not asserted to be zero. Each must be recovered, and the tone above must still
    # be whole (pitch, level, length), which is what a lost or mangled recovery would break.
    assert summary["recoveries"] == summary["xruns"] and summary["timestampsMonotonic"] is True, summary
    play = last_json(played.stdout)
    assert play["framesPlayed"] >= play["framesInFile"]


def test_aplay_into_own_capture(tmp_path, tone):
    proc, out = start_capture(tmp_path, seconds=120)
    tool(["aplay", "-q", "-D", PLAY, str(tone)], timeout=120)
    summary, _ = finish_after_playing(proc)
    check_tone(out)
    # Paced by the card: the measured rate is the nominal one (loose bound for TCG).
    assert abs(summary["measuredRate"] - RATE) / RATE < 0.1, summary
    assert 0 < summary["captureDelayMs"] < 200


def test_own_render_into_arecord(tmp_path, tone):
    out = tmp_path / "arecord.wav"
    # arecord runs until the tone has been played, however long the guest takes to
    # start `camagent play` (a fixed -d window lost half the tone on a busy host);
    # SIGINT makes it finish the WAV header and exit.
    rec = subprocess.Popen(["arecord", "-q", "-D", RECORD, "-f", "S16_LE", "-r", str(RATE), "-c", "1",
                            str(out)], stderr=subprocess.PIPE)
    time.sleep(1)
    played = run(["play", str(tone), "--audio", PLAY], timeout=120)
    assert played.returncode == 0, played.stderr
    time.sleep(0.5)
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=60)
    check_tone(out)



def test_stereo_capture_keeps_left_and_right_apart(tmp_path):
    # --channels 2: aplay plays 1 kHz on the left and 1.5 kHz on the right (made by sox) into
    # snd-aloop; camagent's stereo WAV must have each tone in its own channel, at its level.
    stereo = tmp_path / "stereo.wav"
    tool(["sox", "-n", "-r", str(RATE), "-c", "2", "-b", "16", str(stereo),
          "synth", "3", "sine", "1000", "sine", "1500", "vol", f"{LEVEL_DBFS}dB", "pad", "0", "0.5"])
    proc, out = start_capture(tmp_path, seconds=120, channels=2)
    tool(["aplay", "-q", "-D", PLAY, str(stereo)], timeout=120)
    summary, _ = finish_after_playing(proc)
    assert summary["channels"] == 2, summary
    rate, channels, samples = read_wav(out)
    assert (rate, channels) == (RATE, 2)
    left, right = samples[0::2], samples[1::2]
    for channel, hz in ((left, 1000), (right, 1500)):
        peak, level, seconds = analyse(channel, rate)
        assert abs(peak - hz) < 5, (hz, peak)
        assert abs(level - LEVEL_DBFS) < 1.0, (hz, level)
        assert seconds > 3.0 * 0.8, (hz, seconds)
    # Neither tone leaks into the other channel: at the other's frequency a channel is quiet.
    def magnitude(channel, hz):
        spectrum = np.abs(np.fft.rfft(channel * np.hanning(len(channel))))
        return spectrum[int(round(hz * len(channel) / rate))]
    assert magnitude(left, 1500) < 0.01 * magnitude(left, 1000)
    assert magnitude(right, 1000) < 0.01 * magnitude(right, 1500)

def test_overrun_is_recovered_and_capture_continues(tmp_path):
    long_tone = tmp_path / "long.wav"
    tool(["sox", "-n", "-r", str(RATE), "-c", "1", "-b", "16", str(long_tone), "synth", "8", "sine", "1000", "vol", "-6dB"])
    player = subprocess.Popen(["aplay", "-q", "-D", PLAY, str(long_tone)], stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        proc, out = start_capture(tmp_path, seconds=5, extra=("--debug-stall-ms", "600"))
        summary, err = finish(proc)
    finally:
        player.terminate()
        player.wait(timeout=30)
    assert summary["xruns"] >= 1, summary
    assert summary["recoveries"] == summary["xruns"]
    assert "overrun recovered" in err
    # Capture went on after the stall: most of the 5 s arrived.
    assert summary["chunks"] >= 300, summary
    rate, _, samples = read_wav(out)
    assert len(samples) >= 3 * rate


def test_snd_dummy_paces_capture(tmp_path):
    proc, out = start_capture(tmp_path, device="hw:Dummy,0,0", seconds=3)
    summary, _ = finish(proc)
    assert summary["chunks"] >= 200
    assert abs(summary["measuredRate"] - RATE) / RATE < 0.1, summary


def test_missing_audio_device():
    proc = run(["capture", "--audio", "hw:9,0", "--duration", "1"], timeout=60)
    assert proc.returncode == EXIT_NO_SUCH_DEVICE, proc.stderr
    assert "hw:9,0" in proc.stderr


def test_busy_audio_device(tmp_path):
    holder = subprocess.Popen(["arecord", "-q", "-D", "hw:Dummy,0,0", "-f", "S16_LE", "-r", "48000", "-c", "1",
                               "-d", "30", "/dev/null"], stderr=subprocess.PIPE)
    try:
        # Until arecord holds it: the kernel says RUNNING for the substream (a fixed second
        # could pass before arecord opened it in a slow guest, and camagent would get it).
        status = "/proc/asound/Dummy/pcm0c/sub0/status"
        wait_for(lambda: "RUNNING" in open(status).read(), 30, "arecord to hold hw:Dummy,0,0")
        proc = run(["capture", "--audio", "hw:Dummy,0,0", "--duration", "1"], timeout=60)
        assert proc.returncode == EXIT_BUSY, proc.stderr
        assert "hw:Dummy,0,0" in proc.stderr and "busy" in proc.stderr
    finally:
        holder.terminate()
        holder.wait(timeout=30)


def test_no_sound_card_falls_back_to_silence_only_for_auto(tmp_path):
    for m in ("snd-aloop", "snd-dummy"):
        subprocess.run(["modprobe", "-r", m], capture_output=True)
    try:
        assert "no soundcards" in open("/proc/asound/cards").read()
        proc = run(["capture", "--audio", "auto", "--duration", "1", "--json"], timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "no sound card found: capturing silence" in proc.stderr
        assert last_json(proc.stdout)["audio"]["chunks"] >= 90
        proc = run(["capture", "--audio", "default", "--duration", "1"], timeout=60)
        assert proc.returncode == 72, proc.stderr
        assert "no sound card" in proc.stderr
    finally:
        tool(["modprobe", "snd-aloop"])
        tool(["modprobe", "snd-dummy"])
