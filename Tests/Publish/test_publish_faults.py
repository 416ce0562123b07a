"""`camagent publish` over a faulty network: the fault link (fault_link.py) between
camagent on side A and the aiortc WHIP receiver (whip_receiver.py) on side B. UDP
suffers; TCP (the WHIP POST and DELETE) does not.

5 % loss both ways, 8 s, VP8 at 800 kbit/s and 30 fps, measured over 40 runs on this
2-core machine while other builds and tests ran on it: the link dropped 26 to 65 of
714-905 packets towards the receiver (3.2-7.2 %), camagent got 11 to 26 NACKs and
resent 12 to 35 packets. With the machine merely shared, the largest step between
consecutive decoded counters was 1 (nothing missing) in 19 runs of 20 and 3 in one
(two frames camagent's busy encoder skipped, not the network); during a concurrent
Swift build it was 1 to 9, with PLIs in three runs of 20. Retransmission hides 5 %
loss, so the counters are held to the bounds of a clean network
(publish_support.check_video: no step over 10, at most 10 % of the span missing).
A lost DTLS flight (the link drops some) delays the first decoded frame by the
1 s DTLS retransmission timer, and by a PLI and a keyframe when camagent's media
started before the receiver had its keys: the first counter decoded ranged from 3
to 109.

A 15 s blackhole, measured in three runs: ICE consent goes unanswered and camagent
says the session dropped 4.8 s in, POSTs again 1 s later (that attempt's ICE fails
9.2 s on, the error is reported), waits its 2 s backoff and is connected again about
1 s after the blackhole's end; the receiver's new session starts at counter 577
where the old one ended at 95 (16 s of frames never sent), and every session was
DELETEd.
"""
import json
import time

from publish_support import (BIN, EXIT_OK, Receiver, camagent_publish, check_audio, check_video, describe,
                             json_lines, states, track_brief)
from router_support import drain, http

LOSS_PERCENT = 5
LOSS_DURATION = 8
BLACKHOLE_SECONDS = 15
DTLS_DURATION = 5


def events_of(events, name):
    return [e for e in events if e.get("event") == name]


def test_five_percent_loss_is_repaired_by_retransmission(fault_link, workdir):
    receiver = Receiver(fault_link.b, workdir)
    fault_link.set(loss=LOSS_PERCENT)   # both ways, from the first ICE check to the DELETE
    proc = camagent_publish(fault_link.a, receiver.url, duration=LOSS_DURATION)
    summary = receiver.stop()
    link = fault_link.stats()
    assert proc.returncode == EXIT_OK, describe(proc, receiver.log())
    events = json_lines(proc.stdout)
    said = states(events)
    assert "connected" in said and said[-1] == "closed", said

    # The link really lost packets: about 5 % of what camagent sent. Towards the
    # receiver go ~100 packets a second, so over 8 s 1.5 % and 10 % are each more than
    # four standard deviations from 5 %. Back to camagent (RTCP, consent: ~5 a second)
    # too few go to say more than that some may be lost.
    towards = link["a->b"]["counts"]
    assert towards["udp"] > 300, link
    assert 0.015 * towards["udp"] <= towards["lost"] <= 0.10 * towards["udp"], link

    # camagent heard the receiver's NACKs and resent what was lost.
    final = events_of(events, "summary")[-1]
    video = final["video"]
    assert video["nackReceived"] > 0 and video["packetsRetransmitted"] > 0, video
    outbound = next(e for e in final["rtcStats"] if e["type"] == "outbound-rtp" and e["kind"] == "video")
    assert outbound["nackCount"] == video["nackReceived"], outbound
    assert outbound["retransmittedPacketsSent"] == video["packetsRetransmitted"], outbound

    # And the receiver decoded the stream as if the network were clean.
    assert len(summary["sessions"]) == 1, [s["id"] for s in summary["sessions"]]
    session = summary["sessions"][0]
    assert session["deleted"], "camagent did not DELETE its resource"
    # Frames are counted against the time the receiver was connected. The handshake
    # is lossy too, and a lost DTLS flight is sent again on DTLS's own timers (1 s,
    # then 2 s), not repaired by NACK: once in CI that most likely held the media back
    # for seconds (44 frames decoded against a floor of 48 for the whole run).
    connected_for = LOSS_DURATION - (session["connectedAt"] - session["created"])
    assert connected_for >= LOSS_DURATION / 4, (session["created"], session["connectedAt"], session["states"])
    check_video(session["video"][0], duration=connected_for, codec="VP8")
    # Audio has no retransmission: Opus conceals the lost 5 %, the tone stays a tone.
    check_audio(session["audio"][0], duration=connected_for)


def test_a_lost_last_dtls_flight_is_sent_again(fault_link, workdir):
    # aiortc answers setup:active, so camagent is the DTLS server: its ChangeCipherSpec
    # and Finished end the handshake on its side. When that flight is lost, aiortc sends
    # its own flight again, and RFC 6347 (4.2.4) has the server answer with its last
    # flight once more. camagent used to ignore every handshake record once connected:
    # it streamed to a receiver that never connected (0 frames decoded, exit 0). This
    # happened by chance in about one run in ten at 5 % loss; here the link drops
    # exactly that datagram.
    receiver = Receiver(fault_link.b, workdir)
    fault_link.drop_dtls(20, count=1, direction="a->b")
    proc = camagent_publish(fault_link.a, receiver.url, duration=DTLS_DURATION)
    summary = receiver.stop()
    assert fault_link.counts("a->b")["dtlsDropped"] == 1, fault_link.stats()
    assert proc.returncode == EXIT_OK, describe(proc, receiver.log())
    session = summary["sessions"][0]
    assert "setup:active" in session["answer"], session["answer"]
    assert "connected" in session["states"], (session["states"], receiver.log())
    # The dropped flight costs aiortc's retransmission timer (1 s, more on a busy machine)
    # before the receiver connects: frames are counted against the time it was connected,
    # as in the loss test above.
    connected_for = DTLS_DURATION - (session["connectedAt"] - session["created"])
    assert connected_for >= DTLS_DURATION / 4, (session["created"], session["connectedAt"], session["states"])
    check_video(session["video"][0], duration=connected_for, codec="VP8")


def receiver_summary(link, receiver):
    """The receiver's live summary (GET /summary), asked from side B."""
    status, _, body = http(link.b, "GET", f"http://{link.b.addr}:{receiver.port}/summary")
    assert status == 200, (status, body)
    return body


def test_a_blackhole_drops_the_session_and_camagent_reconnects(fault_link, workdir):
    receiver = Receiver(fault_link.b, workdir)
    # WHIP reconnection is on by default (--whip-reconnect says so); --reconnect is the
    # camera's (wait for a lost device), as a kiosk runs it.
    proc = fault_link.a.start([BIN, "publish", "--device", "test-pattern", "--audio", "test-tone",
                               "--whip", receiver.url, "--codec", "vp8", "--size", "640x480", "--fps", "30",
                               "--bitrate", "800", "--duration", "120", "--json", "--reconnect",
                               "--whip-reconnect"], "camagent", workdir)
    drain(proc)   # stats lines every second: read on a thread, so camagent never blocks on its pipe

    def wait_for_state(state, after, timeout):
        """How many lines camagent had printed up to its first `state` line past line `after`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = list(proc.output)
            for i in range(after, len(lines)):
                e = json.loads(lines[i]) if lines[i].startswith("{") else {}
                if e.get("event") == "state" and e.get("state") == state:
                    return i + 1
            if not proc.reader.is_alive():
                break
            time.sleep(0.2)
        raise AssertionError(f"camagent did not say {state!r} within {timeout} s (exit {proc.poll()}):\n"
                             + "".join(proc.output)[-4000:] + open(proc.log_path).read()[-2000:])

    streaming_at = wait_for_state("streaming", 0, timeout=60)
    # Media flows before the blackhole: the receiver decodes frames of the first session.
    first = wait_for_frames(fault_link, receiver, session=0, frames=30)
    at_blackhole = max(len(proc.output), streaming_at)
    fault_link.blackhole(BLACKHOLE_SECONDS)
    dropped_at = wait_for_state("dropped", at_blackhole, timeout=BLACKHOLE_SECONDS + 30)
    reconnected_at = wait_for_state("streaming", dropped_at, timeout=BLACKHOLE_SECONDS + 60)
    link = fault_link.stats()
    # A connection needs UDP: the new one came through after the blackhole.
    assert not any(d["blackhole"] for d in link.values()), link
    later = wait_for_frames(fault_link, receiver, session=-1, frames=60)
    assert proc.poll() is None, "camagent exited after reconnecting:\n" + "".join(proc.output)[-3000:]
    code = fault_link.a.stop(proc)
    proc.reader.join(10)
    lines = list(proc.output)
    summary = receiver.stop()
    events = json_lines("".join(lines))
    assert code == EXIT_OK, "".join(lines)[-3000:] + open(proc.log_path).read()[-3000:]

    # What camagent said: the drop (consent went unanswered), the reconnection, and
    # nothing else ending it; while the blackhole lasted, attempts may fail (ICE).
    during = json_lines("".join(lines[at_blackhole:reconnected_at]))
    dropped = [e for e in during if e.get("event") == "state" and e["state"] == "dropped"]
    assert len(dropped) == 1 and "consent" in dropped[0]["reason"], during
    said = states(during)
    assert said.index("dropped") < said.index("reconnecting") < said.index("connected"), said
    assert set(said) <= {"dropped", "reconnecting", "error", "connected", "streaming"}, said
    assert states(json_lines("".join(lines[:at_blackhole]))).count("connected") == 1
    assert states(events)[-1] == "closed", states(events)
    assert events_of(events, "summary")[-1]["connections"] == 2, events_of(events, "summary")[-1]

    # The link blackholed both ways.
    assert link["a->b"]["counts"]["blackholed"] > 100 and link["b->a"]["counts"]["blackholed"] > 0, link

    # What the receiver decoded: frames before, none in between, frames after; every
    # session camagent made was DELETEd (the failed attempts' too).
    sessions = summary["sessions"]
    assert len(sessions) >= 2, [s["id"] for s in sessions]
    before, after = sessions[0]["video"][0], sessions[-1]["video"][0]
    assert before["frames"] >= first and after["frames"] >= later, (track_brief(before), track_brief(after))
    for track in (before, after):
        assert track["backwards"] == 0 and track["repeats"] == 0, track_brief(track)
        assert track["countersRead"] >= 0.9 * track["frames"], track_brief(track)
    # The pattern's counter ran on through the blackhole (the capture never stopped).
    assert after["firstCounter"] > before["lastCounter"], (track_brief(before), track_brief(after))
    for s in sessions[1:-1]:
        assert sum(t["frames"] for t in s["video"]) == 0, s["id"]
    brief = [{k: s[k] for k in ("id", "states", "deleted", "connectedAt")} for s in sessions]
    assert all(s["deleted"] for s in sessions), brief


def wait_for_frames(link, receiver, session, frames, timeout=60):
    """Waits until the receiver's session (an index: 0 the first, -1 the latest) has
    decoded `frames` video frames; returns how many it had."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        sessions = receiver_summary(link, receiver)["sessions"]
        if sessions and sessions[session]["video"]:
            seen = sessions[session]["video"][0]["frames"]
            if seen >= frames:
                return seen
        time.sleep(0.5)
    raise AssertionError(f"session {session} of the receiver decoded {seen} frames, not {frames}, in {timeout} s:\n"
                         + receiver.log())
