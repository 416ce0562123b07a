"""Relayed sessions (DESIGN.md "Sessions"): the router only signals. A publisher announces
its stream over REST with its signalling connection's id; each subscriber's WHEP offer is
passed to that connection (`subscribeOffer`), which answers it (`subscribeAnswer`) or
refuses it (`subscribeError`); the media then goes between the two, never through the
router. `camagent publish --session` into a relayed session does this itself.

Subscribers: aiortc (whep_viewer.py) and `camagent subscribe`. The unanswering and
refusing publisher is a plain WebSocket client (the PyPI `websockets` package). Everything
runs in the test's own network namespace; every wait has a timeout.
"""
import asyncio
import json
import os
import re
import signal
import time

import websockets

from publish_support import BIN, HERE, PY, check_audio, check_video, output_lines
from router_support import WAIT, Router, SessionWatcher, in_namespace, request
from test_router_media import WATCH, start_camagent_publisher, subscriber_result
from test_subscribe import check_pattern_y4m

OFFER_WAIT = 10  # seconds the router waits for a relayed publisher's answer
VIEWER_TIMEOUT = 6  # the publisher's --viewer-timeout: a silent subscriber is dropped after it


def start_whep_viewer(net, workdir, url, token, name, *how):
    summary = os.path.join(workdir, f"{name}.json")
    proc = net.start([PY, os.path.join(HERE, "whep_viewer.py"), "--url", url, "--token", token, *how,
                      "--summary", summary, "-v"], name, workdir)
    proc.summary_path = summary
    return proc


def wait_for_subscribers(router, count, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if router.metrics()["camagent_router_subscribers"] == count:
            return
        time.sleep(0.5)
    raise AssertionError(f"the router still counts {router.metrics()['camagent_router_subscribers']} subscribers, "
                         f"not {count}, after {timeout} s\n{router.log()}")


def media_counters(router):
    metrics = router.metrics()
    return {k: v for k, v in metrics.items() if k.startswith("camagent_router_forwarded")}


def publisher_says(publisher, check, timeout=WAIT):
    """The publisher's log once check(log) holds (it prints what the router told it a moment
    after the router's own counts change); fails the test with the log if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        log = open(publisher.log_path).read()
        if check(log):
            return log
        if time.monotonic() > deadline:
            raise AssertionError(f"the publisher's log never showed it:\n{log[-3000:]}")
        time.sleep(0.2)


def subscribers_in(log, what):
    return re.findall(rf"subscriber (\S+) {what}", log)


def departed(log):
    """Subscribers the publisher let go of: on the router's `unsubscribe` ("left"), or found
    gone by its own ICE consent check ("gone"); a subscriber that stops its ICE before its
    DELETE lands may be either."""
    return subscribers_in(log, "left") + subscribers_in(log, r"gone \(")


def test_camagent_answers_its_relayed_subscribers_and_no_media_passes_the_router(net, workdir):
    router = Router(net, workdir)
    session = router.create_session("--relayed")
    url = router.session_url(session)
    watcher = SessionWatcher(net, url, router.token(session, "subscriber"))
    watcher.wait_for("connected", lambda m: m["mediaMode"] == "relayed")

    publisher = start_camagent_publisher(net, workdir, url, router.token(session, "publisher"), duration=90,
                                         extra=("--viewer-timeout", str(VIEWER_TIMEOUT)))
    stream = router.wait_for_streams(session, 1)[0]
    # The announcement says what the router cannot see for itself.
    assert (stream["hasVideo"], stream["hasAudio"], stream["width"], stream["height"]) == (True, True, 640, 480), stream
    created = watcher.wait_for("streamCreated")
    assert created["stream"]["streamId"] == stream["streamId"], created

    # aiortc subscribes over the router's WHEP endpoint; camagent answers it. It leaves
    # with a DELETE: the router tells camagent, which lets go of that peer.
    subscriber = router.token(session, "subscriber")
    whep = f"{url}/streams/{stream['streamId']}/subscribe"
    proc = start_whep_viewer(net, workdir, whep, subscriber, "relayed-aiortc", "--leave-after", str(WATCH))
    summary = subscriber_result(proc, router)
    # 404 would mean camagent let the subscriber go before its DELETE (its consent check, say).
    assert summary["deleteStatus"] == 204, (summary.get("deleteStatus"), open(publisher.log_path).read()[-3000:],
                                            router.log()[-3000:])
    check_video(summary["video"][0], duration=WATCH - 2, fps=15, codec="VP8")
    check_audio(summary["audio"][0], duration=WATCH - 2)

    # camagent's own subscriber, through the session.
    y4m = os.path.join(workdir, "relayed.y4m")
    sub = net.run([BIN, "subscribe", "--session", url, "--token", subscriber, "--first", "--video-out", y4m,
                   "--duration", "6", "--json"], timeout=90)
    assert sub.returncode == 0, sub.stderr[-3000:] + router.log()
    check_pattern_y4m(y4m, fps=15, seconds=4, size=(640, 480))

    # Both were answered by camagent, and both left again (their WHEP DELETE, then `unsubscribe`).
    wait_for_subscribers(router, 0)
    log = publisher_says(publisher, lambda log: len(departed(log)) >= 2)
    answered = subscribers_in(log, r"answered \(stream")
    assert len(answered) == 2 and sorted(departed(log)) == sorted(answered), log[-3000:]

    # A subscriber that vanishes without a DELETE or any goodbye (killed, as a crashed
    # browser): camagent finds it gone when its ICE consent stops, and tells the router
    # (subscriberLeft), which stops counting it.
    proc = start_whep_viewer(net, workdir, whep, subscriber, "relayed-vanishing", "--duration", "60")
    seen = []
    assert any('"connected"' in line for line in output_lines(proc, 30, seen)), "".join(seen) + router.log()
    assert router.metrics()["camagent_router_subscribers"] == 1
    proc.kill()
    proc.wait(timeout=10)
    wait_for_subscribers(router, 0, timeout=VIEWER_TIMEOUT + 20)
    log = open(publisher.log_path).read()
    answered = subscribers_in(log, r"answered \(stream")
    assert len(answered) == 3 and answered[2] in subscribers_in(log, r"gone \("), log[-3000:]
    # Not one media packet went through the router.
    counters = media_counters(router)
    assert counters and all(v == 0 for v in counters.values()), counters

    # The publisher stops: its stream ends as the client's own doing.
    publisher.send_signal(signal.SIGINT)
    publisher.wait(timeout=30)
    assert publisher.returncode == 0, open(publisher.log_path).read()[-3000:]
    ended = watcher.wait_for("streamDestroyed", lambda m: m["streamId"] == stream["streamId"])
    assert ended["reason"] == "clientDisconnected", ended
    assert router.streams(session) == []
    watcher.close()


def test_offers_are_refused_given_up_and_checked(net, workdir):
    """A publisher that refuses (subscribeError) gets its code passed on; one that does not
    answer gets the subscriber a 503 after the router's wait, then `unsubscribe`; only the
    stream's publisher may answer; WHIP offers and announcements without a connection are
    refused in a relayed session."""
    router = Router(net, workdir)
    session = router.create_session("--relayed")
    url = router.session_url(session)
    publisher = router.token(session, "publisher")
    subscriber = router.token(session, "subscriber")
    offer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n" \
            "c=IN IP4 0.0.0.0\r\na=rtpmap:96 VP8/90000\r\na=recvonly\r\n"

    async def receive_type(ws, kind):
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), WAIT + OFFER_WAIT))
            if message["type"] == kind:
                return message

    async def whep():
        return await asyncio.to_thread(request, "POST", f"{url}/streams/{stream_id}/subscribe", token=subscriber,
                                       body=offer, headers={"Content-Type": "application/sdp"},
                                       timeout=OFFER_WAIT + WAIT)

    async def scenario():
        nonlocal stream_id
        ws = await websockets.connect(router.connect_url(session, publisher), open_timeout=WAIT)
        connection = (await receive_type(ws, "connected"))["connectionId"]
        other = await websockets.connect(router.connect_url(session, subscriber), open_timeout=WAIT)
        await receive_type(other, "connected")

        # Refused in a relayed session: a WHIP offer, and an announcement without a connection.
        results = {}
        results["whip"] = await asyncio.to_thread(request, "POST", f"{url}/publish", token=publisher, body=offer,
                                                  headers={"Content-Type": "application/sdp"})
        results["bare"] = await asyncio.to_thread(request, "POST", f"{url}/publish", token=publisher,
                                                  body={"hasAudio": False, "hasVideo": True})
        status, headers, body = await asyncio.to_thread(
            request, "POST", f"{url}/publish?connectionId={connection}&name=door", token=publisher,
            body={"hasAudio": False, "hasVideo": True, "width": 320, "height": 240})
        assert status == 201, (status, body)
        stream_id = body["streamId"]
        assert headers["Location"] == f"/v2/sessions/{session}/publish/{stream_id}", headers

        # 1: refused by the publisher, with its code.
        pending = asyncio.create_task(whep())
        first = await receive_type(ws, "subscribeOffer")
        assert first["streamId"] == stream_id and first["sdp"] == offer, first
        # Only the stream's publisher may answer it.
        await other.send(json.dumps({"type": "subscribeAnswer", "subscriberId": first["subscriberId"], "sdp": "v=0\r\n"}))
        results["intruder"] = await receive_type(other, "error")
        await ws.send(json.dumps({"type": "subscribeError", "subscriberId": first["subscriberId"], "code": 400,
                                  "message": "no VP8 here"}))
        results["refused"] = await pending

        # 2: never answered: 503 after the router's wait, then `unsubscribe` to the publisher.
        pending = asyncio.create_task(whep())
        second = await receive_type(ws, "subscribeOffer")
        results["silent"] = await pending
        results["unsubscribe"] = await receive_type(ws, "unsubscribe")
        # A late answer finds no one waiting.
        await ws.send(json.dumps({"type": "subscribeAnswer", "subscriberId": second["subscriberId"], "sdp": "v=0\r\n"}))
        results["late"] = await receive_type(ws, "error")
        results["second"] = second

        # 3: the publisher leaves while an offer waits: 404 at once, not after the wait.
        pending = asyncio.create_task(whep())
        await receive_type(ws, "subscribeOffer")
        await ws.close()
        results["gone"] = await pending
        await other.close()
        return results

    stream_id = None
    results = in_namespace(net, scenario, timeout=3 * WAIT + 2 * OFFER_WAIT)
    status, _, body = results["whip"]
    assert status == 409 and "relayed sessions carry media between clients" in body["message"], results["whip"]
    status, _, body = results["bare"]
    assert status == 409 and "connectionId" in body["message"], results["bare"]
    assert results["intruder"]["code"] == 404, results["intruder"]
    status, _, body = results["refused"]
    assert status == 400 and "no VP8 here" in body["message"], results["refused"]
    status, _, body = results["silent"]
    assert status == 503 and "did not answer" in body["message"], results["silent"]
    assert results["unsubscribe"]["subscriberId"] == results["second"]["subscriberId"], results["unsubscribe"]
    assert results["late"]["code"] == 404, results["late"]
    status, _, body = results["gone"]
    assert status == 404 and "ended before its publisher answered" in body["message"], results["gone"]
    # The publisher's leaving took its stream along.
    assert router.streams(session) == [], router.log()
    assert router.metrics()["camagent_router_subscribers"] == 0


def test_the_session_page_publishes_into_a_relayed_session_and_answers_its_subscribers(net, workdir):
    """The session page with a moderator token joins a relayed session where camagent
    publishes. It plays camagent's stream (answered by camagent) and publishes its fake camera
    and microphone by announcing the stream and answering each subscriber's offer in
    JavaScript: an aiortc subscriber and `camagent subscribe` decode it, and the router
    forwards nothing either way."""
    from test_router_page import page_and_camagent_decode_each_other
    from viewer_checks import chromium_or_fail
    chromium_or_fail()
    router = Router(net, workdir)
    session = router.create_session("--relayed")
    report = page_and_camagent_decode_each_other(net, workdir, router, session, hold=16)
    assert report["session"]["mediaMode"] == "relayed", report["session"]
    assert set(media_counters(router).values()) == {0.0}, media_counters(router)
