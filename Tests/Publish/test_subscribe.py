"""`camagent subscribe`: camagent receives, decodes and writes out a stream, from a router
session (`--session`) or from any WHEP endpoint (`--whep`: camagent's built-in viewer, and
an aiortc WHEP server, viewer_standin_whep.py, whose WebRTC side nobody here wrote).

The publisher is `camagent publish` with the test pattern (its frame counter is a barcode
in every frame) and the 1 kHz test tone. The subscriber writes Y4M and WAV; the test reads
the counters back from the decoded pictures and measures the tone's pitch. Every exit code
the subscriber promises is provoked. In the test's own network namespace; every wait has a
timeout; nothing asserts on time.
"""
import json
import os
import signal
import subprocess
import time
import wave

import numpy as np
import pytest

from pattern import decode_counter, read_y4m
from publish_support import (BIN, EXIT_UNAUTHORIZED, EXIT_UNREACHABLE, EXIT_USAGE, MAX_COUNTER_GAP,
                             MAX_MISSING_SHARE, MIN_READ_SHARE, TONE_HZ, TONE_TOLERANCE_HZ, json_lines)
from publish_support import HERE, PY, output_lines, read_line, rest_of_output
from router_support import Router, SessionWatcher, drain, http, watched_session

EXIT_OUTPUT = 73
EXIT_NO_SUCH_STREAM = 85
EXIT_STREAM_ENDED = 86
WATCH = 6


def start_publisher(net, workdir, *target, codec="vp8", fps=15, duration=20, size="640x480"):
    """`camagent publish` of the test pattern and tone into `target` (--session URL --token T, or --listen)."""
    return drain(net.start([BIN, "publish", "--device", "test-pattern", "--audio", "test-tone", *target,
                            "--codec", codec, "--size", size, "--fps", str(fps), "--bitrate", "800",
                            "--duration", str(duration), "--json"], "camagent-publisher", workdir))


def subscribe(net, *args, timeout=90):
    """`camagent subscribe … --json` to its end; returns (exit code, JSON lines, stderr)."""
    proc = net.run([BIN, "subscribe", *args, "--json"], timeout=timeout)
    return proc.returncode, json_lines(proc.stdout), proc.stderr


def check_pattern_y4m(path, *, fps, seconds, size, header_rate=False):
    """The decoded pictures are the test pattern at `size`, its counter advancing with small gaps;
    with `header_rate`, the file's header says the stream's rate (from the frames' RTP times)."""
    if header_rate:
        with open(path, "rb") as f:
            header = f.readline().decode().split()
        assert f"F{fps}:1" in header, header
    frames = read_y4m(path)
    assert len(frames) >= 0.4 * fps * seconds, f"{len(frames)} frames in {path}"
    assert frames[0][0].shape == (size[1], size[0]), frames[0][0].shape
    counters = [decode_counter(y) for y, _, _ in frames]
    readable = [c for c in counters if c is not None]
    assert len(readable) >= MIN_READ_SHARE * len(frames), counters
    steps = [b - a for a, b in zip(readable, readable[1:])]
    assert all(s > 0 for s in steps), f"the counter goes back or repeats: {steps}"
    assert max(steps) <= MAX_COUNTER_GAP, steps
    span = readable[-1] - readable[0] + 1
    assert (span - len(readable)) / span <= MAX_MISSING_SHARE, (span, len(readable))
    return readable


def check_tone_wav(path, *, seconds, hz=TONE_HZ):
    """The decoded audio is the `hz` tone (camagent's 1 kHz) at 48 kHz, about as long as the stream was watched."""
    with wave.open(path) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (48000, 1, 2)
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64) / 32768
    assert len(samples) >= 0.5 * 48000 * seconds, len(samples)
    body = samples[len(samples) // 4: 3 * len(samples) // 4]
    spectrum = np.abs(np.fft.rfft(body * np.hanning(len(body))))
    pitch = np.argmax(spectrum) * 48000 / len(body)
    assert abs(pitch - hz) <= TONE_TOLERANCE_HZ, pitch
    assert np.sqrt(np.mean(body ** 2)) > 0.01


def no_new_packets(kind, lines_in_a_row):
    """A predicate on stats lines: true once that many in a row have brought no new `kind` packets."""
    counts = []

    def settled(e):
        counts.append(e[kind]["packetsReceived"])
        return len(counts) > lines_in_a_row and len(set(counts[-lines_in_a_row - 1:])) == 1
    return settled


def events(lines, kind):
    return [e for e in lines if e.get("event") == kind]


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_camagent_to_camagent_through_the_router(net, workdir, codec):
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                codec=codec, duration=60)
    # One camera's stream is named after its device unless --name says otherwise.
    assert router.wait_for_streams(session, 1)[0]["name"] == "test-pattern"
    video, audio = os.path.join(workdir, "sub.y4m"), os.path.join(workdir, "sub.wav")
    code, lines, err = subscribe(net, "--session", url, "--token", router.token(session, "subscriber"), "--first",
                                 "--video-out", video, "--audio-out", audio, "--duration", str(WATCH))
    assert code == 0, (code, err[-3000:], router.log())

    states = [e["state"] for e in events(lines, "state")]
    assert states == ["connected"], lines
    connected = events(lines, "state")[0]
    assert connected["codecs"] == ("VP8+opus" if codec == "vp8" else "H264+opus"), connected
    assert {"event": "video", "state": "dimensions", "width": 640, "height": 480} in \
        [{k: e.get(k) for k in ("event", "state", "width", "height")} for e in events(lines, "video")], lines
    # Events in their natural order: the decoder's first size never comes before "connected".
    order = [e.get("state") for e in lines if e.get("event") in ("state", "video")]
    assert order.index("connected") < order.index("dimensions"), order
    summary = events(lines, "summary")[-1]
    assert summary["video"]["framesDecoded"] >= 0.4 * 15 * WATCH and summary["video"]["decodeErrors"] == 0, summary
    assert summary["audio"]["samplesDecoded"] >= 0.5 * 48000 * WATCH, summary
    assert events(lines, "stats"), "a stats line each second"
    # The W3C report: what was received and decoded, and what the sender's reports say it sent.
    rtc = events(lines, "stats")[-1]["rtcStats"]
    assert {"inbound-rtp", "remote-outbound-rtp", "candidate-pair"} <= {e["type"] for e in rtc}, rtc
    video_in = next(e for e in rtc if e["type"] == "inbound-rtp" and e["kind"] == "video")
    assert video_in["framesDecoded"] > 0 and (video_in["frameWidth"], video_in["frameHeight"]) == (640, 480), video_in
    video_out = next(e for e in rtc if e["id"] == video_in["remoteId"])
    assert video_out["packetsSent"] > 0 and video_out["remoteTimestamp"] > 1.7e12, video_out
    # A/V sync from the sender reports: both streams placed on the sender's clock. Not a timing
    # assertion: a wrong RTP-to-NTP mapping is off by hours or by the RTP clock's whole range.
    last = events(lines, "stats")[-1]
    assert last["avSyncOffset"] is not None and abs(last["avSyncOffset"]) < 5, last
    # The router stamps what it forwards on its own clock, at arrival: a few ms either way.
    assert -1 < last["video"]["senderToRenderDelay"] < 5 and -1 < last["audio"]["senderToRenderDelay"] < 5, last

    check_pattern_y4m(video, fps=15, seconds=WATCH, size=(640, 480), header_rate=True)
    check_tone_wav(audio, seconds=WATCH)
    # Its --duration is only a bound: once the subscriber is done it is stopped (SIGTERM ends it cleanly).
    assert net.stop(publisher) == 0, "".join(publisher.output)[-2000:]
    # The router echoes the publisher's sender reports in its receiver reports: the
    # publisher knows its round-trip time to the router.
    stats = [e for e in json_lines("".join(publisher.output)) if e.get("event") == "stats"]
    remote = [r for e in stats for r in e.get("rtcStats", []) if r.get("type") == "remote-inbound-rtp"]
    assert any(r.get("roundTripTime") is not None for r in remote), stats[-1:]


def test_subscribe_to_the_built_in_viewer_over_whep_with_its_token(net, workdir):
    port = 18443
    publisher = start_publisher(net, workdir, "--listen", f"{net.addr}:{port}", "--viewer-token", "let-me-watch",
                                duration=WATCH + 12, fps=30)
    whep = f"http://{net.addr}:{port}/whep"
    # The server may still be starting: the first refusal is retried for a while.
    for _ in range(40):
        code, lines, err = subscribe(net, "--whep", whep, "--token", "wrong", "--duration", "1")
        if code != EXIT_UNREACHABLE:
            break
        net.run(["sleep", "0.25"], timeout=5)
    assert code == EXIT_UNAUTHORIZED, (code, err)

    video, audio = os.path.join(workdir, "viewer.y4m"), os.path.join(workdir, "viewer.wav")
    code, lines, err = subscribe(net, "--whep", whep, "--token", "let-me-watch", "--video-out", video,
                                 "--audio-out", audio, "--duration", str(WATCH))
    assert code == 0, (code, err[-3000:])
    assert events(lines, "state")[0]["codecs"] == "VP8+opus", lines
    check_pattern_y4m(video, fps=30, seconds=WATCH, size=(640, 480), header_rate=True)
    check_tone_wav(audio, seconds=WATCH)
    # Once the publisher has seen the subscriber leave, SIGTERM (as Ctrl-C) ends it: --duration is a bound.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and '"left"' not in "".join(publisher.output):
        time.sleep(0.2)
    publisher.terminate()
    publisher.wait(timeout=60)
    publisher.reader.join(timeout=10)
    assert publisher.returncode == 0, "".join(publisher.output)[-2000:]
    joined = [e for e in json_lines("".join(publisher.output)) if e.get("event") == "viewer"]
    assert [e["state"] for e in joined if e["state"] in ("joined", "left")] == ["joined", "left"], joined


def test_subscribe_to_an_aiortc_whep_server(net, workdir, pattern_y4m):
    """`--whep` against another WebRTC stack: aiortc answers camagent's offer (its own SDP,
    ICE, DTLS server side, SRTP, RTCP), streaming the test pattern's Y4M and a 440 Hz tone."""
    server = net.start([PY, os.path.join(HERE, "viewer_standin_whep.py"), "--video", pattern_y4m,
                        "--token", "aiortc-token", "-v"], "aiortc-whep", workdir)
    whep = f"http://{net.addr}:{int(read_line(server, 30))}/whep"
    code, _, err = subscribe(net, "--whep", whep, "--token", "wrong", "--duration", "1")
    assert code == EXIT_UNAUTHORIZED, (code, err[-2000:])

    video, audio = os.path.join(workdir, "aiortc.y4m"), os.path.join(workdir, "aiortc.wav")
    code, lines, err = subscribe(net, "--whep", whep, "--token", "aiortc-token", "--video-out", video,
                                 "--audio-out", audio, "--duration", str(WATCH))
    assert code == 0, (code, err[-3000:], open(server.log_path).read()[-3000:])
    assert events(lines, "state")[0]["codecs"] == "VP8+opus", lines
    # The pattern file is 10 s long and looped: WATCH seconds see no wrap.
    check_pattern_y4m(video, fps=30, seconds=WATCH, size=(640, 480))
    check_tone_wav(audio, seconds=WATCH, hz=440)
    # camagent ended its WHEP session with a DELETE, which the server took.
    net.stop(server)
    log = open(server.log_path).read()
    assert " left" in log and "Traceback" not in log, log[-3000:]


def test_subscribe_exit_codes(net, workdir):
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    subscriber = router.token(session, "subscriber")

    # Nothing to receive, or contradictions: usage.
    code, _, err = subscribe(net, "--session", url, "--token", subscriber, "--no-audio", "--no-video")
    assert code == EXIT_USAGE, err
    code, _, err = subscribe(net, "--session", url, "--token", subscriber, "--stream", "x", "--first")
    assert code == EXIT_USAGE and "contradict" in err, (code, err)
    # An output for a kind left out would stay empty: said, not ignored.
    code, _, err = subscribe(net, "--session", url, "--token", subscriber, "--no-video", "--video-out",
                             os.path.join(workdir, "nothing.y4m"))
    assert code == EXIT_USAGE and "--no-video" in err, (code, err)
    # An unwritable output fails before any network.
    code, _, err = subscribe(net, "--session", url, "--token", subscriber, "--video-out", "/nonexistent/dir/x.y4m")
    assert code == EXIT_OUTPUT and err.count("/nonexistent/dir/x.y4m") == 1, (code, err)
    # Nobody listens there.
    code, _, err = subscribe(net, "--session", f"http://{net.addr}:1/v2/sessions/{session}", "--token", subscriber)
    assert code == EXIT_UNREACHABLE, (code, err)
    # A token that is not this router's.
    code, _, err = subscribe(net, "--session", url, "--token", "not-a-token")
    assert code == EXIT_UNAUTHORIZED, (code, err)
    # No such stream, after waiting for it.
    code, lines, err = subscribe(net, "--session", url, "--token", subscriber, "--stream", "nope",
                                 "--wait-for-stream", "1")
    assert code == EXIT_NO_SUCH_STREAM and "stream nope is not published" in err, (code, err)
    assert [e["state"] for e in lines if e.get("event") == "subscribe"] == ["waiting"], lines
    # --duration bounds the whole command, the wait for the stream included.
    code, lines, err = subscribe(net, "--session", url, "--token", subscriber, "--stream", "nope",
                                 "--wait-for-stream", "60", "--duration", "1.5")
    assert code == EXIT_NO_SUCH_STREAM and "not published" in err and "within --duration 1.5 s" in err, (code, err)
    # A publisher-only token cannot subscribe: said as soon as the session says so (its
    # `connected` capabilities), not after waiting for a stream it could not take.
    code, lines, err = subscribe(net, "--session", url, "--token", router.token(session, "publisher-only"),
                                 "--first", "--wait-for-stream", "30")
    assert code == EXIT_UNAUTHORIZED and "cannot subscribe" in err, (code, err)
    assert not [e for e in lines if e.get("event") == "subscribe"], lines

    # Nor to a stream that is there (the router would refuse its WHEP offer with 403 too).
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                "--name", "front door", duration=10)
    assert router.wait_for_streams(session, 1)[0]["name"] == "front door"
    code, _, err = subscribe(net, "--session", url, "--token", router.token(session, "publisher-only"), "--first")
    assert code == EXIT_UNAUTHORIZED and "cannot subscribe" in err, (code, err)

    # The publisher leaves (its --duration): the subscriber, given no duration, ends with the stream.
    code, lines, err = subscribe(net, "--session", url, "--token", subscriber, "--name", "front door",
                                 "--wait-for-stream", "20")
    # The reason is the session's streamDestroyed: the publisher DELETEd its WHIP resource.
    assert code == EXIT_STREAM_ENDED and "the stream ended: clientDisconnected (streamDestroyed)" in err, \
        (code, err[-2000:])
    assert [e["state"] for e in events(lines, "state")] == ["connected", "ended"], lines
    assert [(e["state"], e["reason"]) for e in events(lines, "stream")] == [("destroyed", "clientDisconnected")], lines
    assert events(lines, "summary")[-1]["video"]["framesDecoded"] > 0, lines
    publisher.wait(timeout=60)
    assert publisher.returncode == 0


def test_ctrl_c_while_waiting_for_the_stream_ends_cleanly(net, workdir):
    """Ctrl-C while no stream is there yet: a clean stop (exit 0, "stopped"), and the session is
    left with a goodbye, so the others hear clientDisconnected at once, not networkDisconnected
    after the rejoin grace. (It used to die by SIGINT, -2: the handler came only with the stream.)"""
    router, session, url, watcher = watched_session(net, workdir)
    try:
        proc = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                          "--first", "--wait-for-stream", "120", "--json"], "camagent-subscriber", workdir)
        seen = []
        for line in output_lines(proc, 60, seen):
            if '"waiting"' in line:
                break
        else:
            raise AssertionError("never waiting:\n" + "".join(seen) + open(proc.log_path).read()[-2000:])
        created = watcher.wait_for("connectionCreated")
        proc.send_signal(signal.SIGINT)
        rest = rest_of_output(proc, 30)
        assert proc.returncode == 0, (proc.returncode, open(proc.log_path).read()[-2000:])
        stopped = [e for e in json_lines("".join(seen) + rest) if e.get("event") == "subscribe"]
        assert [e["state"] for e in stopped] == ["waiting", "stopped"], stopped
        gone = watcher.wait_for("connectionDestroyed",
                                lambda m: m["connectionId"] == created["connection"]["connectionId"], timeout=30)
        assert gone["reason"] == "clientDisconnected", gone
    finally:
        watcher.close()


def test_a_force_disconnected_publisher_ends_the_subscription_with_that_reason(net, workdir):
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                duration=40)
    stream = router.wait_for_streams(session, 1)[0]
    subscriber = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                            "--stream", stream["streamId"], "--json"], "camagent-subscriber", workdir)
    lines = []
    for line in output_lines(subscriber, 60, lines):
        if '"connected"' in line:
            break
    else:
        raise AssertionError("the subscriber never connected:\n" + "".join(lines) + open(subscriber.log_path).read())
    # A moderator's REST call (here the project token) ends the publisher's connection.
    status, _, body = http(net, "DELETE", f"{url}/connections/{stream['connectionId']}", token=router.project_token())
    assert status == 204, (status, body)
    rest = rest_of_output(subscriber, 60)
    err = open(subscriber.log_path).read()
    assert subscriber.returncode == EXIT_STREAM_ENDED, (subscriber.returncode, err[-2000:])
    assert "the stream ended: forceDisconnected (streamDestroyed)" in err, err[-2000:]
    events_seen = json_lines("".join(lines) + rest)
    assert [e["state"] for e in events(events_seen, "state")] == ["connected", "ended"], events_seen
    assert [(e["state"], e["reason"]) for e in events(events_seen, "stream")] == [("destroyed", "forceDisconnected")], \
        events_seen
    net.stop(publisher)


def test_subscribe_to_video_off_and_on_stops_and_restarts_the_media(net, workdir):
    """subscribeToVideo false reaches the router (subscriberSettings), which stops sending video to
    this subscriber; true restarts it at a keyframe. The events come at once, with their reason.
    How long the router takes to act is not asserted (a loaded machine is slow): after each
    command the test waits, within a bound, for the video to stop or come back, then looks."""
    router = Router(net, workdir, "-v")   # its log says when it changes what it sends this subscriber
    session = router.create_session()
    url = router.session_url(session)
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                duration=120)
    router.wait_for_streams(session, 1)
    subscriber = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                            "--first", "--stdin-control", "--duration", "90", "--json"], "camagent-subscriber",
                           workdir, stdin=subprocess.PIPE)
    lines = []
    started = time.monotonic()
    timeline = []   # what the test sent and read, with the seconds since the subscriber started

    def packets(e, kind="video"):
        return e[kind]["packetsReceived"]

    def context(*notes):
        """Everything a failure needs: the subscriber's lines (stats in brief), its stderr, the router's log."""
        return "\n".join([*map(str, notes), "--- subscriber stdout (stats lines: video packets, frames decoded, "
                          "keyframes, decode errors; audio packets)", *timeline[-80:],
                          f"--- subscriber stderr (exit {subscriber.poll()})", open(subscriber.log_path).read()[-3000:],
                          f"--- router (exit {router.proc.poll()})", "".join(router.lines)[-1000:] + router.log()])

    def stats_until(predicate, what, timeout=30):
        for line in output_lines(subscriber, timeout, lines):
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "stats":
                v = event["video"] or {}
                timeline.append(f"{time.monotonic() - started:6.1f} s  stats: video {v.get('packetsReceived')} pkts "
                                f"{v.get('framesDecoded')} frames {v.get('keyframesDecoded')} key "
                                f"{v.get('decodeErrors')} errors; audio {(event['audio'] or {}).get('packetsReceived')}"
                                " pkts")
                if predicate(event):
                    return event
            else:
                timeline.append(f"{time.monotonic() - started:6.1f} s  {line.strip()}")
        raise AssertionError(context(f"no stats line with {what} within {timeout} s"))

    def command(text):
        timeline.append(f"{time.monotonic() - started:6.1f} s  (the test sends {text!r})")
        subscriber.stdin.write(text + "\n")
        subscriber.stdin.flush()

    before = stats_until(lambda e: e["video"]["framesDecoded"] >= 30, "30 frames decoded")
    command("video off")
    # What was in flight still comes, for however long the router takes to act on it; then
    # video packets stop coming (audio goes on). A bounded wait, not a timed assertion.
    off_start = stats_until(no_new_packets("video", 2), "two lines in a row without new video packets after 'video off' (video "
                            "packets still coming: the router has not stopped sending video)", timeout=15)
    off_end = off_start
    for _ in range(3):
        off_end = stats_until(lambda e: True, "lines while video is off")
    assert packets(off_end) - packets(off_start) <= 2, \
        context(f"{packets(off_end) - packets(off_start)} video packets in the 3 s watched after video stopped")
    assert packets(off_end, "audio") - packets(off_start, "audio") >= 50, \
        context(f"{packets(off_end, 'audio') - packets(off_start, 'audio')} audio packets while video was off")
    command("video on")
    stats_until(lambda e: e["video"]["framesDecoded"] > off_end["video"]["framesDecoded"],
                "frames decoded again after 'video on' (video has not come back)", timeout=15)
    after = stats_until(lambda e: e["video"]["framesDecoded"] >= off_end["video"]["framesDecoded"] + 30,
                        "30 more frames decoded after 'video on'")
    assert after["video"]["keyframesDecoded"] > before["video"]["keyframesDecoded"], \
        context("no new keyframe decoded after 'video on'", before["video"], after["video"])
    assert after["video"]["decodeErrors"] == 0, context("decode errors after 'video on'", after["video"])
    subscriber.stdin.close()
    net.stop(subscriber)
    seen = json_lines("".join(lines))
    toggles = [(e["state"], e.get("reason")) for e in seen if e.get("event") == "video" and e["state"] != "dimensions"]
    assert toggles == [("disabled", "subscribeToVideo"), ("enabled", "subscribeToVideo")], context(toggles)
    net.stop(publisher)


def test_a_subscriber_preferring_a_lower_frame_rate_gets_the_base_layer(net, workdir):
    """preferredFrameRate (`subscribe --preferred-frame-rate`): camagent publishes VP8 in two
    temporal layers, and the router sends a subscriber that asks for 15 of a 30 fps stream
    only the base layer, every other frame, while the subscriber beside it gets them all.
    Both decode without an error; the frame counters show the steps (1 and 2)."""
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                fps=30, size="320x240", duration=60)
    outputs = {"full": os.path.join(workdir, "full.y4m"), "half": os.path.join(workdir, "half.y4m")}
    token = router.token(session, "subscriber")
    procs = {name: net.start([BIN, "subscribe", "--session", url, "--token", token, "--first", "--no-audio",
                              "--video-out", path, "--duration", str(WATCH), "--json",
                              *(["--preferred-frame-rate", "15"] if name == "half" else [])], f"sub-{name}", workdir)
             for name, path in outputs.items()}
    summaries, steps, densities = {}, {}, {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, (name, proc.returncode, open(proc.log_path).read()[-3000:], router.log())
        summaries[name] = events(json_lines(out), "summary")[-1]["video"]
        assert summaries[name]["decodeErrors"] == 0, (name, summaries[name])
        counters = [c for c in (decode_counter(y) for y, _, _ in read_y4m(outputs[name])) if c is not None]
        assert len(counters) >= 0.4 * 15 * WATCH, (name, len(counters))
        steps[name] = [b - a for a, b in zip(counters, counters[1:])]
        # Pictures per frame of the publisher's over the span it decoded: not framesDecoded
        # over --duration, which counts from the process's start, so a subscriber that
        # connected a second later would move the ratio below though nothing was wrong.
        densities[name] = (len(counters) - 1) / (counters[-1] - counters[0])
    # Medians: a frame the encoder or a loaded machine skips moves a step, not the middle.
    assert sorted(steps["full"])[len(steps["full"]) // 2] == 1, steps["full"]
    assert sorted(steps["half"])[len(steps["half"]) // 2] == 2, steps["half"]
    assert all(s > 0 for s in steps["half"]), steps["half"]
    ratio = densities["half"] / densities["full"]
    assert 0.35 <= ratio <= 0.65, (ratio, densities, summaries)
    # Its --duration is only a bound: once the subscribers are done it is stopped (SIGTERM ends it cleanly).
    assert net.stop(publisher) == 0, "".join(publisher.output)[-2000:]


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_a_subscriber_preferring_a_smaller_picture_gets_the_simulcast_layer_that_fits(net, workdir, codec):
    """preferredResolution (`subscribe --preferred-resolution`): `publish --simulcast` sends each
    frame at 640x360 and at 320x180, on two SSRCs announced as an a=ssrc-group:SIM; the router
    sends a subscriber that prefers at most 320x240 the small layer, from its first picture on,
    and the subscriber beside it, which prefers nothing, the large one. Both are the test
    pattern with its counter advancing; neither decodes a picture of the other size."""
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                "--simulcast", codec=codec, size="640x360", duration=60)
    router.wait_for_streams(session, 1)
    outputs = {"full": os.path.join(workdir, "full.y4m"), "small": os.path.join(workdir, "small.y4m")}
    token = router.token(session, "subscriber")
    procs = {name: net.start([BIN, "subscribe", "--session", url, "--token", token, "--first", "--no-audio",
                              "--video-out", path, "--duration", str(WATCH), "--json",
                              *(["--preferred-resolution", "320x240"] if name == "small" else [])], f"sub-{name}", workdir)
             for name, path in outputs.items()}
    sizes = {"full": (640, 360), "small": (320, 180)}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, (name, proc.returncode, open(proc.log_path).read()[-3000:], router.log())
        lines = json_lines(out)
        summary = events(lines, "summary")[-1]["video"]
        assert summary["decodeErrors"] == 0, (name, summary)
        seen = {(e["width"], e["height"]) for e in events(lines, "video") if e.get("state") == "dimensions"}
        assert seen == {sizes[name]}, (name, seen)
        check_pattern_y4m(outputs[name], fps=15, seconds=WATCH, size=sizes[name])
    # Its --duration is only a bound: once the subscribers are done it is stopped (SIGTERM ends it cleanly).
    assert net.stop(publisher) == 0, "".join(publisher.output)[-2000:]
    negotiated = events(json_lines("".join(publisher.output)), "negotiated")
    assert negotiated and negotiated[0]["simulcast"] == ["640x360", "320x180"], negotiated


def test_a_subscriber_changing_its_preferred_resolution_live_switches_layers(net, workdir):
    """preferredResolution changed while receiving (`subscribe --stdin-control`: 'resolution WxH',
    'resolution any'): the router moves the subscriber to the other simulcast layer at that
    layer's next keyframe, on the same connection, and the decoder follows the size without an
    error. Bounded waits; how soon the switch comes is not asserted."""
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                                "--simulcast", size="640x360", duration=120)
    router.wait_for_streams(session, 1)
    subscriber = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                            "--first", "--no-audio", "--stdin-control", "--duration", "90", "--json"],
                           "camagent-subscriber", workdir, stdin=subprocess.PIPE)
    lines = []

    def until(predicate, what, timeout=30):
        for line in output_lines(subscriber, timeout, lines):
            event = json.loads(line) if line.startswith("{") else {}
            if predicate(event):
                return event
        raise AssertionError(f"no {what} within {timeout} s (exit {subscriber.poll()}):\n" + "".join(lines[-40:])
                             + open(subscriber.log_path).read()[-3000:] + router.log())

    def size(width, height):
        return lambda e: e.get("event") == "video" and e.get("state") == "dimensions" \
            and (e["width"], e["height"]) == (width, height)

    def command(text):
        subscriber.stdin.write(text + "\n")
        subscriber.stdin.flush()

    until(size(640, 360), "first picture of 640x360")
    command("resolution 9000x100")   # beyond what the router takes: said here, not sent
    command("resolution 320x180")
    until(size(320, 180), "switch to the 320x180 layer")
    small = until(lambda e: e.get("event") == "stats", "stats line")["video"]
    command("resolution any")
    until(size(640, 360), "switch back to the 640x360 layer")
    later = until(lambda e: e.get("event") == "stats" and e["video"]["framesDecoded"] >= small["framesDecoded"] + 15,
                  "15 more frames decoded after switching back")["video"]
    assert later["decodeErrors"] == 0, later
    subscriber.stdin.close()
    net.stop(subscriber)
    states = [e["state"] for e in events(json_lines("".join(lines)), "state")]
    assert states == ["connected"], states   # one connection throughout: no reconnect
    said = open(subscriber.log_path).read()
    assert 'unknown command "resolution 9000x100" (video on|off, audio on|off, resolution WxH (up to 7680x4320)|any)' in said, said[-2000:]
    net.stop(publisher)


@pytest.mark.parametrize("where", ["router", "publishs-own-session"])
def test_the_publishers_video_and_audio_off_and_on(net, workdir, where):
    """`publish --stdin-control`: 'video off' stops encoding and sending video (publishVideo), the
    stream's hasVideo turns false, and each subscriber hears videoDisabled with reason publishVideo
    from the router, on the signalling and in `camagent subscribe`; 'video on' brings it back with
    a keyframe. 'audio off' stops the audio (hasAudio false) while video goes on. Into a router's
    session (`publish --session`), and in publish's own session, whose subscribers are viewers of
    its encoder. Bounded waits: how long each step takes on a loaded machine is not asserted."""
    from test_embedded_session import EmbeddedSession
    if where == "router":
        router = Router(net, workdir)
        session = router.create_session()
        url = router.session_url(session)
        publisher = drain(net.start([BIN, "publish", "--device", "test-pattern", "--audio", "test-tone", "--session", url,
                                     "--token", router.token(session, "publisher"), "--size", "320x240", "--fps", "15",
                                     "--duration", "90", "--stdin-control", "--json"], "camagent-publisher", workdir,
                                    stdin=subprocess.PIPE))
    else:
        router = EmbeddedSession(net, workdir, 90, "--stdin-control", stdin=subprocess.PIPE)
        session, url, publisher = router.session, router.session_url(router.session), router.proc
    watcher = SessionWatcher(net, url, router.token(session, "subscriber"))
    try:
        stream = router.wait_for_streams(session, 1)[0]
        subscriber = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                                "--first", "--duration", "80", "--json"], "camagent-subscriber", workdir)
        lines = []

        def stats_until(predicate, what, timeout=30):
            for line in output_lines(subscriber, timeout, lines):
                event = json.loads(line) if line.startswith("{") else {}
                if event.get("event") == "stats" and predicate(event):
                    return event
            raise AssertionError(f"no stats line with {what} within {timeout} s: {lines[-10:]}\n"
                                 + open(subscriber.log_path).read()[-2000:] + "".join(publisher.output)[-2000:])

        def command(text):
            publisher.stdin.write(text + "\n")
            publisher.stdin.flush()

        before = stats_until(lambda e: e["video"]["framesDecoded"] >= 30, "30 frames decoded")
        command("video off")
        changed = watcher.wait_for("streamPropertyChanged", lambda m: m["property"] == "hasVideo")
        assert (changed["streamId"], changed["oldValue"], changed["newValue"]) == (stream["streamId"], True, False), changed
        disabled = watcher.wait_for("videoDisabled", lambda m: m["reason"] == "publishVideo")
        subscriber_id = disabled["subscriberId"]
        off = stats_until(no_new_packets("video", 2), "video packets stopping after 'video off'")
        more = stats_until(lambda e: e["audio"]["packetsReceived"] >= off["audio"]["packetsReceived"] + 50,
                           "audio going on while video is off")
        assert more["video"]["packetsReceived"] - off["video"]["packetsReceived"] <= 2, (off["video"], more["video"])

        command("video on")
        watcher.wait_for("videoEnabled", lambda m: m["reason"] == "publishVideo" and m["subscriberId"] == subscriber_id)
        after = stats_until(lambda e: e["video"]["framesDecoded"] >= more["video"]["framesDecoded"] + 30,
                            "30 more frames decoded after 'video on'")
        assert after["video"]["keyframesDecoded"] > before["video"]["keyframesDecoded"], (before["video"], after["video"])

        command("audio off")
        changed = watcher.wait_for("streamPropertyChanged", lambda m: m["property"] == "hasAudio")
        assert (changed["oldValue"], changed["newValue"]) == (True, False), changed
        quiet = stats_until(no_new_packets("audio", 2), "audio packets stopping after 'audio off'")
        later = stats_until(lambda e: e["video"]["framesDecoded"] >= quiet["video"]["framesDecoded"] + 15,
                            "video going on while audio is off")
        assert later["audio"]["packetsReceived"] - quiet["audio"]["packetsReceived"] <= 2, (quiet["audio"], later["audio"])
        net.stop(subscriber)
    finally:
        watcher.close()
        publisher.stdin.close()
        net.stop(publisher)
        publisher.reader.join(timeout=10)

    seen = json_lines("".join(lines))
    toggles = [(e["state"], e.get("reason")) for e in seen if e.get("event") == "video" and e["state"] != "dimensions"]
    assert toggles == [("disabled", "publishVideo"), ("enabled", "publishVideo")], toggles
    said = [(e["kind"], e["on"]) for e in json_lines("".join(publisher.output)) if e.get("event") == "publishing"]
    assert said == [("video", False), ("video", True), ("audio", False)], said
