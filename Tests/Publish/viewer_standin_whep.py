#!/usr/bin/env python3
"""A stand-in for camagent's embedded viewer server, on aiortc + aiohttp.

It serves camagent's own viewer page (read from Sources/ViewerServer/ViewerPage.swift
by viewer_page.py) and answers its WHEP offers with aiortc, streaming a Y4M file
(looped, through aiortc's MediaPlayer) and a sine tone. It exists to prove the
page and the Chromium harness (viewer_chromium.py) before camagent's own WHEP
side does, and it speaks the same HTTP as Sources/ViewerServer:

    viewer_standin_whep.py --video FILE.y4m [--host 0.0.0.0] [--port 0] [--token T]
                           [--offers DIR] [-v]

    GET /                    the viewer page (no token needed)
    POST /whep               offer (application/sdp) -> 201, Location /whep/<id>, answer
    DELETE /whep/<id>        -> 200, unknown -> 404
    OPTIONS /whep[/<id>]     CORS preflight
With --token, POST and DELETE need `Authorization: Bearer T` or `?token=T` (else 401).
The first line on stdout is the bound port. --offers DIR keeps every offer and
answer as DIR/offer-<n>.sdp and DIR/answer-<n>.sdp. SIGTERM/SIGINT end it.
"""
import argparse
import asyncio
import fractions
import hmac
import logging
import os
import signal
import sys
import time
import uuid

import numpy as np
from aiohttp import web
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer
from aiortc.mediastreams import AudioStreamTrack
from av import AudioFrame

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from viewer_page import page_html  # noqa: E402

log = logging.getLogger("viewer-standin")

CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "Location"}


class Tone(AudioStreamTrack):
    """A 440 Hz sine, 48 kHz mono, 20 ms frames paced in real time."""

    def __init__(self, frequency=440.0, rate=48000):
        super().__init__()
        self.frequency, self.rate, self.sent, self.start = frequency, rate, 0, None

    async def recv(self):
        if self.start is None:
            self.start = time.time()
        wait = self.start + self.sent / self.rate - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        n = np.arange(self.sent, self.sent + self.rate // 50)
        pcm = (0.3 * 32767 * np.sin(2 * np.pi * self.frequency * n / self.rate)).astype(np.int16)
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = self.rate, self.sent, fractions.Fraction(1, self.rate)
        self.sent += len(n)
        return frame


class StandIn:
    def __init__(self, args):
        self.args = args
        self.page = page_html()
        self.viewers = {}   # id -> (RTCPeerConnection, MediaPlayer)
        self.count = 0

    def authorized(self, request):
        token = self.args.token
        if token is None:
            return True
        presented = []
        auth = request.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            presented.append(auth[7:].strip())
        if "token" in request.query:
            presented.append(request.query["token"])
        return any(hmac.compare_digest(p.encode(), token.encode()) for p in presented)

    async def index(self, request):
        return web.Response(text=self.page, content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})

    async def preflight(self, request):
        return web.Response(status=204, headers={
            **CORS, "Access-Control-Allow-Methods": "POST, DELETE, OPTIONS",
            "Access-Control-Allow-Headers": "Authorization, Content-Type"})

    async def create(self, request):
        if not self.authorized(request):
            return web.Response(status=401, text="token required\n", headers=CORS)
        if request.content_type != "application/sdp":
            return web.Response(status=415, text="application/sdp only\n", headers=CORS)
        offer = await request.text()
        self.count += 1
        n = self.count
        pc = RTCPeerConnection()
        player = MediaPlayer(self.args.video, loop=True)
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
            # addTrack takes the offer's recvonly transceiver of that kind (sendonly here).
            kinds = {transceiver.kind for transceiver in pc.getTransceivers()}
            if "video" in kinds:
                pc.addTrack(player.video)
            if "audio" in kinds:
                pc.addTrack(Tone())
            await pc.setLocalDescription(await pc.createAnswer())
        except Exception as error:  # a bad offer: 400, like camagent
            log.warning("offer %d refused: %s", n, error)
            player.video.stop()
            await pc.close()
            return web.Response(status=400, text=f"bad offer: {error}\n", headers=CORS)
        answer = pc.localDescription.sdp
        if self.args.offers:
            os.makedirs(self.args.offers, exist_ok=True)
            open(os.path.join(self.args.offers, f"offer-{n}.sdp"), "w").write(offer)
            open(os.path.join(self.args.offers, f"answer-{n}.sdp"), "w").write(answer)
        vid = uuid.uuid4().hex[:12]
        self.viewers[vid] = (pc, player)

        @pc.on("connectionstatechange")
        async def changed():
            log.info("viewer %s: %s", vid, pc.connectionState)
            if pc.connectionState in ("failed", "closed"):
                await self.drop(vid)

        log.info("viewer %s joined (offer %d)", vid, n)
        return web.Response(status=201, text=answer, content_type="application/sdp",
                            headers={**CORS, "Location": f"/whep/{vid}"})

    async def drop(self, vid):
        entry = self.viewers.pop(vid, None)
        if entry:
            pc, player = entry
            if player.video:
                player.video.stop()
            await pc.close()
        return entry is not None

    async def delete(self, request):
        if not self.authorized(request):
            return web.Response(status=401, text="token required\n", headers=CORS)
        if await self.drop(request.match_info["id"]):
            log.info("viewer %s left", request.match_info["id"])
            return web.Response(status=200, headers=CORS)
        return web.Response(status=404, text="no such viewer\n", headers=CORS)

    async def shutdown(self):
        for vid in list(self.viewers):
            await self.drop(vid)


async def main_async(args):
    standin = StandIn(args)
    app = web.Application(client_max_size=64 * 1024)
    app.router.add_get("/", standin.index)
    for path in ("/whep", "/whep/"):
        app.router.add_post(path, standin.create)
        app.router.add_route("OPTIONS", path, standin.preflight)
    app.router.add_delete("/whep/{id}", standin.delete)
    app.router.add_route("OPTIONS", "/whep/{id}", standin.preflight)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(port, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await standin.shutdown()
    await runner.cleanup()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--video", required=True, help="Y4M file to stream (looped)")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    parser.add_argument("--offers", help="directory to keep every offer and answer in")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
