"""The router's session page in headless Chromium, while camagent publishes into the session.

The page joins with a moderator token, subscribes to camagent's stream (its pixels are
grabbed and the test pattern's frame counter must advance) and publishes Chromium's fake
camera and microphone (`--use-fake-device-for-media-stream`) into the same session, which
an aiortc subscriber and `camagent subscribe` decode. Each side decodes the other. In the test's own network
namespace; every wait has a timeout.
"""
import json
import os
import time

import numpy as np

from pattern import decode_counter, read_y4m
from publish_support import BIN, PY, HERE, json_lines, track_brief
from router_support import ROUTER_PORT, CuttableLink, Router, SessionWatcher, drain, http
from test_router_media import start_camagent_publisher, start_subscriber, subscriber_result
from viewer_checks import chromium_or_fail



def open_session_page(net, workdir, router, session, *flags, hold, query=""):
    """Headless Chromium on the session page with a moderator token, publishing its fake
    camera and microphone (`flags` say how its origin is secure; `query` adds to the page's
    URL); returns the process."""
    page = f"{router.base}/?session={session}&token={router.token(session, 'moderator')}&publish=1{query}"
    return net.start([PY, os.path.join(HERE, "viewer_chromium.py"), page, "--out", os.path.join(workdir, "chromium"),
                      "--timeout", "40", "--settle", "3", "--frames", "2", "--fake-media", *flags, "--hold", str(hold),
                      "--video-selector", ".stream video", "--state-selector", ".stream .state"], "chromium", workdir)


def wait_for_page_stream(router, session, browser, besides):
    """The stream the page publishes, once the router has it beside `besides`, with video and
    audio; if it never comes, the failure carries the page's report and Chromium's log."""
    try:
        streams = router.wait_for_streams(session, 2, timeout=60)
    except AssertionError as e:
        browser.wait(timeout=120)
        raise AssertionError(f"{e}\nthe page's report: {browser.stdout.read()[-4000:]}\n"
                             + open(browser.log_path).read()[-2000:]) from None
    page_stream = next(s for s in streams if s["streamId"] != besides["streamId"])
    assert page_stream["hasVideo"] and page_stream["hasAudio"], streams
    return page_stream


def page_and_camagent_decode_each_other(net, workdir, router, session, duration=45, hold=14, camagent_stream=None,
                                        simulcast=False):
    """camagent publishes into the session (unless `camagent_stream` is already there: publish's
    own session); the session page (moderator token) joins and publishes Chromium's fake camera
    and microphone. aiortc and `camagent subscribe` decode the page's stream; the page's grabbed
    pixels show camagent's frame counter advancing. With `simulcast`, the page sends its camera
    in two sizes (RIDs): those two subscribers, who prefer no size, get the full 640x480, and a
    third that prefers 320x240 gets the half-size layer. Returns the page's final report, for
    what a test checks besides."""
    url = router.session_url(session)
    if camagent_stream is None:
        start_camagent_publisher(net, workdir, url, router.token(session, "publisher"), duration=duration)
        camagent_stream = router.wait_for_streams(session, 1)[0]

    # Simulcast: the page stays 8 s longer, for Chromium's full layer to start (5-7 s here).
    browser = open_session_page(net, workdir, router, session, "--treat-as-secure", router.base,
                                hold=hold + 8 if simulcast else hold, query="&simulcast=1" if simulcast else "")

    # Chromium's own stream appears beside camagent's; an aiortc subscriber decodes it.
    page_stream = wait_for_page_stream(router, session, browser, besides=camagent_stream)
    if simulcast:
        # The stream's size is its largest layer's: Chromium sends that layer once its bandwidth
        # estimate allows, and a subscriber that came before would start on the small one.
        deadline = time.monotonic() + 30
        while (page_stream["width"], page_stream["height"]) != (640, 480):
            assert time.monotonic() < deadline, (page_stream, router.log()[-3000:])
            time.sleep(0.2)
            page_stream = next(s for s in router.streams(session) if s["streamId"] == page_stream["streamId"])
    subscriber = start_subscriber(net, workdir, f"{url}/streams/{page_stream['streamId']}/subscribe",
                                  router.token(session, "subscriber"), "sub-page", duration=6)
    # camagent subscribes to Chromium's stream too, and decodes it.
    y4m = os.path.join(workdir, "page.y4m")
    camagent_sub = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                              "--stream", page_stream["streamId"], "--video-out", y4m, "--duration", "6", "--json"],
                             "camagent-subscriber", workdir)
    if simulcast:
        small_y4m = os.path.join(workdir, "page-small.y4m")
        small_sub = net.start([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                               "--stream", page_stream["streamId"], "--preferred-resolution", "320x240",
                               "--video-out", small_y4m, "--no-audio", "--duration", "6", "--json"],
                              "camagent-small-subscriber", workdir)
    summary = subscriber_result(subscriber, router)
    video = summary["video"][0]
    assert video["frames"] >= 30 and set(video["sizes"]) == {"640x480"}, track_brief(video)
    assert summary["audio"][0]["frames"] >= 100, track_brief(summary["audio"][0])
    camagent_sub.wait(timeout=90)
    lines = json_lines(camagent_sub.stdout.read())
    assert camagent_sub.returncode == 0, (lines, open(camagent_sub.log_path).read()[-3000:])
    decoded = [e for e in lines if e.get("event") == "summary"][-1]
    assert decoded["video"]["framesDecoded"] >= 30 and decoded["video"]["decodeErrors"] == 0, decoded
    assert decoded["audio"]["samplesDecoded"] > 48000, decoded
    pictures = read_y4m(y4m)
    assert len(pictures) >= 30 and pictures[0][0].shape == (480, 640), len(pictures)
    assert pictures[-1][0].std() > 5, "Chromium's fake camera draws a moving pattern, not a flat picture"
    if simulcast:
        small_sub.wait(timeout=90)
        small_lines = json_lines(small_sub.stdout.read())
        assert small_sub.returncode == 0, (small_lines, open(small_sub.log_path).read()[-3000:], router.log()[-3000:])
        small = read_y4m(small_y4m)
        assert len(small) >= 30 and small[0][0].shape == (240, 320), (len(small), small[0][0].shape if small else None)
        # Every picture the half-size layer's: the Y4M keeps its first size, so the decoder's
        # size events say it (one, 320x240).
        sizes = {(e["width"], e["height"]) for e in small_lines if e.get("event") == "video" and e.get("state") == "dimensions"}
        assert sizes == {(320, 240)}, small_lines
        assert small[-1][0].std() > 5, "the small layer is Chromium's moving pattern too"
        # The router took both RIDs, and learnt the full layer's SSRC from its packets (the router
        # runs --verbose here: these are info lines).
        full_log = open(router.proc.log_path).read()
        assert "video VP8, 2 simulcast layers" in full_log and "video layer 1 on SSRC" in full_log, router.log()[-3000:]

    browser.wait(timeout=150)
    stdout = browser.stdout.read()
    assert browser.returncode == 0, f"viewer_chromium.py exit {browser.returncode}:\n" + open(browser.log_path).read()[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    brief = {k: v for k, v in report.items() if k not in ("chromiumLog", "answer")}
    assert report["states"][-1] == "connected", json.dumps(brief, indent=1)
    frames = report["frames"]
    assert len(frames) == 2 and all(frames), brief
    assert (frames[0]["width"], frames[0]["height"]) == (640, 480), brief
    counters = [decode_counter(np.load(f["luma"])) for f in frames]
    assert None not in counters and counters[1] > counters[0], counters
    session_state = report["session"]
    assert session_state["capabilities"] == {"publish": True, "subscribe": True, "forceDisconnect": True,
                                             "captions": True}, session_state
    assert session_state["publishing"]["state"] == "connected", session_state
    assert session_state["streams"][camagent_stream["streamId"]]["stats"]["framesDecoded"] > 30, session_state
    return report


def test_the_session_page_and_camagent_each_decode_the_other(net, workdir):
    """The page simulcasts here (two RIDs, as browsers do): each subscriber gets the layer
    that fits what it prefers."""
    chromium_or_fail()
    router = Router(net, workdir, "--verbose")
    page_and_camagent_decode_each_other(net, workdir, router, router.create_session(), simulcast=True)


def test_a_page_a_moderator_disconnects_stays_out(net, workdir):
    """A moderator's force disconnect ends the page's session for good: the page says so and
    does not join again with its token (it retries after 2 s when a connection merely drops)."""
    chromium_or_fail()
    router = Router(net, workdir)
    session = router.create_session()
    moderator = router.token(session, "moderator")
    watcher = SessionWatcher(net, router.session_url(session), moderator)
    try:
        own = watcher.wait_for("connected")["connectionId"]
        page = f"{router.base}/?session={session}&token={router.token(session, 'subscriber', '--data', 'kiosk page')}"
        # Frames: none (nothing is published); the hold watches the page's message line for
        # 15 s from the page's joining, which the force disconnect follows at once: well past
        # the page's 2 s retry. It does not end early. The page is "connected" for only a few
        # ms before it is forced out, which the state poll (every 0.2 s) mostly misses: it
        # waits 5 s for it, not 40.
        browser = net.start([PY, os.path.join(HERE, "viewer_chromium.py"), page, "--out", os.path.join(workdir, "chromium"),
                             "--timeout", "5", "--settle", "0", "--frames", "0", "--hold", "15",
                             "--state-selector", "#state", "--watch-text", "#message"], "chromium", workdir)
        joined = watcher.wait_for("connectionCreated", lambda m: m["connection"]["data"] == "kiosk page", timeout=60)
        page_connection = joined["connection"]["connectionId"]
        status, _, _ = http(net, "DELETE", f"{router.session_url(session)}/connections/{page_connection}", moderator)
        assert status == 204, status
        watcher.wait_for("connectionDestroyed", lambda m: m["connectionId"] == page_connection)

        browser.wait(timeout=120)
        assert browser.returncode == 0, open(browser.log_path).read()[-3000:]
        report = json.loads(browser.stdout.read().strip().splitlines()[-1])
        brief = json.dumps({k: report.get(k) for k in ("states", "watched", "message", "session", "console")})[-3000:]
        assert "disconnected by a moderator" in report["watched"]["values"], brief
        assert report["session"]["ended"] == "forceDisconnected", brief
        # Over the whole hold, the page never came back.
        rejoined = [m for m in watcher.messages if m.get("type") == "connectionCreated"
                    and m["connection"]["connectionId"] not in (own, page_connection)]
        assert rejoined == [], rejoined
    finally:
        watcher.close()


def test_a_page_whose_socket_broke_comes_back_to_its_connection_and_its_camera_stream(net, workdir):
    """The page reaches the router through a TCP relay, publishes its fake camera, and the relay
    resets its connections (a network drop). The page joins again 2 s later asking for its
    connection back (?connectionId=), within the router's grace: the same connection and the
    same camera stream go on, and nobody in the session hears of the drop."""
    chromium_or_fail()
    router = Router(net, workdir, "--rejoin-grace", "5")
    session = router.create_session()
    link = CuttableLink(net, ROUTER_PORT, ROUTER_PORT + 1)
    watcher = SessionWatcher(net, router.session_url(session), router.token(session, "subscriber"))
    try:
        watcher.wait_for("connected")
        through_link = f"http://{net.addr}:{ROUTER_PORT + 1}"
        page = f"{through_link}/?session={session}&token={router.token(session, 'moderator', '--data', 'operator')}&publish=1"
        # The hold (15 s from joining) outlasts the cut, the page's 2 s retry and the 5 s grace.
        browser = net.start([PY, os.path.join(HERE, "viewer_chromium.py"), page, "--out", os.path.join(workdir, "chromium"),
                             "--timeout", "40", "--settle", "0", "--frames", "0", "--fake-media", "--treat-as-secure",
                             through_link, "--hold", "15", "--state-selector", "#state"], "chromium", workdir)
        created = watcher.wait_for("streamCreated", timeout=60)["stream"]
        # Cut once the page's media flows (its first keyframe's size reached the router), so the
        # cut is not of its WHIP POST still under way: that publish would fail and start again.
        watcher.wait_for("streamPropertyChanged", lambda m: m["streamId"] == created["streamId"]
                         and m["property"] == "videoDimensions", timeout=60)
        assert link.cut() >= 1, "nothing was open through the relay"

        browser.wait(timeout=120)
        assert browser.returncode == 0, open(browser.log_path).read()[-3000:]
        report = json.loads(browser.stdout.read().strip().splitlines()[-1])
        brief = json.dumps({k: report.get(k) for k in ("states", "message", "session", "console")})[-3000:]
        assert report["session"]["connectionId"] == created["connectionId"], brief
        assert "taken back by its client" in router.log(), router.log()[-3000:]
        # The stream went on: the session heard it end only when Chromium closed the page.
        # Waited for: the page left a moment before Chromium exited, and the router's word may trail it.
        watcher.wait_for("connectionDestroyed", lambda m: m.get("connectionId") == created["connectionId"], timeout=30)
        ends = [(m["type"], m.get("streamId") or m.get("connectionId"), m.get("reason")) for m in watcher.messages
                if m["type"] in ("streamCreated", "streamDestroyed", "connectionDestroyed")]
        assert ends == [("streamCreated", None, None), ("streamDestroyed", created["streamId"], "clientDisconnected"),
                        ("connectionDestroyed", created["connectionId"], "clientDisconnected")], watcher.messages
    finally:
        watcher.close()
        link.close()


def test_a_tile_asks_for_its_size_and_gets_the_nearest_simulcast_layer(net, workdir):
    """The page asks for each stream at the size of its tile (subscriberSettings
    preferredResolution: the tile's device pixels times √2). camagent publishes 1280x720 with
    simulcast (layers 1280x720 and 640x360); in a 1000-pixel window a tile is a third of the
    width, about 322x181, so the page asks for about 455x256, which no layer fits: the router
    sends the smallest, 640x360. A subscriber that asks nothing gets 1280x720 (test_subscribe),
    so the picture's size here is the page's wish at work."""
    chromium_or_fail()
    router = Router(net, workdir)
    session = router.create_session()
    url = router.session_url(session)
    publisher = drain(net.start([BIN, "publish", "--device", "test-pattern", "--audio", "none", "--session", url,
                                 "--token", router.token(session, "publisher"), "--codec", "vp8", "--size", "1280x720",
                                 "--fps", "15", "--simulcast", "--duration", "40", "--json"], "camagent-publisher", workdir))
    stream = router.wait_for_streams(session, 1)[0]
    page = f"{router.base}/?session={session}&token={router.token(session, 'subscriber')}"
    browser = net.start([PY, os.path.join(HERE, "viewer_chromium.py"), page, "--out", os.path.join(workdir, "chromium"),
                         "--timeout", "40", "--settle", "0", "--frames", "0", "--hold", "8",
                         "--state-selector", ".stream .state"], "chromium", workdir)
    browser.wait(timeout=120)
    stdout = browser.stdout.read()
    assert browser.returncode == 0, f"viewer_chromium.py exit {browser.returncode}:\n" + open(browser.log_path).read()[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    seen = report["session"]["streams"][stream["streamId"]]
    wished = seen.get("preferredResolution")
    assert wished and 300 <= wished["width"] < 640 and wished["height"] < 360, seen
    assert seen["stats"]["framesDecoded"] > 15, seen
    assert (seen["stats"]["width"], seen["stats"]["height"]) == (640, 360), seen
    net.stop(publisher)
