"""Routed media through `camagent router`: publishers send over WHIP into a session, the
router forwards (never decodes) to subscribers over WHEP, as DESIGN.md's session contract says.

Publishers: aiortc (aiortc_publisher.py, the test pattern Y4M and a 1 kHz tone),
GStreamer's webrtcbin (Benchmarks/gst_whip_publisher.py, videotestsrc, video only) and
`camagent publish --session`. Subscribers: aiortc (whep_viewer.py), which decodes every
frame, reads the pattern's frame counters and measures the tone's pitch. Everything runs in
the test's own network namespace; every wait has a timeout; nothing asserts on time.
"""
import json
import os
import signal

from publish_support import BIN, HERE, PY, ROOT, check_audio, check_video, read_line, track_brief
from router_support import Router, SessionWatcher, drain, http, watched_session

WATCH = 6
# webrtcbin runs on Debian's python3 (python3-gi, python3-gst-1.0), not the test venv.
GST_PUBLISHER = os.path.join(ROOT, "Benchmarks", "gst_whip_publisher.py")


def start_subscriber(net, workdir, url, token, name, duration=WATCH, extra=()):
    path = os.path.join(workdir, f"{name}.json")
    proc = net.start([PY, os.path.join(HERE, "whep_viewer.py"), "--url", url, "--token", token,
                      "--duration", str(duration), "--summary", path, "-v", *extra], name, workdir)
    proc.summary_path = path
    return proc


def subscriber_result(proc, router, timeout=90):
    proc.wait(timeout=timeout)
    assert os.path.exists(proc.summary_path), f"{proc.label} wrote no summary (exit {proc.returncode}):\n" \
        + open(proc.log_path).read()[-3000:] + router.log()
    with open(proc.summary_path) as f:
        summary = json.load(f)
    assert proc.returncode == 0, (proc.returncode, {k: summary.get(k) for k in ("status", "error", "answerError")},
                                  open(proc.log_path).read()[-3000:], router.log())
    return summary


def start_aiortc_publisher(net, workdir, url, token, y4m, duration):
    return drain(net.start([PY, os.path.join(HERE, "aiortc_publisher.py"), "--video", y4m, "--whip", url,
                            "--token", token, "--codec", "vp8", "--duration", str(duration), "--tone", "1000", "--json"],
                           "aiortc-publisher", workdir))


def start_camagent_publisher(net, workdir, session_url, token, duration, fps=15, extra=()):
    return drain(net.start([BIN, "publish", "--device", "test-pattern", "--audio", "test-tone", "--session", session_url,
                            "--token", token, "--codec", "vp8", "--size", "640x480", "--fps", str(fps), "--bitrate",
                            "800", "--duration", str(duration), "--json", *extra], "camagent-publisher", workdir))


def start_gst_publisher(net, workdir, url, token, duration, fps=15):
    return drain(net.start(["/usr/bin/python3", GST_PUBLISHER, "--whip", url, "--token", token, "--codec", "vp8",
                      "--size", "640x480", "--fps", str(fps), "--bitrate", "600", "--duration", str(duration)],
                     "gst-publisher", workdir))


def test_three_publishers_are_forwarded_to_subscribers_who_decode_them(net, workdir, pattern_y4m):
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = router.token(session, "publisher")
    subscriber = router.token(session, "subscriber")

    # 16 s like the others: the subscribers start only once all three streams are up, and at 9 s
    # a slow webrtcbin start could leave the aiortc stream's subscriber short of its window.
    aiortc = start_aiortc_publisher(net, workdir, f"{url}/publish", publisher, pattern_y4m, duration=16)
    camagent = start_camagent_publisher(net, workdir, url, publisher, duration=16)
    gst = start_gst_publisher(net, workdir, f"{url}/publish", publisher, duration=16)
    streams = router.wait_for_streams(session, 3)
    assert len({s["streamId"] for s in streams}) == 3 and len({s["connectionId"] for s in streams}) == 3, streams
    assert sorted((s["hasVideo"], s["hasAudio"]) for s in streams) == [(True, False), (True, True), (True, True)], streams

    # Two subscribers of the first stream, one of each other: one encode upstream each,
    # every subscriber its own connection downstream.
    viewers = []
    for s in streams:
        for n in range(2 if s is streams[0] else 1):
            viewers.append((s, start_subscriber(net, workdir, f"{url}/streams/{s['streamId']}/subscribe", subscriber,
                                                f"sub-{s['streamId']}-{n}")))
    for s, proc in viewers:
        summary = subscriber_result(proc, router)
        video = summary["video"][0]
        assert video["codec"] == "VP8" and set(video["sizes"]) == {"640x480"}, track_brief(video)
        if not s["hasAudio"]:
            # webrtcbin's videotestsrc carries no frame counters: frames decoded is the check.
            assert video["frames"] >= 0.4 * (WATCH - 2) * 15, track_brief(video)
            continue
        # aiortc's stream runs at 30 fps, camagent's at 15: the lower rate bounds both.
        check_video(video, duration=WATCH - 2, fps=15, codec="VP8")
        check_audio(summary["audio"][0], duration=WATCH - 2)

    metrics = router.metrics()
    forwarded = [v for k, v in metrics.items() if "forwarded_packets" in k]
    assert forwarded and forwarded[0] > 0, metrics

    # The publishers end (aiortc after its duration, with a DELETE; camagent too): no stream is left.
    for proc in (aiortc, camagent, gst):
        proc.wait(timeout=60)
        assert proc.returncode == 0, ("".join(proc.output)[-2000:], open(proc.log_path).read()[-3000:])
    assert router.streams(session) == [], router.log()


def test_roles_decide_who_publishes_and_who_subscribes(net, workdir, pattern_y4m):
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    offer = "v=0\r\n"   # never read: the token is checked first

    status, _, text = http(net, "POST", f"{url}/publish", token=router.token(session, "subscriber"), body=offer,
                           headers={"Content-Type": "application/sdp"})
    assert status == 403, (status, text)
    # A stream is tied (`?connectionId=`) only to a connection that joined with the same token:
    # another client's publisher token cannot put a stream on it.
    alice = SessionWatcher(net, url, router.token(session, "publisher", "--data", "alice"))
    try:
        alice_id = alice.wait_for("connected")["connectionId"]
        status, _, body = http(net, "POST", f"{url}/publish?connectionId={alice_id}", token=router.token(session, "publisher"),
                               body=offer, headers={"Content-Type": "application/sdp"})
        assert status == 403 and "not a signalling connection made with this token" in body["message"], (status, body)
    finally:
        alice.close()

    aiortc = start_aiortc_publisher(net, workdir, f"{url}/publish", router.token(session, "publisher-only"),
                                    pattern_y4m, duration=6)
    stream = router.wait_for_streams(session, 1)[0]
    sdp = {"Content-Type": "application/sdp"}
    status, _, text = http(net, "POST", f"{url}/streams/{stream['streamId']}/subscribe",
                           token=router.token(session, "publisher-only"), body=offer, headers=sdp)
    assert status == 403, (status, text)
    status, _, text = http(net, "POST", f"{url}/streams/nosuchstream/subscribe",
                           token=router.token(session, "subscriber"), body=offer, headers=sdp)
    assert status == 404, (status, text)
    status, _, body = http(net, "POST", f"{url}/streams/{stream['streamId']}/subscribe",
                           token=router.token(session, "subscriber"), body="not sdp at all", headers=sdp)
    assert status == 400 and body["code"] == 400 and body["message"], (status, body)
    aiortc.wait(timeout=60)
    assert aiortc.returncode == 0, open(aiortc.log_path).read()[-3000:]


def test_a_killed_publisher_is_found_gone_by_consent(net, workdir, pattern_y4m):
    """A publisher that vanishes without a word (SIGKILL) stops sending media and answering
    ICE: the router ends its stream on its own (reason networkDisconnected), and its
    subscribers with it."""
    router = Router(net, workdir, "--publisher-timeout", "6")
    session = router.create_session()
    url = router.session_url(session)
    watcher = SessionWatcher(net, url, router.token(session, "subscriber"))
    try:
        watcher.wait_for("connected")
        aiortc = start_aiortc_publisher(net, workdir, f"{url}/publish", router.token(session, "publisher"),
                                        pattern_y4m, duration=60)
        created = watcher.wait_for("streamCreated")
        stream_id = created["stream"]["streamId"]
        os.killpg(aiortc.pid, signal.SIGKILL)
        aiortc.wait(timeout=10)
        destroyed = watcher.wait_for("streamDestroyed", lambda m: m["streamId"] == stream_id, timeout=40)
        assert destroyed["reason"] == "networkDisconnected", destroyed
        assert router.streams(session) == [], router.log()
        # The WHIP client's own connection goes with it.
        gone = watcher.wait_for("connectionDestroyed",
                                lambda m: m["connectionId"] == created["stream"]["connectionId"], timeout=10)
        assert gone["reason"] == "networkDisconnected", gone
        types = watcher.types()
        assert types.index("streamCreated") < types.index("streamDestroyed") < types.index("connectionDestroyed"), types
    finally:
        watcher.close()


def test_a_publisher_whose_output_reader_goes_away_leaves_the_session_cleanly(net, workdir):
    """`camagent publish --json | head -1`: once its stdout's reader is gone it stops as on SIGTERM
    (exit 0, the stream unpublished, the session left with a goodbye), where SIGPIPE used to kill
    it (-13) and the others heard networkDisconnected once consent ran out."""
    router, session, url, watcher = watched_session(net, workdir)
    try:
        publisher = net.start([BIN, "publish", "--device", "test-pattern", "--audio", "none", "--session", url,
                               "--token", router.token(session, "publisher"), "--size", "320x240",
                               "--duration", "60", "--json"], "camagent-publisher", workdir)
        stream = watcher.wait_for("streamCreated", timeout=60)["stream"]
        assert json.loads(read_line(publisher, 30))["event"] == "negotiated"
        publisher.stdout.close()   # the reader goes away; a stats line a second finds it gone
        publisher.wait(timeout=30)
        log = open(publisher.log_path).read()
        assert publisher.returncode == 0, (publisher.returncode, log[-2000:])
        assert "the reader of stdout went away (broken pipe); stopping" in log, log[-2000:]
        destroyed = watcher.wait_for("streamDestroyed", lambda m: m["streamId"] == stream["streamId"])
        assert destroyed["reason"] == "clientDisconnected", destroyed
        gone = watcher.wait_for("connectionDestroyed", lambda m: m["connectionId"] == stream["connectionId"])
        assert gone["reason"] == "clientDisconnected", gone
    finally:
        watcher.close()


def test_stream_events_follow_publish_and_delete(net, workdir, pattern_y4m):
    """A signalling client sees connectionCreated and streamCreated when a WHIP client
    publishes, then streamDestroyed (clientDisconnected) and connectionDestroyed when it
    DELETEs, in that order; the stream object carries the contract's fields. A subscriber
    that decodes none of the stream's video codecs gets its audio, and videoDisabled with
    reason codecNotSupported."""
    router, session, url, watcher = watched_session(net, workdir)
    try:
        connected = watcher.wait_for("connected")
        assert connected["streams"] == [] and connected["capabilities"]["forceDisconnect"], connected
        aiortc = start_aiortc_publisher(net, workdir, f"{url}/publish", router.token(session, "publisher"),
                                        pattern_y4m, duration=7)
        created = watcher.wait_for("streamCreated")
        stream = created["stream"]
        # The stream is VP8; aiortc offers to receive H.264 only.
        h264_only = start_subscriber(net, workdir, f"{url}/streams/{stream['streamId']}/subscribe",
                                     router.token(session, "subscriber"), "h264-only", duration=3,
                                     extra=("--video-codec", "H264"))
        for field in ("streamId", "connectionId", "name", "hasAudio", "hasVideo", "hasCaptions", "videoType",
                      "width", "height", "createdAt"):
            assert field in stream, stream
        assert stream["hasAudio"] and stream["hasVideo"] and stream["videoType"] == "camera", stream
        # The VP8 keyframe's size reaches the stream object (streamPropertyChanged videoDimensions).
        changed = watcher.wait_for("streamPropertyChanged", lambda m: m["property"] == "videoDimensions")
        assert changed["newValue"] == {"width": 640, "height": 480}, changed
        refused = watcher.wait_for("videoDisabled")
        summary = subscriber_result(h264_only, router)
        assert refused == {"type": "videoDisabled", "subscriberId": summary["location"].rsplit("/", 1)[-1],
                           "reason": "codecNotSupported"}, (refused, summary["location"])
        assert all(t["frames"] == 0 for t in summary["video"]), [track_brief(t) for t in summary["video"]]
        check_audio(summary["audio"][0], duration=2)
        destroyed = watcher.wait_for("streamDestroyed", lambda m: m["streamId"] == stream["streamId"], timeout=40)
        assert destroyed["reason"] == "clientDisconnected", destroyed
        aiortc.wait(timeout=30)
        assert aiortc.returncode == 0, open(aiortc.log_path).read()[-3000:]
        types = watcher.types()
        assert types.index("connectionCreated") < types.index("streamCreated") < types.index("streamDestroyed"), types
    finally:
        watcher.close()


def test_h264_is_forwarded_and_its_size_read_from_the_sps(net, workdir):
    """camagent publishes H.264 (640x360: the SPS crops 368 rows to 360) into a routed session;
    the stream's videoDimensions come from the SPS, and an aiortc subscriber decodes the
    forwarded H.264 pattern."""
    router, session, url, watcher = watched_session(net, workdir)
    try:
        publisher = drain(net.start([BIN, "publish", "--device", "test-pattern", "--audio", "none", "--session", url,
                                     "--token", router.token(session, "publisher"), "--codec", "h264",
                                     "--size", "640x360", "--fps", "15", "--duration", str(WATCH + 10), "--json"],
                                    "camagent-publisher", workdir))
        stream = watcher.wait_for("streamCreated")["stream"]
        changed = watcher.wait_for("streamPropertyChanged", lambda m: m["property"] == "videoDimensions")
        assert changed["newValue"] == {"width": 640, "height": 360}, changed
        viewer = start_subscriber(net, workdir, f"{url}/streams/{stream['streamId']}/subscribe",
                                  router.token(session, "subscriber"), "h264-subscriber")
        summary = subscriber_result(viewer, router)
        video = summary["video"][0]
        assert video["codec"] == "H264", track_brief(video)
        check_video(video, duration=WATCH - 2, fps=15, size="640x360", codec="H264")
        publisher.wait(timeout=60)
        assert publisher.returncode == 0, "".join(publisher.output)[-2000:]
    finally:
        watcher.close()
