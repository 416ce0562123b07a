"""The viewer page (Sources/ViewerServer/ViewerPage.swift) in headless Chromium,
served by an aiortc stand-in (viewer_standin_whep.py) that streams the camagent
test pattern: this proves the page and the Chromium harness against a WebRTC
stack nobody here wrote (test_viewer_agent.py runs the same page against
camagent itself). Chromium is driven over DevTools (viewer_chromium.py). Both run in the test's network
namespace (publish_support.net), given a default route so that Chromium offers
its host candidate the way it does on a LAN.
"""
import os
import re

import pytest

from publish_support import HERE, PY, read_line
from viewer_checks import check_pattern_frames, chromium_or_fail, open_page

TOKEN = "viewer-test-token"


@pytest.fixture
def standin(net, workdir, pattern_y4m):
    # Chromium without media permission gathers only on the default route's interface.
    added = net.run(["ip", "route", "add", "default", "via", "10.77.0.254", "dev", net.iface], timeout=10)
    assert added.returncode == 0, added.stderr
    offers = os.path.join(workdir, "sdp")
    proc = net.start([PY, os.path.join(HERE, "viewer_standin_whep.py"), "--video", pattern_y4m,
                      "--token", TOKEN, "--offers", offers, "-v"], "viewer-standin", workdir)
    port = int(read_line(proc, 30))
    proc.base = f"http://{net.addr}:{port}/"
    proc.offers = offers
    yield proc
    net.stop(proc)


def test_viewer_page_plays_the_pattern(net, workdir, standin):
    chromium_or_fail()
    report = open_page(net, workdir, standin.base + "?token=" + TOKEN, timeout=40)
    check_pattern_frames(report, size=(640, 480))

    # What Chromium offered: recvonly video then audio, bundled, no SSRCs, a host candidate.
    offer = open(os.path.join(standin.offers, "offer-1.sdp")).read()
    assert "a=group:BUNDLE 0 1" in offer
    media = re.findall(r"^m=(\w+) ", offer, re.M)
    assert media == ["video", "audio"]
    assert offer.count("a=recvonly") == 2 and "a=ssrc:" not in offer
    assert "VP8/90000" in offer and "opus/48000/2" in offer
    assert re.search(r"^a=candidate:\S+ 1 udp \d+ 10\.77\.0\.1 \d+ typ host", offer, re.M), offer

    # Leaving the page DELETEd the WHEP resource.
    net.stop(standin)
    log = open(standin.log_path).read()
    assert re.search(r"viewer \w+ left", log), log[-2000:]


def test_viewer_page_without_token_says_so(net, workdir, standin):
    chromium_or_fail()
    report = open_page(net, workdir, standin.base, timeout=6)
    assert report["finalState"] == "new", report["states"]
    assert "token" in report["message"], report["message"]
    assert not os.path.exists(os.path.join(standin.offers, "offer-1.sdp"))
