"""`camagent publish` with no server: the router runs in-process, with one routed session,
and the camera is a stream of it published without a network hop (DESIGN.md "Sessions":
one server code path). Its subscribers are viewers of the encoder that already runs, so
the router forwards nothing for them; a browser that talks back from the session page is
routed like any publisher of `camagent router`.

Peers nobody here wrote: aiortc (whep_viewer.py decodes the pattern's frame counters and
measures the tone), the `websockets` package (signalling), headless Chromium (the session
page). camagent subscribe decodes too. In the test's own network namespace; every wait has
a timeout; nothing asserts on time.
"""
import json
import os

from pattern import decode_counter, read_y4m
from publish_support import BIN, HERE, PY, check_audio, check_video, json_lines, output_lines
from router_support import Router, SessionWatcher, drain, http, prometheus_values
from test_router_media import start_subscriber, subscriber_result
from test_router_page import page_and_camagent_decode_each_other
from viewer_checks import chromium_or_fail

WATCH = 6


class EmbeddedSession(Router):
    """`camagent publish --listen` and what it printed about its session (the JSON `serving`
    line), with the calls the router tests make of `Router`: the page's base URL, tokens
    (the two it printed), the session's streams, /metrics and the log."""

    def __init__(self, net, workdir, duration, *extra, stdin=None):   # no router process: publish is the server
        self.net = net
        self.context = None
        port = 8080
        self.base = f"http://{net.addr}:{port}"
        self.proc = net.start([BIN, "publish", "--device", "test-pattern", "--audio", "test-tone", "--listen",
                               f"{net.addr}:{port}", "--codec", "vp8", "--size", "640x480", "--fps", "15",
                               "--bitrate", "800", "--duration", str(duration), "--json", *extra],
                              "camagent-publish", workdir, stdin=stdin)
        self.lines = []
        self.serving = None
        for line in output_lines(self.proc, 60, self.lines):
            if line.startswith("{") and json.loads(line).get("event") == "serving":
                self.serving = json.loads(line)
                break
        assert self.serving, f"camagent publish printed no serving line (exit {self.proc.poll()}):\n" \
            + "".join(self.lines) + self.log()
        drain(self.proc)
        self.session = self.serving["sessionId"]
        self.stream = self.serving["streamId"]

    def token(self, session, role):
        assert session == self.session, (session, self.session)
        return self.serving["subscriberToken"] if role == "subscriber" else self.serving["moderatorToken"]

    def streams(self, session):
        status, _, body = http(self.net, "GET", f"{self.session_url(session)}/streams", token=self.token(session, "subscriber"))
        assert status == 200, (status, body, self.log())
        return body

    def metrics(self):
        """The embedded server's /metrics (the viewer token's): the publisher's numbers, then the router's."""
        status, _, text = http(self.net, "GET", f"{self.base}/metrics", token=self.serving["token"])
        assert status == 200, (status, text)
        return prometheus_values(text)

    def finish(self, timeout=60):
        self.proc.wait(timeout=timeout)
        output = "".join(self.lines + self.proc.output)
        assert self.proc.returncode == 0, (self.proc.returncode, output[-2000:], self.log())
        return json_lines(output)


def test_publish_runs_one_session_whose_subscribers_are_fed_by_the_encoder(net, workdir):
    embedded = EmbeddedSession(net, workdir, 24)
    serving, session = embedded.serving, embedded.session
    assert serving["streamWhep"] == f"{embedded.base}/v2/sessions/{session}/streams/{embedded.stream}/subscribe", serving
    assert serving["sessionUrl"] == f"{embedded.base}/?session={session}&token={serving['subscriberToken']}", serving

    # The session as the contract shows it: a subscriber's capabilities, camagent's stream with its size.
    watcher = SessionWatcher(net, embedded.session_url(session), serving["subscriberToken"])
    connected = watcher.wait_for("connected")
    assert connected["capabilities"] == {"publish": False, "subscribe": True, "forceDisconnect": False,
                                         "captions": False}, connected
    assert connected["mediaMode"] == "routed", connected
    [stream] = connected["streams"]
    assert (stream["streamId"], stream["hasVideo"], stream["hasAudio"]) == (embedded.stream, True, True), stream
    assert (stream["width"], stream["height"]) == (640, 480), stream
    assert stream["connectionId"] in [c["connectionId"] for c in connected["connections"]], connected

    # An aiortc subscriber over the stream's WHEP, and camagent subscribe through the signalling,
    # asking for 8 frames a second (preferredFrameRate) of the 15: the encoder's base layer.
    aiortc = start_subscriber(net, workdir, serving["streamWhep"], serving["subscriberToken"], "sub-aiortc")
    y4m = os.path.join(workdir, "camera.y4m")
    camagent_sub = net.start([BIN, "subscribe", "--session", embedded.session_url(session),
                              "--token", serving["subscriberToken"], "--first", "--video-out", y4m,
                              "--preferred-frame-rate", "8", "--duration", str(WATCH), "--json"],
                             "camagent-subscriber", workdir)
    summary = subscriber_result(aiortc, embedded)
    check_video(summary["video"][0], duration=WATCH - 2, fps=15, codec="VP8")
    check_audio(summary["audio"][0], duration=WATCH - 2)
    camagent_sub.wait(timeout=90)
    lines = json_lines(camagent_sub.stdout.read())
    assert camagent_sub.returncode == 0, (lines[-5:], open(camagent_sub.log_path).read()[-3000:], embedded.log())
    decoded = [e for e in lines if e.get("event") == "summary"][-1]
    assert decoded["video"]["framesDecoded"] >= 0.5 * (WATCH - 2) * 7.5 and decoded["video"]["decodeErrors"] == 0, decoded
    # Every other frame of the pattern: its counter steps by 2 (the median: one the encoder skipped moves a step).
    counters = [c for c in (decode_counter(y) for y, _, _ in read_y4m(y4m)) if c is not None]
    steps = sorted(b - a for a, b in zip(counters, counters[1:]))
    assert len(steps) >= 10 and steps[len(steps) // 2] == 2 and steps[0] > 0, steps
    assert decoded["audio"]["samplesDecoded"] > 48000, decoded

    # Both were viewers of the publisher's own encoder: the session counted them, the router forwarded nothing.
    metrics = embedded.metrics()
    assert metrics["camagent_frames_encoded_total"] > 0, metrics
    assert metrics["camagent_router_sessions"] == 1 and metrics["camagent_router_streams"] == 1, metrics
    forwarded = [v for k, v in metrics.items() if "forwarded_packets" in k]
    assert forwarded == [0.0], metrics
    stats = [e for e in json_lines("".join(embedded.lines + embedded.proc.output)) if e.get("event") == "stats"]
    assert max(e["viewers"] for e in stats) >= 2, stats[-3:]

    # When publish ends, the session hears the stream end as its publisher's own doing.
    events = embedded.finish()
    destroyed = watcher.wait_for("streamDestroyed", timeout=10)
    assert (destroyed["streamId"], destroyed["reason"]) == (embedded.stream, "clientDisconnected"), destroyed
    watcher.close()
    assert [e for e in events if e.get("event") == "summary"], events[-3:]


def test_the_session_page_watches_the_camera_and_talks_back(net, workdir):
    """The operator's link publish printed (a moderator token, publish=1): the page plays the
    camera and publishes its own, which is routed: aiortc and camagent subscribe decode it."""
    chromium_or_fail()
    embedded = EmbeddedSession(net, workdir, 50)
    page_and_camagent_decode_each_other(net, workdir, embedded, embedded.session,
                                        camagent_stream={"streamId": embedded.stream})
    forwarded = [v for k, v in embedded.metrics().items() if "forwarded_packets" in k]
    assert forwarded and forwarded[0] > 0, forwarded
    embedded.proc.kill()
    embedded.proc.wait(timeout=30)


def test_publish_captions_show_on_its_own_session_page(net, workdir):
    """`camagent publish --captions` with no server: the session's captions start at once,
    the camera's stream carries hasCaptions, speech from its own encoder is recognised on the
    box, and the session page shows the words in its aria-live region while `camagent
    subscribe --captions` collects the finals (WER bound as test_captions.py's)."""
    from captions_support import (caption_wer, espeak_or_fail, load_sentences, start_subscriber as start_caption_subscriber,
                                  speech_wav, subscriber_captions, wait_for_event, words)
    from test_captions import MAX_WER
    chromium_or_fail()
    espeak_or_fail()
    # A long lead-in: the page and the subscriber join before the first word.
    spoken = speech_wav(os.path.join(workdir, "speech.wav"), load_sentences()[:3], lead_in=14.0, gap=1.2)
    embedded = EmbeddedSession(net, workdir, int(spoken.duration + 40), "--captions", "--audio", f"file:{spoken.path}")
    captions_line = [line for line in embedded.lines if line.startswith("{") and "captions" in line]
    assert not any("unavailable" in line for line in embedded.lines), "".join(embedded.lines)

    watcher = SessionWatcher(net, embedded.session_url(embedded.session), embedded.serving["subscriberToken"])
    [stream] = watcher.wait_for("connected")["streams"]
    assert stream["hasCaptions"] is True and stream["hasAudio"] is True, (stream, captions_line)
    watcher.close()

    subscriber = start_caption_subscriber(net, workdir, embedded.session_url(embedded.session),
                                          embedded.serving["subscriberToken"], duration=int(spoken.duration + 25))
    spoken_words = sorted({w for s in spoken.sentences for w in words(s["text"]) if len(w) >= 4})
    browser = net.start([PY, os.path.join(HERE, "viewer_chromium.py"), embedded.serving["sessionUrl"], "--out",
                         os.path.join(workdir, "chromium"), "--timeout", "60", "--settle", "0", "--frames", "0",
                         "--video-selector", ".stream video", "--state-selector", ".stream .state",
                         "--watch-text", ".captions", "--watch-until", r"\b(" + "|".join(spoken_words) + r")\b",
                         "--hold", str(int(spoken.duration + 20))], "chromium", workdir)

    # Every sentence's final reaches the subscriber; the words are the spoken ones.
    wait_for_event(subscriber, lambda e: e.get("event") == "caption" and e.get("isFinal")
                   and spoken.sentences[-1]["text"].split()[-1].strip(".,").lower() in e["text"].lower(),
                   "final caption of the last sentence", timeout=spoken.duration + 60, context=embedded.log)
    captions = subscriber_captions(subscriber)
    wer = caption_wer(spoken, captions)
    assert wer <= MAX_WER, (f"WER {wer:.3f} > {MAX_WER}: heard {[c['text'] for c in captions if c.get('isFinal')]}, "
                            f"spoken {[s['text'] for s in spoken.sentences]}")
    assert {c["streamId"] for c in captions} == {embedded.stream}, captions

    browser.wait(timeout=spoken.duration + 150)
    stdout = browser.stdout.read()
    assert browser.returncode == 0, f"viewer_chromium.py exit {browser.returncode}:\n" + open(browser.log_path).read()[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    watched = report["watched"]
    brief_report = json.dumps({k: report.get(k) for k in ("states", "watched", "console", "message")})[-4000:]
    assert watched["ariaLive"] == "polite", brief_report
    heard = {w for text in watched["values"] for w in words(text or "")}
    assert heard & set(spoken_words), f"no spoken word in the page's captions: {brief_report}\n{embedded.log()}"
    metrics = embedded.metrics()
    assert metrics["camagent_router_captions_final_total"] >= 3 and metrics["camagent_router_captioned_streams"] == 1, metrics
    net.stop(subscriber)
    embedded.proc.kill()
    embedded.proc.wait(timeout=30)


def test_the_sessions_video_dimensions_follow_the_pictures_sent(net, workdir):
    """A camera turned a quarter (--rotation 90) is announced at the size it captures, and
    sent that way with the rotation as CVO metadata. aiortc does not take CVO, so once it
    subscribes the encoder turns the pixels and sends 480x640: the session says so
    (streamPropertyChanged videoDimensions), and what aiortc decodes is that size. The same
    path carries a camera back in another mode, or another camera (Tests/PublisherTests)."""
    embedded = EmbeddedSession(net, workdir, 14, "--rotation", "90")
    watcher = SessionWatcher(net, embedded.session_url(embedded.session), embedded.serving["subscriberToken"])
    [stream] = watcher.wait_for("connected")["streams"]
    assert (stream["width"], stream["height"]) == (640, 480), stream

    aiortc = start_subscriber(net, workdir, embedded.serving["streamWhep"], embedded.serving["subscriberToken"], "sub-aiortc")
    changed = watcher.wait_for("streamPropertyChanged", lambda m: m["property"] == "videoDimensions", timeout=30)
    assert changed["streamId"] == embedded.stream, changed
    assert (changed["oldValue"], changed["newValue"]) == ({"width": 640, "height": 480}, {"width": 480, "height": 640}), changed
    summary = subscriber_result(aiortc, embedded)
    video = summary["video"][0]   # turned pixels: the pattern's counter is not read sideways
    assert video["sizes"] == {"480x640": video["frames"]} and video["frames"] >= 0.5 * (WATCH - 2) * 15, video
    assert [s for s in embedded.streams(embedded.session) if s["streamId"] == embedded.stream][0]["height"] == 640

    events = embedded.finish()
    assert {"event": "videoDimensions", "width": 480, "height": 640} in events, [e for e in events if e.get("event") != "stats"][-8:]
    watcher.close()
