#!/usr/bin/env python3
"""A WHIP publisher on aiortc, to prove the test peers before camagent is pointed at them.

    aiortc_publisher.py --video FILE.y4m [--tone HZ] --whip URL [--token T]
                        [--codec vp8|h264] [--duration S] [--json]

The video is a Y4M file (made by `camagent capture --device test-pattern`)
played through aiortc's MediaPlayer; the audio is a generated sine. It follows
the `camagent publish` contract where the tests rely on it: JSON lines on
stdout with --json (negotiated, state, summary), a one-line error on stderr,
and the same exit codes (0 ok, 80 unreachable, 81 unauthorized, 82 refused,
83 WebRTC connection failed, 64 usage). When no RTCP has come back for
RTCP_SILENCE seconds, it reports "reconnecting" and POSTs a new offer.
"""
import argparse
import asyncio
import fractions
import json
import logging
import re
import sys
import time
from urllib.parse import urljoin

import aiohttp
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer, MediaRelay
from aiortc.mediastreams import AudioStreamTrack
from av import AudioFrame

EXIT_OK, EXIT_USAGE = 0, 64
EXIT_UNREACHABLE, EXIT_UNAUTHORIZED, EXIT_REFUSED, EXIT_CONNECTION = 80, 81, 82, 83
RTCP_SILENCE = 4.0
CONNECT_TIMEOUT = 20.0
HTTP_TIMEOUT = 10.0


def answer_codecs(sdp):
    """{kind: [codec names in m-line order]} of an SDP (first section of each kind)."""
    result = {}
    for section in re.split(r"\r?\n(?=m=)", sdp)[1:]:
        lines = section.splitlines()
        kind, _port, _proto, *pts = lines[0][2:].split()
        names = dict(re.findall(r"a=rtpmap:(\d+) ([^/\s]+)", section))
        result.setdefault(kind, [names.get(pt, pt) for pt in pts])
    return result


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class ToneTrack(AudioStreamTrack):
    """A sine at `frequency` Hz, 48 kHz mono s16, in 20 ms frames, paced in real time."""

    def __init__(self, frequency=1000.0, amplitude=0.5, rate=48000):
        super().__init__()
        self.frequency, self.amplitude, self.rate = frequency, amplitude, rate
        self.samples = rate // 50
        self.sent = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.time()
        wait = self.start + self.sent / self.rate - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        n = np.arange(self.sent, self.sent + self.samples)
        pcm = (self.amplitude * 32767 * np.sin(2 * np.pi * self.frequency * n / self.rate)).astype(np.int16)
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.rate
        frame.pts = self.sent
        frame.time_base = fractions.Fraction(1, self.rate)
        self.sent += self.samples
        return frame


class Publisher:
    def __init__(self, args):
        self.args = args
        # Played once (a looped file restarts its timestamps, which aiortc's encoder
        # does not survive): the file must outlast --duration.
        self.player = MediaPlayer(args.video) if args.video else None
        # A track handed to a sender that is then closed is not sent again by the next one:
        # each connection gets its own view of the player through a relay.
        self.relay = MediaRelay()
        self.tone = ToneTrack(args.tone) if args.tone else None
        self.pc = None
        self.resource = None
        self.last_rtcp = None
        self.sessions = 0

    def emit(self, **event):
        if self.args.json:
            print(json.dumps(event), flush=True)

    async def connect(self, http):
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.pc = pc
        if self.player and self.player.video:
            t = pc.addTransceiver(self.relay.subscribe(self.player.video, buffered=False),
                                  direction="sendonly")
            wanted = "video/" + ("H264" if self.args.codec == "h264" else "VP8")
            caps = RTCRtpSender.getCapabilities("video").codecs
            t.setCodecPreferences([c for c in caps if c.mimeType == wanted] +
                                  [c for c in caps if c.mimeType == "video/rtx"])
        if self.tone:
            pc.addTransceiver(self.relay.subscribe(self.tone, buffered=False), direction="sendonly")
        await pc.setLocalDescription(await pc.createOffer())
        headers = {"Content-Type": "application/sdp"}
        if self.args.token:
            headers["Authorization"] = f"Bearer {self.args.token}"
        try:
            async with http.post(self.args.whip, data=pc.localDescription.sdp, headers=headers) as r:
                body = await r.text()
                if r.status in (401, 403):
                    raise Failure(EXIT_UNAUTHORIZED, f"unauthorized (HTTP {r.status})")
                if r.status != 201:
                    raise Failure(EXIT_REFUSED, f"the server refused the stream (HTTP {r.status})")
                location = r.headers.get("Location")
        except aiohttp.ClientConnectionError as e:
            raise Failure(EXIT_UNREACHABLE, f"server unreachable: {e}")
        except asyncio.TimeoutError:
            raise Failure(EXIT_UNREACHABLE, "server did not answer in time")
        self.resource = urljoin(self.args.whip, location) if location else None
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        except Exception as e:
            raise Failure(EXIT_REFUSED, f"unusable answer: {e}")
        for t in pc.getTransceivers():
            self._tap(t.sender)
        codec = next((names[0] for section, names in answer_codecs(body).items()
                      if section == "video" and names), None)
        self.emit(event="negotiated", codec=codec, audioCodec="opus" if self.tone else None)
        self.emit(event="state", state="connecting")
        deadline = time.time() + CONNECT_TIMEOUT
        while pc.connectionState != "connected":
            if pc.connectionState in ("failed", "closed") or time.time() > deadline:
                raise Failure(EXIT_CONNECTION, f"WebRTC connection failed ({pc.connectionState})")
            await asyncio.sleep(0.1)
        self.sessions += 1
        self.last_rtcp = time.time()
        self.emit(event="state", state="connected")

    def _tap(self, sender):
        handler = sender._handle_rtcp_packet

        async def on_rtcp(packet):
            self.last_rtcp = time.time()
            return await handler(packet)
        sender._handle_rtcp_packet = on_rtcp

    async def delete(self, http):
        if self.resource:
            try:
                async with http.delete(self.resource) as r:
                    await r.read()
            except Exception:
                pass
            self.resource = None

    async def run(self):
        timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            try:
                await self.connect(http)
                end = time.time() + self.args.duration
                backoff = 0.5
                while time.time() < end:
                    await asyncio.sleep(0.2)
                    silent = time.time() - self.last_rtcp > RTCP_SILENCE
                    if silent or self.pc.connectionState in ("failed", "closed"):
                        self.emit(event="state", state="reconnecting")
                        await self.pc.close()
                        await self.delete(http)
                        while time.time() < end:
                            try:
                                await self.connect(http)
                                backoff = 0.5
                                break
                            except Failure as e:
                                print(f"aiortc-publisher: reconnect: {e}", file=sys.stderr)
                                await self.pc.close()
                                await asyncio.sleep(backoff)
                                backoff = min(backoff * 2, 4)
                await self.delete(http)
                return EXIT_OK
            finally:
                if self.pc:
                    await self.pc.close()
                if self.player and self.player.video:
                    self.player.video.stop()  # ends the player's decoding thread
                self.emit(event="state", state="closed")
                self.emit(event="summary", sessions=self.sessions)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--video", help="Y4M file to send")
    p.add_argument("--tone", type=float, default=None, help="also send a sine at HZ")
    p.add_argument("--whip", required=True)
    p.add_argument("--token")
    p.add_argument("--codec", choices=["vp8", "h264"], default="vp8")
    p.add_argument("--duration", type=float, default=5)
    p.add_argument("--json", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.ERROR, stream=sys.stderr)
    try:
        return asyncio.run(Publisher(args).run())
    except Failure as e:
        print(f"aiortc-publisher: {e}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
