#!/usr/bin/env python3
"""A WHEP viewer on aiortc: it watches camagent's built-in server like a browser would.

It offers to receive video and audio (recvonly), POSTs the offer to the WHEP
endpoint with the token, applies the answer, and decodes every frame with the
same recording code as whip_receiver.py (frame counters read from the test
pattern, audio pitch and level), so check_video/check_audio in
publish_support.py read its summary.

    whep_viewer.py --url http://HOST:PORT/whep [--token T] [--duration S]
                   [--leave-after S] [--connect-timeout S] [--summary FILE]
                   [--video-codec NAME] [--break-analysis video|audio] [-v]

--duration S     watch this long once connected, then close without a DELETE
                 (as a browser tab that is simply closed does)
--leave-after S  watch this long once connected, then DELETE the resource and close
--video-codec NAME  offer to receive video in this codec only (VP8, H264)
--break-analysis K  make the K track's analysis fail (see whip_receiver.py): exit 5
Stdout gets JSON lines: {"event":"posted","status":...}, {"event":"connected"},
{"event":"done"}. Exit codes: 0 watched, and every frame received was analysed;
2 the server did not answer 201 (the summary says which status); 3 the
connection never came up; 4 anything else; 5 a received frame could not be
analysed (the summary's "error" says which track and why).
"""
import argparse
import asyncio
import json
import logging
import os
import sys
import time
import urllib.parse

import aiohttp
from aiortc import RTCRtpReceiver, RTCSessionDescription

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whip_receiver  # noqa: E402
from whip_receiver import Session  # noqa: E402

log = logging.getLogger("whep-viewer")

EXIT_HTTP = 2
EXIT_NOT_CONNECTED = 3
EXIT_OTHER = 4
EXIT_ANALYSIS = 5


def emit(**event):
    print(json.dumps(event), flush=True)


class Viewer:
    """One WHEP session: the recording Session of whip_receiver.py, on the offering side."""

    def __init__(self, url, token, video_codec=None):
        self.url = url
        self.token = token
        self.video_codec = video_codec
        self.connected = asyncio.Event()
        self.session = Session(self, urllib.parse.urlparse(url).path, None)
        self.status = None
        self.location = None
        self.answer_error = None
        self.delete_status = None
        self.connected_at = None
        self.left_at = None

    def on_connected(self, session):   # called by Session
        self.connected_at = time.time()
        self.connected.set()

    def headers(self):
        h = {"Content-Type": "application/sdp"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    async def start(self, http):
        pc = self.session.pc
        video = pc.addTransceiver("video", direction="recvonly")
        if self.video_codec:
            wanted = f"video/{self.video_codec}".lower()
            codecs = [c for c in RTCRtpReceiver.getCapabilities("video").codecs if c.mimeType.lower() == wanted]
            if not codecs:
                raise ValueError(f"aiortc has no {self.video_codec} decoder")
            video.setCodecPreferences(codecs)
        pc.addTransceiver("audio", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        self.session.offer = pc.localDescription.sdp
        async with http.post(self.url, data=self.session.offer, headers=self.headers()) as r:
            self.status = r.status
            body = await r.text()
            self.location = r.headers.get("Location")
        emit(event="posted", status=self.status, location=self.location)
        if self.status != 201:
            self.answer_error = body.strip()[:500]
            return False
        self.session.answer = body
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        return True

    async def delete(self, http):
        if not self.location:
            return
        target = urllib.parse.urljoin(self.url, self.location)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with http.delete(target, headers=headers) as r:
            self.delete_status = r.status

    def summary(self):
        out = self.session.summary()
        out.update({"url": self.url, "status": self.status, "location": self.location,
                    "answerError": self.answer_error, "deleteStatus": self.delete_status,
                    "viewerConnectedAt": self.connected_at, "leftAt": self.left_at})
        return out


async def run(args):
    viewer = Viewer(args.url, args.token, args.video_codec)
    code = 0
    timeout = aiohttp.ClientTimeout(total=20)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        try:
            if not await viewer.start(http):
                code = EXIT_HTTP
            else:
                try:
                    await asyncio.wait_for(viewer.connected.wait(), args.connect_timeout)
                except asyncio.TimeoutError:
                    code = EXIT_NOT_CONNECTED
                else:
                    emit(event="connected")
                    watch = args.leave_after if args.leave_after is not None else args.duration
                    await asyncio.sleep(watch)
                    viewer.left_at = time.time()
                    if args.leave_after is not None:
                        await viewer.delete(http)
        except Exception as e:
            log.exception("viewer failed")
            viewer.session.error = viewer.session.error or repr(e)
            code = EXIT_OTHER
        finally:
            await viewer.session.close()
    if code == 0 and viewer.session.error:
        # A track consumer failed (whip_receiver.Session records it): what was received was
        # not all checked, so this run is no evidence of a good stream.
        log.error("analysis failed: %s", viewer.session.error)
        code = EXIT_ANALYSIS
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(viewer.summary(), f, indent=1)
    emit(event="done", code=code)
    return code


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--token")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--leave-after", type=float)
    p.add_argument("--connect-timeout", type=float, default=20.0)
    p.add_argument("--summary", metavar="FILE")
    p.add_argument("--video-codec", metavar="NAME")
    whip_receiver.add_break_analysis_option(p)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    whip_receiver.BREAK_ANALYSIS = args.break_analysis
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
