"""The viewer page (Sources/ViewerServer/ViewerPage.swift) in headless Chromium.

Until camagent's own WHEP side exists, the page is served by an aiortc stand-in
(viewer_standin_whep.py) that streams the camagent test pattern; Chromium is
driven over DevTools (viewer_chromium.py). Both run in the test's network
namespace (publish_support.net), given a default route so that Chromium offers
its host candidate the way it does on a LAN.
"""
import json
import os
import re
import shutil
import sys

import numpy as np
import pytest

from publish_support import HERE, PY, read_line
from pattern import band_height, decode_counter

TOKEN = "viewer-test-token"


def chromium_or_fail():
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.fail("chromium is not installed (scripts/install --test installs Debian's chromium)")


@pytest.fixture
def standin(net, workdir, pattern_y4m):
    if net.name:
        # Chromium without media permission gathers only on the default route's interface.
        net.run(["ip", "route", "add", "default", "via", "10.77.0.254", "dev", net.iface], timeout=10)
    offers = os.path.join(workdir, "sdp")
    proc = net.start([PY, os.path.join(HERE, "viewer_standin_whep.py"), "--video", pattern_y4m,
                      "--token", TOKEN, "--offers", offers, "-v"], "viewer-standin", workdir)
    port = int(read_line(proc, 30))
    proc.base = f"http://{net.addr}:{port}/"
    proc.offers = offers
    yield proc
    net.stop(proc)


def open_page(net, workdir, url, timeout):
    out = os.path.join(workdir, "chromium")
    done = net.run([PY, os.path.join(HERE, "viewer_chromium.py"), url, "--out", out,
                    "--timeout", str(timeout), "--settle", "3", "--frames", "2"], timeout=timeout + 90)
    assert done.returncode == 0, f"viewer_chromium.py exit {done.returncode}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_viewer_page_plays_the_pattern(net, workdir, standin):
    chromium_or_fail()
    report = open_page(net, workdir, standin.base + "?token=" + TOKEN, timeout=40)
    brief = {k: v for k, v in report.items() if k != "chromiumLog"}
    assert report["finalState"] == "connected", json.dumps(brief, indent=1)
    assert report["states"][-1] == "connected"

    # Pixels, not just a page: the barcode band of the test pattern reads back
    # (guard cells bright/dark/bright/dark, check nibble right) and its counter advances.
    frames = report["frames"]
    assert len(frames) == 2 and all(frames), brief
    assert (frames[0]["width"], frames[0]["height"]) == (640, 480)
    lumas = [np.load(f["luma"]) for f in frames]
    counters = [decode_counter(y) for y in lumas]
    assert None not in counters, brief
    assert counters[1] > counters[0], counters
    y = lumas[0]
    band = y[: band_height(480)]
    cells = [band[:, c * 16 + 4:(c + 1) * 16 - 4].mean() for c in range(4)]
    assert cells[0] > 160 and cells[1] < 96 and cells[2] > 160 and cells[3] < 96, cells

    stats = report["stats"]
    assert stats["framesDecoded"] > 30 and stats["videoCodec"] == "video/VP8", stats
    assert stats["audioBytes"] > 0 and stats["audioCodec"] == "audio/opus", stats
    for label in ("frames decoded", "frames/s", "video bitrate", "video packets lost", "video jitter",
                  "audio bytes"):
        assert label in report["statsText"]
    assert os.path.getsize(report["screenshot"]) > 10000

    # What Chromium offered: recvonly video then audio, bundled, no SSRCs, a host candidate.
    offer = open(os.path.join(standin.offers, "offer-1.sdp")).read()
    assert "a=group:BUNDLE 0 1" in offer
    media = re.findall(r"^m=(\w+) ", offer, re.M)
    assert media == ["video", "audio"]
    assert offer.count("a=recvonly") == 2 and "a=ssrc:" not in offer
    assert "VP8/90000" in offer and "opus/48000/2" in offer
    if net.name:
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
