#!/usr/bin/env python3
"""N aiortc subscribers in one process and one asyncio loop that count RTP and decode nothing.

    router_subscribers.py --count N whep --url URL/streams/ID/subscribe --token T
    router_subscribers.py --count N janus --janus http://HOST:8088/janus --room 1234

Run by Benchmarks/router.py, the same way for camagent's router (WHEP, we offer)
and for Janus's VideoRoom (its HTTP API, Janus offers). Fifty decoding
subscribers do not fit on two cores, so decoding is switched off:

  aiortc 1.16's RTCRtpReceiver hands every reassembled frame to a decoder thread
  whether or not anyone reads the track (rtcrtpreceiver.decoder_worker), so
  leaving the tracks unread still decodes everything (and queues the frames
  forever). The thread gets its decoder from the name `get_decoder` in
  aiortc.rtcrtpreceiver: that name is replaced by one returning NullDecoder,
  which counts the frames it is given and returns none. Everything before it
  still runs as for a real viewer: ICE, DTLS, SRTP, RTP parsing, NACKs,
  RTCP receiver reports, REMB, depacketizing and frame reassembly.

Counting: every RTP packet that SRTP let through (RTCDtlsTransport._handle_rtp_data,
before routing, so retransmissions count too) per subscriber, with its length;
and per kind at the receiver.

Stdout gets JSON lines; stdin takes commands, one a line:
  {"event": "connected", ...}   every subscriber's connection is up
  mark  -> {"event": "mark", "time": ..., "subscribers": [{"packets", "bytes", "video", "audio", "frames"}...]}
  stop  -> closes every connection, {"event": "done"}, exit 0
A subscriber that cannot connect ends the process with exit 3 and
{"event": "failed", "error": ...}: no partial numbers.
"""
import argparse
import asyncio
import json
import logging
import os
import sys
import time

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Tests", "Publish"))

import aiortc.rtcrtpreceiver as rtcrtpreceiver  # noqa: E402
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription  # noqa: E402
from aiortc.rtcdtlstransport import RTCDtlsTransport  # noqa: E402
from aiortc.rtp import RtcpByePacket  # noqa: E402

log = logging.getLogger("router-subscribers")

EXIT_FAILED = 3
CONNECT_TIMEOUT = 30      # seconds for one subscriber's connection to come up
CONCURRENT_CONNECTS = 5   # set up at once, so each one's 30 s is spent on itself, not on 49 others' handshakes


class NullDecoder:
    """Stands in for aiortc's decoders: counts frames, makes none."""
    made = 0
    frames = 0

    def __init__(self):
        NullDecoder.made += 1

    def decode(self, encoded_frame):
        NullDecoder.frames += 1
        return []


def _no_decoder(codec):
    return NullDecoder()


def _decoder_forbidden(codec):
    raise AssertionError("aiortc looked up a real decoder: decoding is not switched off")


# The decoder thread's lookup (the only one on the receive path), and aiortc.codecs'
# own, so that any other path to a real decoder fails loudly instead of decoding.
rtcrtpreceiver.get_decoder = _no_decoder
import aiortc.codecs  # noqa: E402
aiortc.codecs.get_decoder = _decoder_forbidden


class Counts:
    __slots__ = ("packets", "bytes", "video", "audio", "byes")

    def __init__(self):
        self.packets = self.bytes = self.video = self.audio = self.byes = 0


BY_TRANSPORT = {}   # RTCDtlsTransport -> Counts
BY_RECEIVER = {}    # RTCRtpReceiver -> (Counts, kind)

_handle_rtp_data = RTCDtlsTransport._handle_rtp_data
_handle_rtp_packet = rtcrtpreceiver.RTCRtpReceiver._handle_rtp_packet
_handle_rtcp_packet = rtcrtpreceiver.RTCRtpReceiver._handle_rtcp_packet


async def _counted_rtp_data(self, data, arrival_time_ms):
    counts = BY_TRANSPORT.get(self)
    if counts is not None:
        counts.packets += 1
        counts.bytes += len(data)
    await _handle_rtp_data(self, data, arrival_time_ms)


async def _counted_rtp_packet(self, packet, arrival_time_ms):
    entry = BY_RECEIVER.get(self)
    if entry is not None:
        counts, kind = entry
        setattr(counts, kind, getattr(counts, kind) + 1)
    await _handle_rtp_packet(self, packet, arrival_time_ms)


async def _counted_rtcp_packet(self, packet):
    # An RTCP BYE ends aiortc's track (its decoder thread stops); the packets still count.
    entry = BY_RECEIVER.get(self)
    if entry is not None and isinstance(packet, RtcpByePacket):
        entry[0].byes += 1
    await _handle_rtcp_packet(self, packet)


RTCDtlsTransport._handle_rtp_data = _counted_rtp_data
rtcrtpreceiver.RTCRtpReceiver._handle_rtcp_packet = _counted_rtcp_packet
rtcrtpreceiver.RTCRtpReceiver._handle_rtp_packet = _counted_rtp_packet


def emit(**event):
    print(json.dumps(event), flush=True)


class Subscriber:
    def __init__(self, index):
        self.index = index
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.counts = Counts()
        self.connected = asyncio.Event()
        self.failed = None
        self.janus = None

        @self.pc.on("connectionstatechange")
        async def _state():
            if self.pc.connectionState == "connected":
                self.connected.set()
            elif self.pc.connectionState == "failed":
                self.failed = "connection failed"
                self.connected.set()

    def register(self):
        """Counts this subscriber's packets (transports and receivers exist once the
        remote description is applied, before any media can arrive)."""
        for t in self.pc.getTransceivers():
            BY_TRANSPORT[t.receiver.transport] = self.counts
            BY_RECEIVER[t.receiver] = (self.counts, t.kind)

    async def wait_connected(self):
        try:
            await asyncio.wait_for(self.connected.wait(), CONNECT_TIMEOUT)
        except asyncio.TimeoutError:
            raise RuntimeError(f"subscriber {self.index}: not connected after {CONNECT_TIMEOUT} s "
                               f"(state {self.pc.connectionState})")
        if self.failed:
            raise RuntimeError(f"subscriber {self.index}: {self.failed}")

    async def close(self):
        await self.pc.close()
        if self.janus is not None:
            await self.janus.close()


async def subscribe_whep(sub, http, args):
    pc = sub.pc
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(args.url, data=pc.localDescription.sdp,
                         headers={"Content-Type": "application/sdp", "Authorization": f"Bearer {args.token}"}) as r:
        body = await r.text()
        if r.status != 201:
            raise RuntimeError(f"subscriber {sub.index}: WHEP POST answered {r.status}: {body.strip()[:300]}")
    await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
    sub.register()


async def subscribe_janus(sub, http, args):
    from janus_subscriber import find_publisher
    from janus_whip_bridge import JanusSession
    js = sub.janus = JanusSession(http, args.janus)
    await js.open()
    feed = await find_publisher(js, args.room, args.wait)
    result, offer = await js.message({"request": "join", "ptype": "subscriber", "room": args.room,
                                      "streams": [{"feed": feed}]})
    if offer is None:
        raise RuntimeError(f"subscriber {sub.index}: Janus sent no offer: {result}")
    await sub.pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type=offer["type"]))
    sub.register()
    await sub.pc.setLocalDescription(await sub.pc.createAnswer())
    await js.message({"request": "start", "room": args.room},
                     jsep={"type": "answer", "sdp": sub.pc.localDescription.sdp})
    await js.trickle_done()


def snapshot(subs):
    queues = [t.receiver.track._queue for s in subs for t in s.pc.getTransceivers() if t.receiver.track is not None]
    return {"event": "mark", "time": time.time(), "monotonic": time.monotonic(),
            "decoderFrames": NullDecoder.frames, "decodersMade": NullDecoder.made,
            # Decoded frames waiting on a track; the None that marks a track's end is no frame.
            "decodedQueued": sum(1 for q in queues for item in q._queue if item is not None),
            "tracksEnded": sum(1 for q in queues for item in q._queue if item is None),
            "subscribers": [{"packets": s.counts.packets, "bytes": s.counts.bytes, "video": s.counts.video,
                             "audio": s.counts.audio, "byes": s.counts.byes, "state": s.pc.connectionState}
                            for s in subs]}


async def next_command():
    """The next non-empty line on stdin; end of input (the driver went away) means stop."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return "stop"
        if line.strip():
            return line.strip()


async def run(args):
    subscribe = subscribe_whep if args.mode == "whep" else subscribe_janus
    subs = [Subscriber(i) for i in range(args.count)]
    # Long polls (one per Janus session) and requests: no connection cap.
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=40)) as http:
        started = time.monotonic()
        gate = asyncio.Semaphore(CONCURRENT_CONNECTS)

        async def one(sub):
            async with gate:
                await subscribe(sub, http, args)
                await sub.wait_connected()
            log.info("subscriber %d connected", sub.index)
        try:
            results = await asyncio.gather(*(one(s) for s in subs), return_exceptions=True)
            errors = [repr(r) for r in results if isinstance(r, BaseException)]
            if errors:
                raise RuntimeError(f"{len(errors)} of {len(subs)} subscribers failed: {errors[:5]}")
            emit(event="connected", count=len(subs), seconds=round(time.monotonic() - started, 2))
            while True:
                command = await next_command()
                if command == "mark":
                    emit(**snapshot(subs))
                    dead = [s.index for s in subs if s.pc.connectionState != "connected"]
                    if dead:
                        raise RuntimeError(f"subscribers {dead} are no longer connected")
                elif command == "stop":
                    break
                else:
                    log.warning("unknown command %r", command)
            code = 0
        except Exception as e:
            log.error("%s", e)
            emit(event="failed", error=str(e))
            code = EXIT_FAILED
        finally:
            await asyncio.gather(*(s.close() for s in subs), return_exceptions=True)
    emit(event="done", code=code)
    return code


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("-v", "--verbose", action="store_true")
    modes = p.add_subparsers(dest="mode", required=True)
    whep = modes.add_parser("whep")
    whep.add_argument("--url", required=True)
    whep.add_argument("--token", required=True)
    janus = modes.add_parser("janus")
    janus.add_argument("--janus", required=True)
    janus.add_argument("--room", type=int, default=1234)
    janus.add_argument("--wait", type=float, default=30, help="how long to wait for a publisher in the room")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    # Fifty connections' ICE checks would drown the log; their failures still show as warnings.
    for noisy in ("aioice", "aiortc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
