#!/usr/bin/env python3
"""A raw client of a camagent router session that takes live captions the way an outside
program would: only the contract (DESIGN.md § Sessions), none of camagent's code.

It opens the signalling WebSocket (/v2/sessions/{sid}/connect?token=T). Unless told
--no-subscribe, when a stream shows up (in `connected`'s list or a `streamCreated`) it
subscribes to it over WHEP with aiortc (audio only, recvonly), tied to its own signalling
connection (`?connectionId=`), takes the subscriberId from the Location's last segment,
and sends {"type":"subscriberSettings","subscriberId":ID,"subscribeToCaptions":true}.
The received audio is taken off the track and dropped.

    caption_client.py --session http://HOST:PORT/v2/sessions/SID --token T [--no-subscribe]

Stdout gets JSON lines: every message the router sends, as {"at": SECONDS, "message": {...}}
(SECONDS is CLOCK_MONOTONIC at arrival, Python's time.monotonic(), the clock camagent's
`monotonic` fields use), and the client's own steps as {"event": "open" | "subscribed" |
"subscribeFailed" | "settingsSent" | "failed" | "closed", ...}. Each line read on stdin is a JSON
message sent as it is on the WebSocket; the end of stdin or SIGTERM ends the client.
Exit codes: 0 ended by stdin or SIGTERM; 2 the WHEP subscription was refused; 3 the
WebSocket failed or was closed by the router.
"""
import argparse
import asyncio
import json
import signal
import sys
import threading
import time
import urllib.parse

import aiohttp
import websockets
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

EXIT_WHEP = 2
EXIT_SOCKET = 3


def emit(**line):
    print(json.dumps(line), flush=True)


class Client:
    def __init__(self, session_url, token, subscribe):
        self.session_url = session_url.rstrip("/")
        self.token = token
        self.subscribe_wanted = subscribe
        self.connection_id = None
        self.subscribed_to = None
        self.pcs = []
        self.code = 0
        self.done = asyncio.Event()

    async def run(self):
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.done.set)
        ws_url = self.session_url.replace("http://", "ws://", 1) + "/connect?token=" + urllib.parse.quote(self.token)
        try:
            async with websockets.connect(ws_url, open_timeout=10, max_size=2 ** 20) as ws:
                emit(event="open")
                self.ws = ws
                stdin_task = asyncio.ensure_future(self.forward_stdin(loop))
                receive_task = asyncio.ensure_future(self.receive())
                await self.done.wait()
                for task in (stdin_task, receive_task):
                    task.cancel()
        except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
            emit(event="failed", error=repr(e))
            self.code = EXIT_SOCKET
        for pc in self.pcs:
            await pc.close()
        emit(event="closed", code=self.code)
        return self.code

    async def receive(self):
        try:
            async for raw in self.ws:
                at = time.monotonic()
                message = json.loads(raw)
                emit(at=at, message=message)
                kind = message.get("type")
                if kind == "connected":
                    self.connection_id = message["connectionId"]
                    for stream in message.get("streams", []):
                        await self.maybe_subscribe(stream)
                elif kind == "streamCreated":
                    await self.maybe_subscribe(message["stream"])
        except websockets.exceptions.ConnectionClosed as e:
            emit(event="failed", error=repr(e))
            self.code = EXIT_SOCKET
        self.done.set()

    async def maybe_subscribe(self, stream):
        if not self.subscribe_wanted or self.subscribed_to or stream.get("connectionId") == self.connection_id:
            return
        self.subscribed_to = stream["streamId"]
        asyncio.ensure_future(self.subscribe(stream["streamId"]))

    async def subscribe(self, stream_id):
        pc = RTCPeerConnection()
        self.pcs.append(pc)
        pc.addTransceiver("audio", direction="recvonly")

        @pc.on("track")
        def on_track(track):
            asyncio.ensure_future(self.drop(track))

        await pc.setLocalDescription(await pc.createOffer())
        url = (f"{self.session_url}/streams/{urllib.parse.quote(stream_id)}/subscribe"
               f"?connectionId={urllib.parse.quote(self.connection_id)}")
        headers = {"Content-Type": "application/sdp", "Authorization": f"Bearer {self.token}"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
            async with http.post(url, data=pc.localDescription.sdp, headers=headers) as r:
                status, body, location = r.status, await r.text(), r.headers.get("Location")
        if status != 201 or not location:
            emit(event="subscribeFailed", streamId=stream_id, status=status, body=body[:500])
            self.code = EXIT_WHEP
            self.done.set()
            return
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        subscriber_id = location.rstrip("/").rsplit("/", 1)[-1]
        emit(event="subscribed", streamId=stream_id, subscriberId=subscriber_id, location=location)
        await self.ws.send(json.dumps({"type": "subscriberSettings", "subscriberId": subscriber_id,
                                       "subscribeToCaptions": True}))
        emit(event="settingsSent", subscriberId=subscriber_id, at=time.monotonic())

    async def drop(self, track):
        try:
            while True:
                await track.recv()
        except MediaStreamError:
            pass

    async def forward_stdin(self, loop):
        lines = asyncio.Queue()

        def read():
            for line in sys.stdin:
                loop.call_soon_threadsafe(lines.put_nowait, line)
            loop.call_soon_threadsafe(lines.put_nowait, None)
        threading.Thread(target=read, daemon=True).start()
        while True:
            line = await lines.get()
            if line is None:
                self.done.set()
                return
            if line.strip():
                await self.ws.send(line.strip())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--session", required=True, help="http://HOST:PORT/v2/sessions/SID")
    p.add_argument("--token", required=True)
    p.add_argument("--no-subscribe", action="store_true", help="signalling only: subscribe to no stream")
    args = p.parse_args()
    sys.exit(asyncio.run(Client(args.session, args.token, not args.no_subscribe).run()))


if __name__ == "__main__":
    main()
