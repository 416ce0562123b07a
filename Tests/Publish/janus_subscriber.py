#!/usr/bin/env python3
"""An aiortc subscriber to a Janus VideoRoom: decodes what Janus forwards.

    janus_subscriber.py --janus http://10.77.0.1:8088/janus --room 1234
                        --duration S --summary FILE [--wait S] [--break-analysis video|audio]

Waits (up to --wait seconds) for a publisher in the room, joins as a subscriber
to its streams through Janus's HTTP API, answers Janus's JSEP offer with
aiortc, sends `start`, and decodes every frame for --duration seconds with the
same analysis as whip_receiver.py (frame counter from the luma plane, audio
frequency and level). Writes the summary JSON to FILE; exits 0 once written,
1 if it could not subscribe or could not analyse a received frame (the reason
is in the summary's "error"; an analysis failure also in "analysisError").
"""
import argparse
import asyncio
import json
import logging
import sys
import time

import aiohttp
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

import whip_receiver
from janus_whip_bridge import JanusSession
from whip_receiver import Session, TrackRecord  # noqa: F401  (Session's track analysis)

log = logging.getLogger("janus-subscriber")


class Recorder:
    """The receiving half of whip_receiver.Session, on a peer connection made here."""

    def __init__(self, pc):
        self.pc = pc
        self.states = []
        self.tracks = []
        self.tasks = []
        self.id = "janus-subscriber"
        self.error = None

        @pc.on("connectionstatechange")
        async def _on_state():
            self.states.append(pc.connectionState)

        @pc.on("track")
        def _on_track(track):
            transceiver = next((t for t in pc.getTransceivers() if t.receiver.track is track), None)
            record = TrackRecord(track.kind, transceiver.mid if transceiver else None)
            self.tracks.append(record)
            if transceiver is not None:
                Session._tap_receiver(self, transceiver.receiver, record)
            self.tasks.append(asyncio.ensure_future(Session._consume(self, track, record)))


async def find_publisher(js, room, wait):
    deadline = time.time() + wait
    while True:
        data, _ = await js.message({"request": "listparticipants", "room": room})
        publishers = [p for p in data.get("participants", []) if p.get("publisher")]
        if publishers:
            return publishers[0]["id"]
        if time.time() > deadline:
            raise TimeoutError(f"no publisher in room {room} after {wait} s")
        await asyncio.sleep(0.3)


async def run(args):
    summary = {"room": args.room, "publisher": None, "error": None, "states": [], "video": [], "audio": []}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        js = JanusSession(http, args.janus)
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        rec = Recorder(pc)
        try:
            await js.open()
            feed = await find_publisher(js, args.room, args.wait)
            summary["publisher"] = feed
            result, offer = await js.message({"request": "join", "ptype": "subscriber", "room": args.room,
                                              "streams": [{"feed": feed}]})
            if offer is None:
                raise RuntimeError(f"Janus sent no offer: {result}")
            summary["offer"] = offer["sdp"]
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type=offer["type"]))
            await pc.setLocalDescription(await pc.createAnswer())
            summary["answer"] = pc.localDescription.sdp
            await js.message({"request": "start", "room": args.room},
                             jsep={"type": "answer", "sdp": pc.localDescription.sdp})
            await js.trickle_done()
            await asyncio.sleep(args.duration)
        except Exception as e:
            log.warning("subscribe: %r", e)
            summary["error"] = repr(e)
        finally:
            summary["states"] = rec.states
            summary["video"] = [t.summary() for t in rec.tracks if t.kind == "video"]
            summary["audio"] = [t.summary() for t in rec.tracks if t.kind == "audio"]
            summary["janusEvents"] = js.seen[-20:]
            await pc.close()
            for task in rec.tasks:
                task.cancel()
            await js.close()
    # A track consumer that failed (Session._consume records it on the Recorder) means
    # frames went unchecked: that is an error of the run, like a failed subscription.
    summary["analysisError"] = rec.error
    if rec.error and summary["error"] is None:
        summary["error"] = f"analysis: {rec.error}"
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--janus", required=True)
    p.add_argument("--room", type=int, default=1234)
    p.add_argument("--duration", type=float, default=5)
    p.add_argument("--wait", type=float, default=30, help="how long to wait for a publisher")
    p.add_argument("--summary", required=True, metavar="FILE")
    whip_receiver.add_break_analysis_option(p)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    whip_receiver.BREAK_ANALYSIS = args.break_analysis
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    summary = asyncio.run(run(args))
    with open(args.summary, "w") as f:
        json.dump(summary, f, indent=1)
    return 1 if summary["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
