#!/usr/bin/env python3
"""aiortc as a WHEP subscriber that decodes every video frame: the aiortc side of the
subscriber benchmark (Benchmarks/subscriber.py), and its clock for the latency rows.

    subscriber_aiortc.py --whep URL [--token T] [--duration S] [--counters FILE] [--connect-timeout S]

It offers to receive video only (recvonly; the benchmark's stream has no audio),
POSTs the offer, applies the answer, and takes every decoded frame off the track
(aiortc decodes on its own thread whether or not anyone reads the track; a frame
not read would pile up in the track's queue). Without --counters nothing else is
done with a frame: it is counted and dropped, so the process's CPU is aiortc's
receive path and its decoder.

--counters FILE  also read the test pattern's frame counter (the barcode,
                 Tests/Device/pattern.py) from each frame's luma and write, per
                 frame, [counter, arrival, capture]: arrival is when the frame
                 came off the track (time.time()), capture the sender's time of
                 the frame (its RTP time put on the sender's wall clock through
                 the latest RTCP sender report received, null before the first
                 one). Used to time frames, never in a CPU run.

Stdout gets JSON lines: {"event":"connected"}, then {"event":"stats","framesDecoded":N}
once a second, and {"event":"summary",...} at the end (after --duration once
connected, or SIGTERM/SIGINT). Exit 0 when it watched; 2 the server did not answer
201; 3 no connection within --connect-timeout, or the connection failed; 4 anything
else (a frame whose analysis raised included).
"""
import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
import urllib.parse

import aiohttp
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Tests", "Device"))
from pattern import decode_counter  # noqa: E402

log = logging.getLogger("subscriber-aiortc")

EXIT_HTTP = 2
EXIT_NOT_CONNECTED = 3
EXIT_OTHER = 4
NTP_TO_UNIX = 2208988800


def emit(**event):
    print(json.dumps(event), flush=True)


class Watch:
    def __init__(self, args):
        self.args = args
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.connected = asyncio.Event()
        self.failed = asyncio.Event()
        self.frames = 0
        self.first_frame_at = None
        self.sizes = {}
        self.codec = None
        self.sender_report = None   # (sender's wall clock in Unix seconds, RTP timestamp) of the latest SR
        self.receiver = None
        self.timed = []             # [counter, arrival, capture] with --counters
        self.location = None
        self.error = None

        @self.pc.on("connectionstatechange")
        async def _state():
            if self.pc.connectionState == "connected":
                self.connected.set()
            elif self.pc.connectionState == "failed":
                self.failed.set()

        @self.pc.on("track")
        def _track(track):
            if track.kind == "video":
                self.consumer = asyncio.ensure_future(self.consume(track))

    def tap_sender_reports(self, receiver):
        self.receiver = receiver
        handle = receiver._handle_rtcp_packet

        async def on_rtcp(packet):
            info = getattr(packet, "sender_info", None)
            if info is not None:
                ntp = info.ntp_timestamp
                self.sender_report = ((ntp >> 32) - NTP_TO_UNIX + (ntp & 0xFFFFFFFF) / 2**32, info.rtp_timestamp)
            return await handle(packet)
        receiver._handle_rtcp_packet = on_rtcp

    def capture_time(self, pts):
        """The frame's RTP time on the sender's wall clock (latest SR), or None."""
        if self.sender_report is None or pts is None:
            return None
        # aiortc counts frame times from its first frame's RTP time (the receiver's mapper).
        mapper = getattr(self.receiver, "_RTCRtpReceiver__timestamp_mapper", None)
        origin = getattr(mapper, "_origin", None)
        if origin is None:
            raise RuntimeError("aiortc's RTP timestamp mapper has no origin: cannot time frames")
        sr_unix, sr_rtp = self.sender_report
        rtp = (origin + int(pts)) & 0xFFFFFFFF
        delta = ((rtp - sr_rtp + 2**31) % 2**32) - 2**31
        return sr_unix + delta / 90000.0

    async def consume(self, track):
        try:
            while True:
                frame = await track.recv()
                arrived = time.time()
                if self.first_frame_at is None:
                    self.first_frame_at = arrived
                self.frames += 1
                if self.args.counters:
                    key = f"{frame.width}x{frame.height}"
                    self.sizes[key] = self.sizes.get(key, 0) + 1
                    plane = frame.planes[0]
                    y = np.frombuffer(plane, dtype=np.uint8).reshape(frame.height, plane.line_size)[:, :frame.width]
                    self.timed.append([decode_counter(y), arrived, self.capture_time(frame.pts)])
        except (MediaStreamError, asyncio.CancelledError):
            pass
        except Exception as e:   # a frame that cannot be analysed fails the run
            log.exception("video track")
            self.error = f"video: {e!r}"
            self.failed.set()

    def headers(self):
        h = {"Content-Type": "application/sdp"}
        if self.args.token:
            h["Authorization"] = f"Bearer {self.args.token}"
        return h

    async def offer(self, http):
        self.pc.addTransceiver("video", direction="recvonly")
        await self.pc.setLocalDescription(await self.pc.createOffer())
        async with http.post(self.args.whep, data=self.pc.localDescription.sdp, headers=self.headers()) as r:
            body = await r.text()
            self.location = r.headers.get("Location")
            if r.status != 201:
                self.error = f"WHEP POST answered {r.status}: {body.strip()[:300]}"
                return False
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        for t in self.pc.getTransceivers():
            if t.kind == "video":
                self.tap_sender_reports(t.receiver)
        self.codec = answer_video_codec(body)
        return True

    async def delete(self, http):
        if not self.location:
            return
        headers = {"Authorization": f"Bearer {self.args.token}"} if self.args.token else {}
        try:
            async with http.delete(urllib.parse.urljoin(self.args.whep, self.location), headers=headers) as r:
                await r.read()
        except aiohttp.ClientError as e:
            log.warning("DELETE failed: %r", e)


def answer_video_codec(sdp):
    """The codec the answer gives video: the rtpmap name of the m=video line's first payload type."""
    section = next((part for part in sdp.split("m=")[1:] if part.startswith("video")), None)
    if section is None:
        return None
    first = section.split("\n", 1)[0].split()[3:4]
    for line in section.splitlines():
        if first and line.startswith(f"a=rtpmap:{first[0]} "):
            return line.split()[1].split("/")[0]
    return None


async def run(args):
    watch = Watch(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    code = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
        try:
            if not await watch.offer(http):
                code = EXIT_HTTP
            else:
                waiting = [asyncio.ensure_future(e.wait()) for e in (watch.connected, watch.failed, stop)]
                await asyncio.wait(waiting, timeout=args.connect_timeout, return_when=asyncio.FIRST_COMPLETED)
                for w in waiting:
                    w.cancel()
                if not watch.connected.is_set() or watch.failed.is_set():
                    watch.error = watch.error or f"not connected within {args.connect_timeout} s " \
                                                 f"(state {watch.pc.connectionState})"
                    code = EXIT_NOT_CONNECTED
                else:
                    emit(event="connected", codec=watch.codec)
                    deadline = time.monotonic() + args.duration
                    next_stats = time.monotonic() + 1
                    while not stop.is_set() and time.monotonic() < deadline:
                        if watch.failed.is_set():
                            watch.error = watch.error or "the connection failed"
                            code = EXIT_OTHER
                            break
                        try:
                            await asyncio.wait_for(stop.wait(), max(0.0, min(next_stats, deadline) - time.monotonic()))
                        except asyncio.TimeoutError:
                            pass
                        if time.monotonic() >= next_stats:
                            next_stats += 1
                            emit(event="stats", framesDecoded=watch.frames)
                    await watch.delete(http)
        except Exception as e:
            log.exception("subscriber failed")
            watch.error = watch.error or repr(e)
            code = EXIT_OTHER
        finally:
            try:
                await asyncio.wait_for(watch.pc.close(), 10)
            except Exception as e:
                log.warning("close: %r", e)
    if code == 0 and watch.error:
        code = EXIT_OTHER
    if args.counters:
        with open(args.counters, "w") as f:
            json.dump({"frames": watch.timed, "sizes": watch.sizes, "codec": watch.codec}, f)
    emit(event="summary", code=code, framesDecoded=watch.frames, codec=watch.codec, error=watch.error)
    return code


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--whep", required=True)
    p.add_argument("--token")
    p.add_argument("--duration", type=float, default=600, help="seconds to watch once connected")
    p.add_argument("--connect-timeout", type=float, default=20)
    p.add_argument("--counters", metavar="FILE", help="read and time every frame's counter into FILE (JSON)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
