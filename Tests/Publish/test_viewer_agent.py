"""camagent's built-in viewer server (`camagent publish` without --whip), as a black box.

camagent serves the test pattern and a 1 kHz tone in the test's network
namespace; aiortc viewers (whep_viewer.py) and headless Chromium
(viewer_chromium.py, on camagent's own page) watch it over WHEP. Checked:
several viewers at once from one encoder, one leaving while the other keeps
decoding, a vanished viewer dropped when its consent expires, tokens, 404,
garbage SDP, /stats and /metrics, H.264, a port already taken, and the viewer
server beside a WHIP session (--whip with --listen). Every wait has
a timeout; nothing asserts on time. CAMAGENT_TEST_KEEP_LOG=FILE keeps the whole
camagent log of a failing test there (run with -v to get the SDP in it).
"""
import json
import os
import signal
import time

import pytest

from publish_support import (BIN, HERE, PY, check_audio, check_video, drain, drained_lines, finish_drained, json_lines,
                             track_brief)
from viewer_checks import check_pattern_frames, chromium_or_fail, open_page

TOKEN = "agent-viewer-token"
FPS = 15


class Agent:
    """`camagent publish` serving viewers inside the test's network."""

    def __init__(self, net, workdir, *, duration, token=TOKEN, codec="vp8", extra=(), wrapper=(), name="camagent"):
        """`wrapper` goes before camagent's own path (`env VAR=...`: for camagent alone, not `ip netns exec`);
        `name` names its log (NAME.log in `workdir`)."""
        self.net = net
        args = [*wrapper, BIN, "publish", "--device", "test-pattern", "--size", "640x480", "--fps", str(FPS),
                "--audio", "test-tone", "--listen", f"{net.addr}:0", "--codec", codec,
                "--duration", str(duration), "--json", *extra]
        args += ["--viewer-token", token] if token else ["--open"]
        self.token = token
        # Read on a thread from the start: with --json it prints about 60 KB in a 16 s run with
        # two connections, near a pipe's 64 KiB; a full pipe would stall its event printing.
        self.proc = drain(net.start(args, name, workdir))
        self.checked = 0   # proc.output's lines before this one were looked at by _wait_for
        self.serving = self._wait_for("serving", timeout=60)
        self.whep = self.serving["whep"]
        self.base = self.whep[: -len("whep")]

    def _wait_for(self, event, timeout, match=lambda e: True):
        """The first JSON event named `event` (for which match(e) holds) camagent prints in time."""
        for index, line in drained_lines(self.proc, self.checked, timeout):
            self.checked = index + 1
            for e in json_lines(line):
                if e.get("event") == event and match(e):
                    return e
        raise AssertionError(f"camagent printed no matching {event!r} line (exit {self.proc.poll()}):\n"
                             + "".join(self.lines)[-2000:] + "\n" + self.log())

    def stop(self):
        """Ends it early, as Ctrl-C would (camagent stops cleanly on SIGTERM)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        return self.finish()

    def finish(self, timeout=90):
        """Waits for the end of --duration; returns (exit code, every JSON event)."""
        out = finish_drained(self.proc, timeout)
        return self.proc.returncode, json_lines(out)

    @property
    def lines(self):
        """Every stdout line so far."""
        return self.proc.output

    def log(self):
        text = open(self.proc.log_path).read()
        if os.environ.get("CAMAGENT_TEST_KEEP_LOG"):
            open(os.environ["CAMAGENT_TEST_KEEP_LOG"], "w").write(text)
        return text[-3000:]


def start_viewer(net, workdir, agent, name, *, duration=6, leave_after=None, token="same", extra=()):
    token = agent.token if token == "same" else token
    path = os.path.join(workdir, f"{name}.json")
    args = [PY, os.path.join(HERE, "whep_viewer.py"), "--url", agent.whep, "--duration", str(duration),
            "--summary", path, "-v", *extra]
    if leave_after is not None:
        args += ["--leave-after", str(leave_after)]
    if token:
        args += ["--token", token]
    proc = net.start(args, name, workdir)
    proc.summary_path = path
    return proc


def viewer_result(proc, timeout=90):
    proc.wait(timeout=timeout)
    with open(proc.summary_path) as f:
        summary = json.load(f)
    summary["exit"] = proc.returncode
    return summary


def brief(summary):
    return json.dumps({k: summary.get(k) for k in ("exit", "status", "answerError", "error", "states",
                                                  "deleteStatus")})


def http(net, method, url, body=None, headers=None, timeout=20):
    """One HTTP request from inside the test's network: (status, body text)."""
    code = ("import json, sys, urllib.request, urllib.error\n"
            "a = json.loads(sys.argv[1])\n"
            "req = urllib.request.Request(a['url'], data=a['body'].encode() if a['body'] is not None else None,\n"
            "                             method=a['method'], headers=a['headers'])\n"
            "try:\n"
            "    r = urllib.request.urlopen(req, timeout=10); status, text = r.status, r.read().decode()\n"
            "except urllib.error.HTTPError as e:\n"
            "    status, text = e.code, e.read().decode()\n"
            "print(json.dumps([status, text]))\n")
    arg = json.dumps({"url": url, "method": method, "body": body, "headers": headers or {}})
    done = net.run([PY, "-c", code, arg], timeout=timeout)
    assert done.returncode == 0, done.stderr
    status, text = json.loads(done.stdout)
    return status, text


def viewer_events(events):
    return [(e["state"], e["id"]) for e in events if e.get("event") == "viewer"]


def viewer_counts(events):
    return [e["viewers"] for e in events if e.get("event") == "stats"]


def test_two_viewers_then_one_leaves(net, workdir):
    agent = Agent(net, workdir, duration=22)
    leaver = start_viewer(net, workdir, agent, "leaver", leave_after=6)
    stayer = start_viewer(net, workdir, agent, "stayer", duration=12)
    a, b = viewer_result(leaver), viewer_result(stayer)
    code, events = agent.stop()  # the viewers are done: --duration is only a bound
    assert code == 0, "".join(agent.lines)[-2000:] + agent.log()
    assert a["exit"] == 0 and b["exit"] == 0, (brief(a), brief(b), agent.log())
    assert a["deleteStatus"] == 200, brief(a)

    # Both decoded the pattern and the tone, from the one encoder.
    for s, watched in ((a, 6), (b, 12)):
        assert len(s["video"]) == 1 and len(s["audio"]) == 1, brief(s)
        check_video(s["video"][0], duration=watched - 1, fps=FPS, codec="VP8")
        check_audio(s["audio"][0], duration=watched - 1)

    # The stayer kept decoding after the leaver had gone: counters well beyond the
    # leaver's last one (the pattern counts frames, so this is about frames, not time).
    last_a, last_b = a["video"][0]["lastCounter"], b["video"][0]["lastCounter"]
    assert last_b > last_a + 2 * FPS, (last_a, last_b, track_brief(b["video"][0]))

    # camagent saw two viewers, then one, and which one left by DELETE.
    seen = viewer_events(events)
    joined = [i for state, i in seen if state == "joined"]
    left = [e for e in events if e.get("event") == "viewer" and e["state"] == "left"]
    assert len(joined) == 2, seen
    assert left and left[0]["reason"] == "the viewer ended the session", left
    counts = viewer_counts(events)
    assert 2 in counts and 1 in counts[counts.index(2):], counts
    summary = [e for e in events if e.get("event") == "summary"][-1]
    assert summary["framesEncoded"] > 0 and summary["state"] == "serving", summary



def test_whip_and_listen_at_once_feed_both(net, workdir, receiver_factory):
    # README: `publish --whip URL --listen HOST:PORT` publishes to the WHIP server and serves
    # the built-in viewer at once, from one encoder. The aiortc WHIP receiver and an aiortc
    # WHEP viewer both decode the pattern and the tone, over the same stretch of frames.
    receiver = receiver_factory()
    agent = Agent(net, workdir, duration=16, extra=["--whip", receiver.url])
    viewer = viewer_result(start_viewer(net, workdir, agent, "viewer", duration=8))
    code, events = agent.finish()
    summary = receiver.stop()
    assert code == 0, "".join(agent.lines)[-2000:] + agent.log()
    negotiated = [e for e in events if e.get("event") == "negotiated"]
    assert negotiated and negotiated[0]["whip"] == receiver.url and negotiated[0]["listen"], negotiated

    # The WHIP receiver: one session, DELETEd at the end, the pattern and the tone.
    assert len(summary["sessions"]) == 1, [s["id"] for s in summary["sessions"]]
    session = summary["sessions"][0]
    assert session["deleted"], "camagent did not DELETE its WHIP resource"
    check_video(session["video"][0], duration=14, fps=FPS, codec="VP8")
    check_audio(session["audio"][0], duration=14)

    # The viewer: the same, while the WHIP session ran.
    assert viewer["exit"] == 0, (brief(viewer), agent.log())
    assert len(viewer["video"]) == 1 and len(viewer["audio"]) == 1, brief(viewer)
    check_video(viewer["video"][0], duration=7, fps=FPS, codec="VP8")
    check_audio(viewer["audio"][0], duration=7)
    whip_video, whep_video = session["video"][0], viewer["video"][0]
    assert whip_video["firstCounter"] <= whep_video["firstCounter"] < whep_video["lastCounter"] \
        <= whip_video["lastCounter"], (track_brief(whip_video), track_brief(whep_video))
    assert [state for state, _ in viewer_events(events)].count("joined") == 1, viewer_events(events)

def test_tokens_errors_stats_and_metrics(net, workdir):
    agent = Agent(net, workdir, duration=20)
    watcher = start_viewer(net, workdir, agent, "watcher", duration=10)
    # No token, a wrong token: 401, and no viewer is made.
    nobody = viewer_result(start_viewer(net, workdir, agent, "no-token", token=None))
    wrong = viewer_result(start_viewer(net, workdir, agent, "wrong-token", token="wrong-" + TOKEN))
    assert nobody["exit"] == 2 and nobody["status"] == 401, brief(nobody)
    assert wrong["exit"] == 2 and wrong["status"] == 401, brief(wrong)

    auth = {"Authorization": f"Bearer {TOKEN}"}
    # Garbage SDP: 400, while the watcher keeps decoding.
    status, text = http(net, "POST", agent.whep, body="this is not SDP\r\n",
                        headers={**auth, "Content-Type": "application/sdp"})
    assert status == 400, (status, text)
    status, _ = http(net, "POST", agent.whep + "?token=" + TOKEN, body="v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\n",
                     headers={"Content-Type": "application/sdp"})
    assert status == 400, status
    # Unknown resources: 404.
    status, _ = http(net, "DELETE", agent.whep + "/0123456789abcdef", headers=auth)
    assert status == 404, status
    # The page itself needs no token; /stats and /metrics answer.
    status, page = http(net, "GET", agent.base)
    assert status == 200 and "<video" in page, status
    # /metrics counts the watcher once its connection is up.
    deadline, values, metrics = time.monotonic() + 30, {}, ""
    while time.monotonic() < deadline:
        status, metrics = http(net, "GET", agent.base + "metrics?token=" + TOKEN)
        assert status == 200, (status, metrics)
        values = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line and not line.startswith("#"))
        if float(values["camagent_viewers"]) == 1:
            break
        time.sleep(0.5)
    assert float(values["camagent_viewers"]) == 1, metrics
    assert float(values["camagent_frames_encoded_total"]) > 0, metrics
    status, text = http(net, "GET", agent.base + "stats?token=" + TOKEN)
    assert status == 200, (status, text)
    stats = json.loads(text)
    assert stats["state"] == "serving" and [v["state"] for v in stats["viewers"]] == ["connected"], stats
    assert stats["viewers"][0]["video"]["packetsSent"] > 0, stats

    w = viewer_result(watcher)
    code, events = agent.stop()  # the watcher is done: --duration is only a bound
    assert code == 0, agent.log()
    assert w["exit"] == 0, brief(w)
    check_video(w["video"][0], duration=9, fps=FPS, codec="VP8")
    check_audio(w["audio"][0], duration=9)
    assert len([1 for state, _ in viewer_events(events) if state == "joined"]) == 1, viewer_events(events)


def test_open_server_h264_viewer(net, workdir):
    agent = Agent(net, workdir, duration=14, token=None, codec="h264")
    assert agent.serving.get("token") is None and "token=" not in agent.serving["url"], agent.serving
    s = viewer_result(start_viewer(net, workdir, agent, "h264", duration=7, token=None))
    code, _ = agent.stop()  # the viewer is done: --duration is only a bound
    assert code == 0, agent.log()
    assert s["exit"] == 0, brief(s)
    assert "H264/90000" in s["answer"] and "a=ice-lite" in s["answer"], s["answer"]
    check_video(s["video"][0], duration=6, fps=FPS, codec="H264")
    check_audio(s["audio"][0], duration=6)


def test_a_viewer_that_cannot_analyse_a_frame_fails(net, workdir):
    """whep_viewer.py exits 5 (not 0) when a track's analysis failed: the tests above
    require exit 0, so a viewer that stopped checking frames fails them."""
    agent = Agent(net, workdir, duration=10)
    s = viewer_result(start_viewer(net, workdir, agent, "broken", duration=4,
                                   extra=["--break-analysis", "video"]))
    agent.stop()
    assert s["exit"] == 5, brief(s)
    assert s["error"].startswith("video:") and "on purpose" in s["error"], brief(s)


def test_vanished_viewer_is_dropped_when_consent_expires(net, workdir):
    agent = Agent(net, workdir, duration=30, extra=["--viewer-timeout", "8"])
    ghost = start_viewer(net, workdir, agent, "ghost", duration=60)
    agent._wait_for("viewer", timeout=40)          # it joined
    os.killpg(ghost.pid, signal.SIGKILL)            # gone without a word: no DELETE, no BYE
    left = agent._wait_for("viewer", timeout=40)
    assert left["state"] == "left" and "consent" in left["reason"], left
    code, events = agent.stop()
    assert code == 0, agent.log()
    summary = [e for e in events if e.get("event") == "summary"][-1]
    assert summary["viewers"] == 0 and summary["viewerStats"] == [], summary


def test_chromium_plays_camagents_own_page(net, workdir):
    chromium_or_fail()
    # Chromium without media permission gathers only on the default route's interface.
    added = net.run(["ip", "route", "add", "default", "via", "10.77.0.254", "dev", net.iface], timeout=10)
    assert added.returncode == 0, added.stderr
    agent = Agent(net, workdir, duration=120, extra=["-v"])
    report = open_page(net, workdir, agent.serving["url"], timeout=40)
    try:
        check_pattern_frames(report, size=(640, 480))
    except AssertionError as e:
        agent.stop()
        raise AssertionError(f"{e}\n--- camagent log\n{agent.log()}") from None
    # Leaving the page DELETEd its WHEP resource, and the viewer left while camagent still
    # ran (stopping camagent ends the session too, as "the publisher stopped"; a page that
    # just vanished would end by consent expiry, much later). The page sends its DELETE
    # and closes its peer connection at once, so either may reach camagent first: the
    # DELETE answered 200 ended the session ("the viewer ended the session"), or the
    # DTLS close did ("the peer closed the connection") and the DELETE then found no
    # such viewer (404). Either way the DELETE reached camagent, for this viewer.
    left = agent._wait_for("viewer", timeout=20, match=lambda e: e.get("state") == "left")
    deletes = report["deletes"]
    assert len(deletes) == 1 and deletes[0]["url"].split("?")[0].endswith("/whep/" + left["id"]), (deletes, left)
    if deletes[0]["status"] == 200:
        assert left["reason"] == "the viewer ended the session", (deletes, left)
    else:
        assert deletes[0]["status"] == 404 and left["reason"] == "the peer closed the connection", (deletes, left)
    code, events = agent.stop()
    assert code == 0, agent.log()
    seen = viewer_events(events)
    assert [s for s, _ in seen][:2] == ["joined", "left"], seen


def test_a_taken_port_is_a_clear_error(net, workdir):
    agent = Agent(net, workdir, duration=30)
    port = agent.serving["port"]
    second = net.run([BIN, "publish", "--device", "test-pattern", "--audio", "none",
                      "--listen", f"{net.addr}:{port}", "--duration", "5"], timeout=60)
    agent.stop()
    assert second.returncode == 84, (second.returncode, second.stderr[-2000:])
    assert "cannot listen" in second.stderr and "in use" in second.stderr, second.stderr[-2000:]
