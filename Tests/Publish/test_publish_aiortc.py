"""`camagent publish` against aiortc (whip_receiver.py), as a black box.

Each test runs in its own network namespace (publish_support.py): the receiver
listens on 10.77.0.1, camagent publishes the test pattern and a 1 kHz tone to
it, and the receiver decodes every frame and reads the frame counter drawn
into the pattern. The same checks are made of aiortc's own publisher in
test_receiver_selfcheck.py, so a failure here is camagent's.
"""
import signal
import subprocess
import time

from publish_support import (EXIT_CONNECTION, EXIT_OK, EXIT_REFUSED, EXIT_UNAUTHORIZED, EXIT_UNREACHABLE,
                             EXIT_USAGE, BIN, PY, camagent_publish, camagent_publish_args, check_audio, check_video,
                             describe, json_lines, output_lines, rest_of_output, states, total_frames)

TOKEN = "camagent-test-token"
DURATION = 5


def events_of(proc, name):
    return [e for e in json_lines(proc.stdout) if e.get("event") == name]


def check_good_run(proc, summary, *, codec, receiver_log=""):
    assert proc.returncode == EXIT_OK, describe(proc, receiver_log)
    # What camagent says.
    negotiated = events_of(proc, "negotiated")
    assert negotiated, proc.stdout
    assert negotiated[0]["codec"].upper() == codec, negotiated[0]
    assert negotiated[0]["size"] == "640x480", negotiated[0]
    assert negotiated[0]["audioCodec"].lower() == "opus", negotiated[0]
    said = states(json_lines(proc.stdout))
    assert "connected" in said and said[-1] == "closed", said
    stats = events_of(proc, "stats")
    assert stats, proc.stdout
    final = events_of(proc, "summary")
    assert final, proc.stdout
    assert final[-1]["video"]["framesEncoded"] > 0 and final[-1]["video"]["packetsSent"] > 0, final[-1]
    assert final[-1]["audio"]["packetsSent"] > 0, final[-1]
    # What the receiver decoded.
    assert len(summary["sessions"]) == 1, [s["id"] for s in summary["sessions"]]
    session = summary["sessions"][0]
    assert session["deleted"], "camagent did not DELETE its resource"
    assert len(session["video"]) == 1 and len(session["audio"]) == 1, session
    check_video(session["video"][0], duration=DURATION, codec=codec)
    check_audio(session["audio"][0], duration=DURATION)
    # The W3C-style report carries the same streams, and the receiver's reports came back.
    report = final[-1]["rtcStats"]
    outbound = {e["kind"]: e for e in report if e["type"] == "outbound-rtp"}
    assert set(outbound) == {"audio", "video"}, report
    assert outbound["video"]["packetsSent"] == final[-1]["video"]["packetsSent"], report
    assert outbound["video"]["mimeType"].lower() == f"video/{codec.lower()}", report
    remote = [e for e in report if e["type"] == "remote-inbound-rtp"]
    assert {e["localId"] for e in remote} == {e["id"] for e in outbound.values()}, report
    assert any(e.get("roundTripTime") is not None for e in remote), report
    assert [e["state"] for e in report if e["type"] == "candidate-pair"] == ["succeeded"], report
    # camagent's count of what it sent cannot be below what arrived.
    assert final[-1]["video"]["packetsSent"] >= session["video"][0]["rtpPackets"], (final[-1], session["video"][0])


def test_vp8_and_opus(net, receiver_factory):
    r = receiver_factory(token=TOKEN)
    proc = camagent_publish(net, r.url, codec="vp8", token=TOKEN, duration=DURATION)
    check_good_run(proc, r.stop(), codec="VP8", receiver_log=r.log())


def test_h264_and_opus(net, receiver_factory):
    r = receiver_factory(token=TOKEN)
    proc = camagent_publish(net, r.url, codec="h264", token=TOKEN, duration=DURATION)
    check_good_run(proc, r.stop(), codec="H264", receiver_log=r.log())


def test_video_only(net, receiver_factory):
    r = receiver_factory()
    proc = camagent_publish(net, r.url, codec="vp8", audio="none", duration=3)
    summary = r.stop()
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    session = summary["sessions"][0]
    assert session["audio"] == [] and len(session["video"]) == 1, session
    check_video(session["video"][0], duration=3, codec="VP8")


def test_wrong_token_is_unauthorized(net, receiver_factory):
    r = receiver_factory(token=TOKEN)
    proc = camagent_publish(net, r.url, token="wrong-" + TOKEN, duration=3)
    # In text (no --json) the failure is said once, not by its event and again at the exit.
    text = net.run([BIN, "publish", "--device", "test-pattern", "--audio", "none", "--whip", r.url,
                    "--token", "wrong", "--duration", "3"], timeout=60)
    summary = r.stop()
    assert proc.returncode == EXIT_UNAUTHORIZED, describe(proc)
    assert proc.stderr.strip().startswith("camagent:"), proc.stderr
    # ("HTTP 401", not "401": the receiver's port, printed in the same lines, may hold those digits.)
    assert text.returncode == EXIT_UNAUTHORIZED and text.stderr.count("HTTP 401") == 1, text.stderr
    assert summary["unauthorized"] >= 1 and summary["sessions"] == []


def test_not_found_is_refused(net, receiver_factory):
    r = receiver_factory("--status", "404")
    proc = camagent_publish(net, r.url, duration=3)
    r.stop()
    assert proc.returncode == EXIT_REFUSED, describe(proc)
    assert proc.stderr.strip().startswith("camagent:"), proc.stderr


def test_server_error_is_refused(net, receiver_factory):
    r = receiver_factory("--status", "503")
    proc = camagent_publish(net, r.url, duration=3)
    r.stop()
    assert proc.returncode == EXIT_REFUSED, describe(proc)


def test_nothing_listening_is_unreachable(net):
    # Port 9 on the namespace's own address: no listener, the connection is refused.
    proc = camagent_publish(net, f"http://{net.addr}:9/whip", duration=3)
    assert proc.returncode == EXIT_UNREACHABLE, describe(proc)
    assert proc.stderr.strip().startswith("camagent:"), proc.stderr


def test_wrong_fingerprint_is_refused(net, receiver_factory):
    r = receiver_factory("--bad-fingerprint")
    proc = camagent_publish(net, r.url, duration=5)
    summary = r.stop()
    assert proc.returncode == EXIT_CONNECTION, describe(proc, r.log())
    assert "connected" not in states(json_lines(proc.stdout)), proc.stdout
    assert total_frames(summary, "video") == 0 and total_frames(summary, "audio") == 0, summary["sessions"]


def test_peer_vanishes_then_reconnect(net, workdir, receiver_factory):
    # The receiver drops the first session silently 3 s after it connects; camagent must
    # notice (no RTCP, or ICE consent expiring: at most 30 s by RFC 7675), say
    # "reconnecting" and POST a new offer. It has the rest of --duration to do so, enough
    # for a consent expiry and a few backoff steps: the later session must decode frames.
    # --duration is only a bound: 4 s after camagent connected again, Ctrl-C ends it.
    r = receiver_factory("--vanish-after", "3")
    publisher = net.start(camagent_publish_args(r.url, duration=90), "camagent-vanish", workdir)
    lines, reconnecting = [], False
    for line in output_lines(publisher, 80, lines):
        said = states(json_lines(line))
        reconnecting = reconnecting or "reconnecting" in said
        if reconnecting and "connected" in said:
            break
    time.sleep(4)
    publisher.send_signal(signal.SIGINT)
    rest = rest_of_output(publisher, 60)
    proc = subprocess.CompletedProcess(publisher.args, publisher.returncode, "".join(lines) + rest,
                                       open(publisher.log_path).read())
    summary = r.stop()
    said = states(json_lines(proc.stdout))
    assert "reconnecting" in said, describe(proc, r.log())
    assert said.index("connected") < said.index("reconnecting"), said
    assert "connected" in said[said.index("reconnecting"):], said
    assert proc.returncode == EXIT_OK, describe(proc)
    sessions = summary["sessions"]
    assert len(sessions) >= 2, [s["id"] for s in sessions]
    assert sessions[0]["vanished"]
    later = sessions[-1]
    assert later["video"] and later["video"][0]["frames"] > 0, later
    assert later["video"][0]["countersRead"] > 0 and later["video"][0]["backwards"] == 0, later["video"][0]
    # Every session camagent left behind was DELETEd (the vanished one excepted).
    brief = [{k: s[k] for k in ("id", "states", "deleted", "vanished", "connectedAt")} for s in sessions]
    assert later["deleted"], (brief, summary["requests"][-6:], proc.stdout[-3000:], proc.stderr[-2000:])



def test_ctrl_c_while_ice_goes_unanswered_stops_at_once_and_deletes(net, workdir, receiver_factory):
    # The receiver answers the POST, then answers no ICE check (--vanish-on-answer): the first
    # connection would wait out --connect-timeout (60 s here). Ctrl-C ends it at once, says
    # "stopped while connecting" with exit 0, and the resource the POST made is DELETEd.
    r = receiver_factory("--vanish-on-answer")
    publisher = net.start(camagent_publish_args(r.url, duration=300, extra=["--connect-timeout", "60"]),
                          "camagent-stop-connecting", workdir)
    deadline = time.monotonic() + 60
    while "vanishing" not in open(r.proc.log_path).read():
        assert publisher.poll() is None, open(publisher.log_path).read()[-3000:]
        assert time.monotonic() < deadline, "the receiver never answered\n" + r.log()
        time.sleep(0.1)
    publisher.send_signal(signal.SIGINT)
    out = rest_of_output(publisher, 30)   # well within the 60 s the connection would take
    proc = subprocess.CompletedProcess(publisher.args, publisher.returncode, out, open(publisher.log_path).read())
    summary = r.stop()
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    stopped = [(e["state"], e["reason"]) for e in json_lines(proc.stdout) if e.get("event") == "publish"]
    assert stopped == [("stopped", "stopped while connecting")], describe(proc)
    assert "connected" not in states(json_lines(proc.stdout)), describe(proc)
    sessions = summary["sessions"]
    assert [(s["vanished"], s["deleted"]) for s in sessions] == [(True, True)], (sessions, summary["requests"])


def test_a_forged_dtls_alert_from_elsewhere_does_not_end_the_stream(net, workdir, receiver_factory):
    # Any datagram whose first byte is 20-63 was taken as DTLS, whoever sent it: once
    # connected, one byte 0x15 (an alert) from any address ended the connection as "closed by
    # the peer" (exit 83 here, with --no-whip-reconnect). Only the peer's own addresses (its
    # candidates, or where its authenticated checks came from) count now. A third socket sends
    # a bare 0x15 and a whole fatal-alert record to camagent's port of the selected pair.
    r = receiver_factory(token=TOKEN)
    publisher = net.start(camagent_publish_args(r.url, token=TOKEN, duration=8, extra=["--no-whip-reconnect"]),
                          "camagent-forged-alert", workdir)
    lines, pair = [], None
    for line in output_lines(publisher, 60, lines):
        pair = next((e.get("selectedPair") for e in json_lines(line) if e.get("state") == "streaming"), None)
        if pair:
            break
    assert pair, "".join(lines)[-3000:]
    host, port = pair.split(" -> ")[0].rsplit(":", 1)
    alert = bytes([21, 0xFE, 0xFD]) + bytes(8) + bytes([0, 2, 2, 40])   # DTLS 1.2, fatal handshake_failure
    forge = net.run([PY, "-c", "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                     f"[s.sendto(d, ({host!r}, {int(port)})) for d in (b'\\x15', bytes.fromhex({alert.hex()!r}))]"],
                    timeout=30)
    assert forge.returncode == 0, forge.stderr
    rest = rest_of_output(publisher, 60)
    proc = subprocess.CompletedProcess(publisher.args, publisher.returncode, "".join(lines) + rest,
                                       open(publisher.log_path).read())
    summary = r.stop()
    assert proc.returncode == EXIT_OK, describe(proc, r.log())
    said = states(json_lines(proc.stdout))
    assert "dropped" not in said and "failed" not in said and said[-1] == "closed", said
    sessions = summary["sessions"]
    assert len(sessions) == 1 and sessions[0]["deleted"], [(s["id"], s["deleted"]) for s in sessions]
    check_video(sessions[0]["video"][0], duration=8, codec="VP8")


def test_peer_vanishes_with_no_whip_reconnect_ends_publish(net, receiver_factory):
    # The same vanishing receiver as above, with --no-whip-reconnect: camagent must not POST
    # again. It says the session dropped and ends with 83 (the connection dropped for good)
    # long before its --duration, which would have ended it with 0; the receiver saw one
    # session only.
    r = receiver_factory("--vanish-after", "3")
    proc = camagent_publish(net, r.url, duration=120, timeout=150, extra=["--no-whip-reconnect"])
    summary = r.stop()
    assert proc.returncode == EXIT_CONNECTION, describe(proc, r.log())
    events = json_lines(proc.stdout)
    said = states(events)
    assert "connected" in said and "reconnecting" not in said, said
    assert said[-1] in ("failed", "closed"), said
    sessions = summary["sessions"]
    assert len(sessions) == 1 and sessions[0]["vanished"], [(s["id"], s["vanished"]) for s in sessions]
    posts = [q for q in summary["requests"] if q["method"] == "POST"]
    assert len(posts) == 1, summary["requests"]
    # Media flowed before the drop: the one session decoded frames.
    assert sessions[0]["video"] and sessions[0]["video"][0]["frames"] > 0, sessions[0]
    # Its summary counts the one connection.
    final = events_of(proc, "summary")
    assert final and final[-1]["connections"] == 1, final[-1:]

def test_bad_usage(net):
    for bad in (["--listen", "nowhere"], ["--open", "--viewer-token", "t"], ["--viewer-timeout", "1"]):
        proc = net.run([BIN, "publish", "--device", "test-pattern", *bad], timeout=30)
        assert proc.returncode == EXIT_USAGE, (bad, describe(proc))
    # Seconds that are no number of seconds: a usage error, not a trap in a deadline's arithmetic.
    for flag in ("--http-timeout", "--connect-timeout", "--duration"):
        for value in ("0", "-1", "nan", "inf"):
            proc = net.run([BIN, "publish", "--device", "test-pattern", "--whip", f"http://{net.addr}:9/whip",
                            f"{flag}={value}"], timeout=30)
            assert proc.returncode == EXIT_USAGE and f"{flag} must be a positive number of seconds" in proc.stderr, \
                (flag, value, describe(proc))
    proc = net.run([BIN, "publish", "--device", "test-pattern", "--whip", f"http://{net.addr}:9/whip",
                    "--codec", "theora"], timeout=30)
    assert proc.returncode == EXIT_USAGE, describe(proc)
    # A viewer token with a server and no built-in viewer (no --listen) would be ignored: said instead.
    proc = net.run([BIN, "publish", "--device", "test-pattern", "--whip", f"http://{net.addr}:9/whip",
                    "--viewer-token", "t"], timeout=30)
    assert proc.returncode == EXIT_USAGE and "--listen" in proc.stderr, describe(proc)
