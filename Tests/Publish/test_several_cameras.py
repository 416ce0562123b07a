"""One agent, several cameras: `camagent publish --device A --device B` makes a
stream of each, with an encoder of its own.

On the built-in viewer, camera N (N > 1) is at /cameras/N/ (its page, WHEP
endpoint and stats), the first stays at /; aiortc viewers (whep_viewer.py)
decode each camera's test pattern. Into a router session, each camera is a
stream of the session, named after it. The microphone goes with the first
camera. A WHIP endpoint is one stream, so --whip with several cameras is a
usage error. Two vivid instances in the VM: Tests/Device/test_publish.py.
"""
import json
import os
import signal
import subprocess

from publish_support import BIN, HERE, PY, check_audio, check_video, drain, drained_lines, finish_drained, json_lines
from router_support import Router, drain
from router_support import http as router_http
from test_viewer_agent import http

TOKEN = "several-cameras-token"
FPS = 15
WATCH = 8


class TwoCameraAgent:
    """`camagent publish` of two test-pattern cameras on the built-in viewer."""

    def __init__(self, net, workdir, duration):
        self.proc = net.start([BIN, "publish", "--device", "test-pattern", "--device", "test-pattern",
                               "--size", "640x480", "--fps", str(FPS), "--audio", "test-tone",
                               "--listen", f"{net.addr}:0", "--viewer-token", TOKEN, "--duration", str(duration),
                               "--json"], "camagent", workdir)
        drain(self.proc)   # two cameras' stats every second: never let the pipe fill
        self.serving = {}
        for _, line in drained_lines(self.proc, 0, 60):
            for e in json_lines(line):
                if e.get("event") == "serving":
                    self.serving[e["camera"]] = e
            if len(self.serving) == 2:
                break
        assert sorted(self.serving) == [1, 2], "".join(self.lines)[-2000:] + open(self.proc.log_path).read()[-2000:]

    def stop(self):
        """Ends it as Ctrl-C would (camagent stops cleanly on SIGTERM), once the viewers are done."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        return self.finish()

    def finish(self, timeout=90):
        out = finish_drained(self.proc, timeout)   # before returncode: it waits for the exit
        return self.proc.returncode, json_lines(out)

    @property
    def lines(self):
        """Every stdout line so far."""
        return self.proc.output


def start_watching(net, workdir, url, name):
    """An aiortc WHEP viewer of `url` for WATCH s; `finish_watching` reads its summary."""
    path = os.path.join(workdir, f"{name}.json")
    proc = net.start([PY, os.path.join(HERE, "whep_viewer.py"), "--url", url, "--token", TOKEN,
                      "--duration", str(WATCH), "--summary", path, "-v"], name, workdir)
    return name, proc, path


def finish_watching(watching):
    name, proc, path = watching
    proc.wait(timeout=90)
    with open(path) as f:
        summary = json.load(f)
    assert proc.returncode == 0, (name, proc.returncode, summary.get("error"), open(proc.log_path).read()[-2000:])
    return summary


def test_two_cameras_are_two_streams_on_the_built_in_viewer(net, workdir):
    agent = TwoCameraAgent(net, workdir, duration=20)
    first, second = agent.serving[1], agent.serving[2]
    assert first["whep"].endswith(f":{first['port']}/whep"), first
    assert second["whep"].endswith(f":{first['port']}/cameras/2/whep"), second
    assert "/cameras/2/?token=" in second["url"], second

    # Each camera's viewer decodes that camera's pattern; the tone is the first camera's.
    # Both watch at once, as two kiosk operators would.
    watching = [start_watching(net, workdir, first["whep"], "viewer-1"),
                start_watching(net, workdir, second["whep"], "viewer-2")]
    one, two = (finish_watching(w) for w in watching)
    check_video(one["video"][0], duration=WATCH - 1, fps=FPS, codec="VP8")
    check_audio(one["audio"][0], duration=WATCH - 1)
    check_video(two["video"][0], duration=WATCH - 1, fps=FPS, codec="VP8")
    assert two["audio"] == [] or all(t["frames"] == 0 for t in two["audio"]), two["audio"]

    base = first["whep"][: -len("whep")]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    # One scrape, every camera's counters, labelled.
    status, metrics = http(net, "GET", base + "metrics", headers=auth)
    assert status == 200, metrics
    encoded = {line.split("{")[1].split("}")[0]: int(line.rsplit(" ", 1)[1])
               for line in metrics.splitlines() if line.startswith("camagent_frames_encoded_total{")}
    assert set(encoded) == {'camera="1"', 'camera="2"'} and all(v > 0 for v in encoded.values()), metrics
    # Camera 2's stats are its own; there is no camera 3.
    status, stats = http(net, "GET", base + "cameras/2/stats", headers=auth)
    assert status == 200 and json.loads(stats).get("audio") is None and json.loads(stats)["framesEncoded"] > 0, stats
    status, text = http(net, "POST", base + "cameras/3/whep", body="v=0\r\n",
                        headers={**auth, "Content-Type": "application/sdp"})
    assert status == 404 and "no camera 3" in text, (status, text)
    # Any number, before any token is checked: Int.min once overflowed (N - 1) and trapped.
    for number in ("0", "-1", "-9223372036854775808", "9223372036854775807"):
        status, text = http(net, "GET", base + f"cameras/{number}/")
        assert status == 404 and f"no camera {number}" in text, (number, status, text)

    code, events = agent.stop()
    assert code == 0, "".join(agent.lines)[-2000:]
    joined = sorted(e["camera"] for e in events if e.get("event") == "viewer" and e.get("state") == "joined")
    assert joined == [1, 2], joined
    summaries = {e["camera"]: e for e in events if e.get("event") == "summary"}
    assert sorted(summaries) == [1, 2]
    # Each camera encoded while its viewer watched (the encoders run while someone watches).
    assert all(s["framesEncoded"] >= 0.5 * WATCH * FPS for s in summaries.values()), summaries
    # The microphone went to camera 1's viewer only (stats lines while they watched).
    with_audio = {e["camera"] for e in events if e.get("event") == "stats"
                  for v in e["viewerStats"] if v.get("audio")}
    with_video = {e["camera"] for e in events if e.get("event") == "stats"
                  for v in e["viewerStats"] if v.get("video")}
    assert with_audio == {1} and with_video == {1, 2}, (with_audio, with_video)


def test_two_cameras_are_two_streams_of_a_session(net, workdir):
    router = Router(net, workdir)
    session = router.create_session()
    token = router.token(session, "publisher")
    publisher = drain(net.start([BIN, "publish", "--device", "test-pattern", "--device", "test-pattern",
                                 "--size", "320x240", "--audio", "test-tone", "--session", router.session_url(session),
                                 "--token", token, "--duration", "12", "--json"], "camagent-publisher", workdir))
    streams = router.wait_for_streams(session, 2)
    assert sorted(s["name"] for s in streams) == ["camera 1: test-pattern", "camera 2: test-pattern"], streams
    by_name = {s["name"]: s for s in streams}
    assert by_name["camera 1: test-pattern"]["hasAudio"] and not by_name["camera 2: test-pattern"]["hasAudio"], streams
    assert all(s["hasVideo"] for s in streams), streams
    publisher.wait(timeout=60)
    assert publisher.returncode == 0, "".join(publisher.output)[-2000:]
    assert router.streams(session) == [], router.log()


def test_a_whip_endpoint_takes_one_camera(net):
    proc = net.run([BIN, "publish", "--device", "test-pattern", "--device", "test-pattern",
                    "--whip", f"http://{net.addr}:9/whip"], timeout=30)
    assert proc.returncode == 64, proc.stderr
    assert "--whip takes one camera" in proc.stderr, proc.stderr


def test_capture_takes_one_camera():
    proc = subprocess.run([BIN, "capture", "--device", "test-pattern", "--device", "test-pattern", "--frames", "1"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 64 and "capture takes one --device" in proc.stderr, proc.stderr
