"""Headless Chromium on a viewer page, and what a page playing the test pattern must show.

Shared by test_viewer_page.py (the page against an aiortc stand-in) and
test_viewer_agent.py (the page served by camagent itself).
"""
import json
import os
import shutil

import numpy as np
import pytest

from publish_support import HERE, PY
from pattern import band_height, decode_counter


def chromium_or_fail():
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.fail("chromium is not installed (scripts/install --test installs Debian's chromium)")


def open_page(net, workdir, url, timeout, refuse_extensions=()):
    """Runs viewer_chromium.py on `url` inside the test's network; returns its report.
    `refuse_extensions`: RTP header extension URIs the page's offer leaves out."""
    out = os.path.join(workdir, "chromium")
    refuse = [a for uri in refuse_extensions for a in ("--refuse-extension", uri)]
    done = net.run([PY, os.path.join(HERE, "viewer_chromium.py"), url, "--out", out,
                    "--timeout", str(timeout), "--settle", "3", "--frames", "2", *refuse], timeout=timeout + 90)
    assert done.returncode == 0, f"viewer_chromium.py exit {done.returncode}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_pattern_frames(report, *, size, video_codec="video/VP8"):
    """The page reports connected, and its <video> shows the test pattern playing."""
    brief = {k: v for k, v in report.items() if k != "chromiumLog"}
    assert report["finalState"] == "connected", json.dumps(brief, indent=1)
    assert report["states"][-1] == "connected"

    # Pixels, not just a page: the barcode band of the test pattern reads back
    # (guard cells bright/dark/bright/dark, check nibble right) and its counter advances.
    frames = report["frames"]
    assert len(frames) == 2 and all(frames), brief
    assert (frames[0]["width"], frames[0]["height"]) == size
    lumas = [np.load(f["luma"]) for f in frames]
    counters = [decode_counter(y) for y in lumas]
    assert None not in counters, brief
    assert counters[1] > counters[0], counters
    band = lumas[0][: band_height(size[1])]
    cells = [band[:, c * 16 + 4:(c + 1) * 16 - 4].mean() for c in range(4)]
    assert cells[0] > 160 and cells[1] < 96 and cells[2] > 160 and cells[3] < 96, cells

    stats = report["stats"]
    assert stats["framesDecoded"] > 30 and stats["videoCodec"] == video_codec, stats
    assert stats["audioBytes"] > 0 and stats["audioCodec"] == "audio/opus", stats
    for label in ("frames decoded", "frames/s", "video bitrate", "video packets lost", "video jitter",
                  "audio bytes"):
        assert label in report["statsText"]
    assert os.path.getsize(report["screenshot"]) > 10000
