"""`camagent publish --session` when its signalling drops.

A TCP relay (router_support.CuttableLink) sits between camagent and the router; the test
resets every connection through it, as a network drop would. The router keeps the
publisher's connection for its rejoin grace (--rejoin-grace): camagent comes back to it
(?connectionId=) and its stream goes on under the same id, with no event to the others; an
aiortc subscriber of that stream decodes it after the drop. When the relay stays down past
the grace, the router ends the connection and its stream (networkDisconnected), and camagent
joins under a new connection and publishes again: a new stream, which the subscriber
decodes. In a routed session the publisher then makes a new WHIP exchange; in a relayed one
it announces the stream again and answers the subscriber's offer, passed on over the new
WebSocket. Without --whip-reconnect the same drop ends publish with 83. A `camagent subscribe
--captions` through the relay joins again too, and the captions of the sentences spoken
after the cut still reach it. Everything runs in the test's own network namespace; every
wait has a timeout; nothing asserts on time.
"""
import contextlib
import os
import time
from types import SimpleNamespace

import pytest

from captions_support import file_event, json_events, load_sentences, speech_wav, start_captions, wait_for_event
from captions_support import start_publisher as start_caption_publisher
from captions_support import start_subscriber as start_caption_subscriber
from publish_support import EXIT_CONNECTION, check_video
from router_support import ROUTER_PORT, CuttableLink, Router, SessionWatcher, http
from test_router_media import WATCH, start_camagent_publisher, start_subscriber, subscriber_result

RELAY_PORT = ROUTER_PORT + 1


def output(proc):
    """What publish said: its JSON lines (stdout), then its messages (stderr, where session lines go)."""
    return "".join(proc.output) + open(proc.log_path).read()


def wait_until_published(proc, timeout=60):
    """Waits until publish says its stream is published ("stream ID published into" routed,
    "announced in" relayed: publish returned), so the cut drops an established stream, not a
    publish still under way (a drop then fails publish, as a refusal would)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        said = open(proc.log_path).read()
        if "session:   stream " in said and (" published into " in said or " announced in " in said):
            return
        assert proc.poll() is None, output(proc)[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"publish did not say its stream was published within {timeout} s:\n{output(proc)[-3000:]}")


def wait_for_text(proc, text, timeout=60):
    """Waits until publish has said `text` on stderr."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in open(proc.log_path).read():
            return
        assert proc.poll() is None, output(proc)[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"publish did not say {text!r} within {timeout} s:\n{output(proc)[-3000:]}")


@contextlib.contextmanager
def publishing_through_the_relay(net, workdir, *router_flags, mode="routed", watcher_role="subscriber", extra=()):
    """A router (`router_flags`), a session (`mode`), the relay, a session watcher (a token of
    `watcher_role`) and camagent publishing through the relay, its stream published. Yields
    them; the watcher and the relay are closed after. publish's --duration is only a bound."""
    router = Router(net, workdir, *router_flags)
    session = router.create_session(*(["--relayed"] if mode == "relayed" else []))
    link = CuttableLink(net, ROUTER_PORT, RELAY_PORT)
    watcher_token = router.token(session, watcher_role)
    watcher = SessionWatcher(net, router.session_url(session), watcher_token)
    try:
        watcher.wait_for("connected")
        through_link = f"http://{net.addr}:{RELAY_PORT}/v2/sessions/{session}"
        publisher = start_camagent_publisher(net, workdir, through_link, router.token(session, "publisher"), duration=90,
                                             extra=extra)
        first = watcher.wait_for("streamCreated", timeout=60)["stream"]
        wait_until_published(publisher)
        yield SimpleNamespace(router=router, session=session, link=link, watcher=watcher, watcher_token=watcher_token,
                              publisher=publisher, first=first)
    finally:
        watcher.close()
        link.close()


@pytest.mark.parametrize("mode", ["routed", "relayed"])
def test_publish_comes_back_to_its_connection_and_its_stream_goes_on(net, workdir, mode):
    # A grace shorter than the subscriber's watch: a connection wrongly left away would end meanwhile.
    with publishing_through_the_relay(net, workdir, "--rejoin-grace", "3", mode=mode) as p:
        router, session, first = p.router, p.session, p.first
        assert p.link.cut() >= 1, "nothing was open through the relay"
        wait_for_text(p.publisher, f"joined again as connection {first['connectionId']}, kept by the router with its streams")

        # The same stream, after the drop: relayed, its offer reaches publish over the new socket.
        subscriber = start_subscriber(net, workdir, f"{router.session_url(session)}/streams/{first['streamId']}/subscribe",
                                      router.token(session, "subscriber"), "after-drop")
        summary = subscriber_result(subscriber, router)
        check_video(summary["video"][0], duration=WATCH - 2, fps=15, codec="VP8")

        # Nobody heard of the drop: no stream or connection came or went.
        assert [m["type"] for m in p.watcher.messages
                if m["type"] in ("streamCreated", "streamDestroyed", "connectionDestroyed")] == ["streamCreated"], \
            p.watcher.messages
        assert [s["streamId"] for s in router.streams(session)] == [first["streamId"]], router.log()
        assert p.publisher.poll() is None, output(p.publisher)
        code = net.stop(p.publisher, timeout=30)
        text = output(p.publisher)
        assert code == 0, (code, text[-3000:])
        assert "joining again" in text and "publishing again" not in text, text[-3000:]
        assert router.streams(session) == [], router.log()


@pytest.mark.parametrize("mode", ["routed", "relayed"])
def test_past_the_rejoin_grace_publish_joins_anew_and_publishes_again(net, workdir, mode):
    with publishing_through_the_relay(net, workdir, "--rejoin-grace", "2", mode=mode) as p:
        router, session, first, watcher, publisher = p.router, p.session, p.first, p.watcher, p.publisher
        # Down for longer than the grace: publish's attempts to join again are reset meanwhile.
        assert p.link.cut(outage=6) >= 1, "nothing was open through the relay"
        gone = watcher.wait_for("connectionDestroyed", lambda m: m["connectionId"] == first["connectionId"])
        assert gone["reason"] == "networkDisconnected", gone
        ended = watcher.wait_for("streamDestroyed", lambda m: m["streamId"] == first["streamId"])
        assert ended["reason"] == "networkDisconnected", ended

        # Joined again: a new connection, and the camera's stream published again under it.
        try:
            again = watcher.wait_for("streamCreated", lambda m: m["stream"]["streamId"] != first["streamId"],
                                     timeout=60)["stream"]
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- publish (exit {publisher.poll()})\n{open(publisher.log_path).read()[-3000:]}"
                                 f"\n--- router\n{router.log()}") from None
        assert again["connectionId"] != first["connectionId"], (first, again)
        assert (again["hasVideo"], again["hasAudio"]) == (True, True), again
        assert publisher.poll() is None, output(publisher)
        assert p.link.refused >= 1, "publish did not try to join again during the outage"

        subscriber = start_subscriber(net, workdir, f"{router.session_url(session)}/streams/{again['streamId']}/subscribe",
                                      router.token(session, "subscriber"), "after-rejoin")
        summary = subscriber_result(subscriber, router)
        check_video(summary["video"][0], duration=WATCH - 2, fps=15, codec="VP8")

        code = net.stop(publisher, timeout=30)
        text = output(publisher)
        assert code == 0, (code, text[-3000:])
        assert "joining again" in text and f"joined again as connection {again['connectionId']}; publishing again" in text, \
            text[-3000:]
        assert router.streams(session) == [], router.log()


def test_forced_out_while_away_publish_is_told_so_on_its_return_and_ends(net, workdir):
    """A moderator force-disconnects the publisher's connection while its signalling is down:
    when publish comes back with its rejoin key, the router tells it (a close frame saying
    forceDisconnected), and publish ends (83) saying so, rather than joining anew."""
    with publishing_through_the_relay(net, workdir, "--rejoin-grace", "20", watcher_role="moderator") as p:
        first, publisher = p.first, p.publisher
        assert p.link.cut(outage=4) >= 1, "nothing was open through the relay"
        status, _, _ = http(net, "DELETE", f"{p.router.session_url(p.session)}/connections/{first['connectionId']}",
                            p.watcher_token)
        assert status == 204, status
        gone = p.watcher.wait_for("connectionDestroyed", lambda m: m["connectionId"] == first["connectionId"])
        assert gone["reason"] == "forceDisconnected", gone

        publisher.wait(timeout=60)
        text = output(publisher)
        assert publisher.returncode == EXIT_CONNECTION, (publisher.returncode, text[-3000:])
        assert "forceDisconnected" in text and "publishing again" not in text, text[-3000:]
        assert [m for m in p.watcher.messages if m.get("type") == "streamCreated"] == [
            {"type": "streamCreated", "stream": first}], p.watcher.messages


def test_without_reconnecting_a_dropped_session_ends_publish_with_83(net, workdir):
    with publishing_through_the_relay(net, workdir, extra=["--no-whip-reconnect"]) as p:
        assert p.link.cut() >= 1, "nothing was open through the relay"
        p.watcher.wait_for("streamDestroyed", lambda m: m["streamId"] == p.first["streamId"])
        p.publisher.wait(timeout=30)
        text = output(p.publisher)
        assert p.publisher.returncode == EXIT_CONNECTION, (p.publisher.returncode, text[-3000:])
        assert "joining again" not in text, text[-3000:]
        # Nothing was published again.
        assert [m for m in p.watcher.messages if m.get("type") == "streamCreated"] == [
            {"type": "streamCreated", "stream": p.first}], p.watcher.messages


def test_a_subscriber_joins_again_and_its_captions_go_on(net, workdir):
    """`camagent subscribe --session --captions` through the relay: after the cut its media goes
    on (it never went through the signalling), the session joins again, the subscriber says its
    settings on the new connection (the router keeps them per connection), and the finals of
    the sentences spoken after the rejoin reach it."""
    spoken = speech_wav(os.path.join(workdir, "speech.wav"), load_sentences()[:4], lead_in=6.0, gap=1.2)
    router = Router(net, workdir)
    session = router.create_session()
    link = CuttableLink(net, ROUTER_PORT, RELAY_PORT)
    context = lambda: "\n--- router\n" + router.log()  # noqa: E731
    through_link = f"http://{net.addr}:{RELAY_PORT}/v2/sessions/{session}"
    subscriber = start_caption_subscriber(net, workdir, through_link, router.token(session, "subscriber"), duration=150)
    publisher = None
    try:
        publisher = start_caption_publisher(net, workdir, router.session_url(session), router.token(session, "publisher"),
                                            spoken.path, "--captions", duration=int(spoken.duration + 60))
        wait_for_event(subscriber, lambda e: e.get("event") == "state" and e.get("state") == "connected",
                       "state connected line", 60, context, needs=[publisher])
        status, answer = start_captions(net, router, session, router.project_token(),
                                        {"languageCode": "en-US", "partialCaptions": True, "maxDuration": 600})
        assert status == 202, (status, answer, router.log())
        wait_for_event(subscriber, lambda e: e.get("event") == "caption" and e["isFinal"], "first final", 90, context)

        assert link.cut() >= 1, "nothing was open through the relay"
        wait_for_event(subscriber, lambda e: e.get("event") == "signalling" and e.get("state") == "reconnected",
                       "signalling reconnected line", 60, context)
        file_event(publisher, "fileEnded", spoken.duration + 60, context)
        # A final that came after the rejoin: the router sends captions to the new connection.
        deadline = time.monotonic() + 90
        while True:
            events = json_events(subscriber)
            rejoined = next(i for i, e in enumerate(events)
                            if e.get("event") == "signalling" and e.get("state") == "reconnected")
            if any(e.get("event") == "caption" and e["isFinal"] for e in events[rejoined + 1:]):
                break
            assert time.monotonic() < deadline and subscriber.poll() is None, \
                ("no final after the rejoin", [e for e in events if e.get("event") != "stats"][-30:], context())
            time.sleep(0.2)
        assert not any(e.get("event") == "state" and e.get("state") in ("disconnected", "failed") for e in events), \
            [e for e in events if e.get("event") != "stats"][-30:]
    finally:
        net.stop(subscriber)
        if publisher:
            net.stop(publisher)
        link.close()
