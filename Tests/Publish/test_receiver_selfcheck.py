"""The WHIP receiver proven against a publisher nobody here wrote (aiortc), before
camagent is pointed at it: every check test_publish_aiortc.py makes of camagent
is made here of aiortc_publisher.py, including each fault knob."""
import pytest

from publish_support import (EXIT_CONNECTION, EXIT_OK, EXIT_REFUSED, EXIT_UNAUTHORIZED, EXIT_UNREACHABLE,
                             aiortc_publish, check_audio, check_video, describe, json_lines, states,
                             subscriber_result, total_frames)

TOKEN = "selfcheck-token"


def one_session(summary):
    assert len(summary["sessions"]) == 1, [s["id"] for s in summary["sessions"]]
    s = summary["sessions"][0]
    assert len(s["video"]) == 1 and len(s["audio"]) == 1, s
    return s


def test_vp8_opus(net, receiver_factory, pattern_y4m):
    r = receiver_factory(token=TOKEN)
    proc = aiortc_publish(net, r.url, pattern_y4m, codec="vp8", token=TOKEN, duration=4)
    summary = r.stop()
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    events = json_lines(proc.stdout)
    assert "connected" in states(events)
    s = one_session(summary)
    assert s["deleted"] and summary["deletes"] == 1
    assert s["answerCodecs"]["0"][0] == "VP8"
    check_video(s["video"][0], duration=4, codec="VP8")
    check_audio(s["audio"][0], duration=4)


def test_h264_opus(net, receiver_factory, pattern_y4m):
    r = receiver_factory(token=TOKEN)
    proc = aiortc_publish(net, r.url, pattern_y4m, codec="h264", token=TOKEN, duration=4)
    summary = r.stop()
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    s = one_session(summary)
    assert s["deleted"]
    check_video(s["video"][0], duration=4, codec="H264")
    check_audio(s["audio"][0], duration=4)


def test_wrong_token_is_401(net, receiver_factory, pattern_y4m):
    r = receiver_factory(token=TOKEN)
    proc = aiortc_publish(net, r.url, pattern_y4m, token="not-" + TOKEN, duration=2)
    summary = r.stop()
    assert proc.returncode == EXIT_UNAUTHORIZED, describe(proc)
    assert summary["unauthorized"] == 1 and summary["sessions"] == []


def test_missing_token_is_401(net, receiver_factory, pattern_y4m):
    r = receiver_factory(token=TOKEN)
    proc = aiortc_publish(net, r.url, pattern_y4m, token=None, duration=2)
    summary = r.stop()
    assert proc.returncode == EXIT_UNAUTHORIZED, describe(proc)
    assert summary["requests"][0]["authorization"] == ""


def test_forced_status(net, receiver_factory, pattern_y4m):
    for status in (404, 503):
        r = receiver_factory("--status", str(status))
        proc = aiortc_publish(net, r.url, pattern_y4m, duration=2)
        summary = r.stop()
        assert proc.returncode == EXIT_REFUSED, describe(proc)
        assert [q["status"] for q in summary["requests"]] == [status]


def test_unknown_resource_is_404(net, receiver_factory):
    r = receiver_factory()
    script = ("import sys, urllib.request, urllib.error\n"
              "req = urllib.request.Request(sys.argv[1], method='DELETE')\n"
              "try:\n    urllib.request.urlopen(req, timeout=10); print(200)\n"
              "except urllib.error.HTTPError as e:\n    print(e.code)\n")
    url = r.url.replace("/whip", "/resource/nosuchthing")
    proc = net.run(["python3", "-c", script, url], timeout=30)
    assert proc.stdout.strip() == "404", describe(proc)


def test_nothing_listening(net, pattern_y4m):
    # Port 9 (discard) on the namespace's own address: nothing listens, the SYN is refused.
    proc = aiortc_publish(net, f"http://{net.addr}:9/whip", pattern_y4m, duration=2)
    assert proc.returncode == EXIT_UNREACHABLE, describe(proc)


def test_bad_fingerprint_is_refused(net, receiver_factory, pattern_y4m):
    r = receiver_factory("--bad-fingerprint")
    proc = aiortc_publish(net, r.url, pattern_y4m, duration=3)
    summary = r.stop()
    assert proc.returncode == EXIT_CONNECTION, describe(proc, r.log())
    assert len(summary["sessions"]) == 1
    # The receiver's side may well reach "connected": aiortc answers as the DTLS client,
    # and a publisher that checks the fingerprint after its handshake completes aborts
    # only then. What matters is that the publisher never reports it, and sends nothing.
    assert "connected" not in states(json_lines(proc.stdout)), proc.stdout
    assert total_frames(summary, "video") == 0 and total_frames(summary, "audio") == 0


def test_vanish_then_reconnect(net, receiver_factory, pattern_y4m):
    r = receiver_factory("--vanish-after", "2")
    # Vanished at 2 s, found silent about 4 s later: 14 s leaves the new session time to
    # connect and decode on a busy machine (at 9 s it had about 2 s).
    proc = aiortc_publish(net, r.url, pattern_y4m, duration=14, timeout=120)
    summary = r.stop()
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    assert "reconnecting" in states(json_lines(proc.stdout)), proc.stdout
    sessions = summary["sessions"]
    assert len(sessions) >= 2, [s["id"] for s in sessions]
    # The last session is the one that stayed (an attempt between may have failed).
    assert sessions[0]["vanished"] and not sessions[-1]["vanished"]
    assert sessions[0]["video"][0]["frames"] > 0
    assert sessions[-1]["video"][0]["frames"] > 0 and sessions[-1]["video"][0]["countersRead"] > 0
    assert "connected" in sessions[-1]["states"]


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_janus_path(net, janus_room, pattern_y4m, codec):
    """aiortc publisher -> bridge -> Janus -> aiortc subscriber: the path test_publish_janus.py uses."""
    summary, _ = janus_room.watch(
        lambda: aiortc_publish(net, janus_room.url, pattern_y4m, codec=codec, duration=9), watch=4)
    check_video(summary["video"][0], duration=4, codec=codec.upper())
    check_audio(summary["audio"][0], duration=4)


def test_an_analysis_error_fails_the_receivers_check(net, receiver_factory, pattern_y4m):
    """A frame whip_receiver.py cannot analyse is recorded in its session, and
    Receiver.stop() (which every publish test calls) fails on it."""
    r = receiver_factory("--break-analysis", "video")
    proc = aiortc_publish(net, r.url, pattern_y4m, duration=3)
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    with pytest.raises(AssertionError, match="broken on purpose"):
        r.stop()


def test_an_analysis_error_fails_the_janus_subscriber(net, janus_room, pattern_y4m):
    """janus_subscriber.py reports a track it could not analyse as its error, and exits 1."""
    sub, path = janus_room.subscribe(duration=4, extra=["--break-analysis", "audio"])
    proc = aiortc_publish(net, janus_room.url, pattern_y4m, duration=9)
    assert proc.returncode == EXIT_OK, describe(proc, janus_room.log())
    summary = subscriber_result(sub, path, timeout=60)
    assert summary["exit"] == 1, summary["error"]
    assert summary["error"].startswith("analysis: audio") and "on purpose" in summary["error"], summary["error"]
