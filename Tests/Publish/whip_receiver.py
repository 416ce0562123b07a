#!/usr/bin/env python3
"""A WHIP receiver (RFC 9725) on aiortc + aiohttp that decodes everything it gets.

It is the test peer for `camagent publish`: nobody on this team wrote the
WebRTC stack behind it. Every POSTed offer becomes an aiortc
RTCPeerConnection; every video frame is decoded and the test pattern's frame
counter is read from its luma plane (Tests/Device/pattern.py); audio is
decoded and its dominant frequency and level are measured with numpy.

    whip_receiver.py [--host 0.0.0.0] [--port 0] [--token T] [--summary FILE]
                     [--status N] [--bad-fingerprint] [--vanish-after S] [--vanish-on-answer]
                     [--break-analysis video|audio] [-v]

The first line on stdout is the bound TCP port. Endpoints:
    POST <any path>          offer (application/sdp) -> 201, Location /resource/<id>, answer
    DELETE /resource/<id>    -> 200 and the peer connection is closed; unknown id -> 404
    PATCH /resource/<id>     -> 405 (no trickle ICE: the answer carries every candidate)
    GET /summary             -> JSON: everything recorded, per session
    POST /_reset             -> the same JSON; then every session is closed and
                                everything recorded is forgotten (one receiver
                                serves test after test: in the test VM, starting
                                it takes about 20 s)
SIGTERM or SIGINT writes --summary FILE (same JSON) and exits 0.

Fault knobs:
    --status N         every POST is answered with status N (no session is made)
    --bad-fingerprint  the answer's a=fingerprint is altered: a correct publisher
                       must refuse the DTLS peer (the real certificate no longer matches)
    --vanish-after S   S seconds after the first session reaches "connected", its
                       sockets are closed without a word (no DTLS alert, no RTCP BYE,
                       no more ICE answers), as if the server had crashed; HTTP keeps
                       being served so that a reconnect makes a second session
    --vanish-on-answer each session's sockets are closed as soon as its answer is made
                       (the 201 still goes out, with the answer): no ICE check is ever
                       answered, so the publisher's first connection never comes up
    --break-analysis K the K track's analysis fails on its tenth frame, as a real
                       analysis error would: the session's "error" says so, and
                       the tests must fail on it (the self-check proves they do;
                       whep_viewer.py and janus_subscriber.py take the same knob)
"""
import argparse
import asyncio
import json
import logging
import os
import re
import signal
import sys
import time
import uuid

import numpy as np
from aiohttp import web
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Device"))
from pattern import decode_counter  # noqa: E402

log = logging.getLogger("whip-receiver")

# Audio kept for the frequency and level measurement (the most recent seconds).
AUDIO_KEEP_SECONDS = 10
# Audio frames skipped at the start of a track (decoder warm-up, encoder ramp).
AUDIO_SKIP_FRAMES = 10

# --break-analysis: the track kind ("video" or "audio") whose analysis fails on purpose.
BREAK_ANALYSIS = None


class BrokenOnPurpose(RuntimeError):
    """Raised by --break-analysis in place of a real analysis error."""


def add_break_analysis_option(parser):
    parser.add_argument("--break-analysis", choices=["video", "audio"], metavar="KIND",
                        help="make the KIND track's analysis fail (proves an analysis error fails the test)")


def counter_analysis(counters):
    """Summary of a list of counters (None where unreadable), in arrival order."""
    read = [c for c in counters if c is not None]
    out = {
        "countersRead": len(read),
        "countersUnread": len(counters) - len(read),
        "firstCounter": read[0] if read else None,
        "lastCounter": read[-1] if read else None,
        "maxGap": 0,          # largest step between consecutive read counters
        "missing": 0,         # counters skipped over in total (sum of step - 1)
        "repeats": 0,         # steps of 0
        "backwards": 0,       # steps below 0
    }
    for a, b in zip(read, read[1:]):
        step = b - a
        if step > 0:
            out["maxGap"] = max(out["maxGap"], step)
            out["missing"] += step - 1
        elif step == 0:
            out["repeats"] += 1
        else:
            out["backwards"] += 1
    return out


def audio_analysis(samples, rate):
    """Dominant frequency (Hz) and RMS level (full scale = 1.0) of mono float samples."""
    if rate is None or len(samples) < 1024:
        return {"dominantFrequency": None, "rms": None, "rmsDbfs": None, "analysedSamples": len(samples)}
    x = samples - samples.mean()
    rms = float(np.sqrt(np.mean(x * x)))
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    spectrum[0] = 0
    peak = int(np.argmax(spectrum))
    # Parabolic interpolation around the peak bin for a finer estimate.
    if 0 < peak < len(spectrum) - 1:
        a, b, c = spectrum[peak - 1], spectrum[peak], spectrum[peak + 1]
        denom = a - 2 * b + c
        offset = 0.5 * (a - c) / denom if denom else 0.0
    else:
        offset = 0.0
    freq = (peak + offset) * rate / len(x)
    return {
        "dominantFrequency": round(float(freq), 2),
        "rms": round(rms, 5),
        "rmsDbfs": round(20 * np.log10(rms), 2) if rms > 0 else None,
        "analysedSamples": len(x),
    }


class TrackRecord:
    def __init__(self, kind, mid):
        self.kind = kind
        self.mid = mid
        self.frames = 0
        self.sizes = {}
        self.counters = []
        self.formats = set()
        self.sample_rate = None
        self.channels = None
        self.audio_chunks = []
        self.audio_kept = 0
        self.first_frame_at = None
        self.last_frame_at = None
        self.ended = False
        # RTP as it arrived (counted before decoding).
        self.packets = 0
        self.bytes = 0
        self.payload_types = {}
        self.codecs = {}
        self.rtcp = {}
        # For the glass-to-decoded latency: each decoded video frame's RTP time
        # and wall-clock arrival, and the sender reports that map RTP time to
        # the sender's wall clock (same host: the same clock).
        self.arrivals = []
        # Mean RGB of the picture's centre (a ninth of it), as a player would
        # show it: frames are turned into RGB by FFmpeg's swscale, which reads
        # them as limited-range BT.601, what VP8 and H.264 streams carry.
        self.centre_rgb = None
        self.sender_report = None   # (NTP seconds as Unix time, RTP timestamp) of the latest SR
        self.receiver = None

    def add_video(self, frame):
        w, h = frame.width, frame.height
        key = f"{w}x{h}"
        self.sizes[key] = self.sizes.get(key, 0) + 1
        self.formats.add(frame.format.name)
        plane = frame.planes[0]
        y = np.frombuffer(plane, dtype=np.uint8).reshape(h, plane.line_size)[:, :w]
        self.counters.append(decode_counter(y))
        if len(self.counters) % 10 == 1:   # every tenth frame: the conversion is not free
            rgb = frame.to_ndarray(format="rgb24")
            centre = rgb[h // 3: 2 * h // 3, w // 3: 2 * w // 3].reshape(-1, 3)
            self.centre_rgb = [round(float(v), 1) for v in centre.mean(axis=0)]
        if frame.pts is not None:
            self.arrivals.append((time.time(), int(frame.pts)))

    def latency(self):
        """Capture (the sender's RTP time on its wall clock, via its latest sender
        report) to decoded here, in ms: p50, p99 and how many frames; None without an SR."""
        if self.sender_report is None or not self.arrivals:
            return None
        sr_unix, sr_rtp = self.sender_report
        # aiortc hands out frame times counted from its first frame's RTP time.
        mapper = getattr(self.receiver, "_RTCRtpReceiver__timestamp_mapper", None)
        origin = getattr(mapper, "_origin", None)
        if origin is None:
            return None
        values = []
        for arrived, pts in self.arrivals:
            rtp = (origin + pts) & 0xFFFFFFFF
            delta = ((rtp - sr_rtp + 2**31) % 2**32) - 2**31   # signed 32-bit RTP difference
            captured = sr_unix + delta / 90000.0
            values.append((arrived - captured) * 1000)
        values.sort()
        pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 2)  # noqa: E731
        return {"p50": pick(0.50), "p99": pick(0.99), "frames": len(values)}

    def add_audio(self, frame):
        self.sample_rate = frame.sample_rate
        self.channels = len(frame.layout.channels)
        self.formats.add(frame.format.name)
        if self.frames < AUDIO_SKIP_FRAMES:
            return
        data = frame.to_ndarray()
        if frame.format.is_planar:
            mono = data[0]
        else:
            mono = data.reshape(-1)[:: self.channels]
        if frame.format.name.startswith("s16"):
            mono = mono.astype(np.float64) / 32768.0
        elif frame.format.name.startswith("s32"):
            mono = mono.astype(np.float64) / 2147483648.0
        else:
            mono = mono.astype(np.float64)
        self.audio_chunks.append(mono)
        self.audio_kept += len(mono)
        limit = AUDIO_KEEP_SECONDS * frame.sample_rate
        while self.audio_kept - len(self.audio_chunks[0]) > limit:
            self.audio_kept -= len(self.audio_chunks.pop(0))

    def summary(self):
        duration = None
        if self.first_frame_at is not None and self.last_frame_at is not None:
            duration = round(self.last_frame_at - self.first_frame_at, 3)
        out = {
            "kind": self.kind,
            "mid": self.mid,
            "frames": self.frames,
            "ended": self.ended,
            "firstToLastFrameSeconds": duration,
            "formats": sorted(self.formats),
            "rtpPackets": self.packets,
            "rtpBytes": self.bytes,
            "payloadTypes": {str(k): v for k, v in self.payload_types.items()},
            "codecs": dict(self.codecs),
            "codec": max(self.codecs, key=self.codecs.get) if self.codecs else None,
            "rtcpReceived": dict(self.rtcp),
        }
        if self.kind == "video":
            out["latencyMs"] = self.latency()
            out["sizes"] = dict(self.sizes)
            out["centreRGB"] = self.centre_rgb
            out["counters"] = list(self.counters)
            out.update(counter_analysis(self.counters))
        else:
            out["sampleRate"] = self.sample_rate
            out["channels"] = self.channels
            samples = np.concatenate(self.audio_chunks) if self.audio_chunks else np.zeros(0)
            out.update(audio_analysis(samples, self.sample_rate))
        return out


def sdp_codecs(sdp):
    """{mid or kind: [codec names in m-line order]} of an SDP."""
    result = {}
    for section in re.split(r"\r?\n(?=m=)", sdp)[1:]:
        lines = section.splitlines()
        kind, _port, _proto, *pts = lines[0][2:].split()
        mid = next((l[6:] for l in lines if l.startswith("a=mid:")), kind)
        names = {}
        for l in lines:
            m = re.match(r"a=rtpmap:(\d+) ([^/]+)", l)
            if m:
                names[m.group(1)] = m.group(2)
        result[mid] = [names.get(pt, pt) for pt in pts]
    return result


def alter_fingerprint(sdp):
    """The SDP with every a=fingerprint's first byte changed."""
    def flip(m):
        value = m.group(2)
        first = int(value[:2], 16) ^ 0xFF
        return f"{m.group(1)}{first:02X}{value[2:]}"
    return re.sub(r"(a=fingerprint:\S+ )([0-9A-Fa-f:]+)", flip, sdp)


class Session:
    def __init__(self, server, path, remote):
        self.server = server
        self.id = uuid.uuid4().hex[:12]
        self.path = path
        self.remote = remote
        self.created = time.time()
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.states = []
        self.ice_states = []
        self.tracks = []
        self.tasks = []
        self.deleted = False
        self.vanished = False
        self.closed = False
        self.offer = None
        self.answer = None
        self.error = None
        self.connected_at = None

        @self.pc.on("connectionstatechange")
        async def _on_state():
            state = self.pc.connectionState
            self.states.append(state)
            log.info("session %s: %s", self.id, state)
            if state == "connected" and self.connected_at is None:
                self.connected_at = time.time()
                self.server.on_connected(self)

        @self.pc.on("iceconnectionstatechange")
        async def _on_ice():
            self.ice_states.append(self.pc.iceConnectionState)

        @self.pc.on("track")
        def _on_track(track):
            transceiver = next((t for t in self.pc.getTransceivers() if t.receiver.track is track), None)
            record = TrackRecord(track.kind, transceiver.mid if transceiver else None)
            self.tracks.append(record)
            if transceiver is not None:
                self._tap_receiver(transceiver.receiver, record)
            self.tasks.append(asyncio.ensure_future(self._consume(track, record)))

    def _tap_receiver(self, receiver, record):
        """Counts RTP packets, payload types and codecs, and RTCP types, as they arrive."""
        record.receiver = receiver
        rtp_handler = receiver._handle_rtp_packet
        rtcp_handler = receiver._handle_rtcp_packet

        async def on_rtp(packet, arrival_time_ms):
            record.packets += 1
            record.bytes += len(packet.payload)
            pt = packet.payload_type
            record.payload_types[pt] = record.payload_types.get(pt, 0) + 1
            codecs = getattr(receiver, "_RTCRtpReceiver__codecs", {})
            codec = codecs.get(pt)
            if codec is not None and codec.name != "rtx":
                record.codecs[codec.name] = record.codecs.get(codec.name, 0) + 1
            return await rtp_handler(packet, arrival_time_ms)

        async def on_rtcp(packet):
            name = type(packet).__name__
            record.rtcp[name] = record.rtcp.get(name, 0) + 1
            info = getattr(packet, "sender_info", None)
            if info is not None:
                ntp = info.ntp_timestamp
                record.sender_report = ((ntp >> 32) - 2208988800 + (ntp & 0xFFFFFFFF) / 2**32, info.rtp_timestamp)
            return await rtcp_handler(packet)

        receiver._handle_rtp_packet = on_rtp
        receiver._handle_rtcp_packet = on_rtcp

    async def _consume(self, track, record):
        try:
            while True:
                frame = await track.recv()
                now = time.time()
                if record.first_frame_at is None:
                    record.first_frame_at = now
                record.last_frame_at = now
                if record.kind == BREAK_ANALYSIS and record.frames == 9:
                    raise BrokenOnPurpose(f"{record.kind} analysis broken on purpose (--break-analysis)")
                if record.kind == "video":
                    record.add_video(frame)
                else:
                    record.add_audio(frame)
                record.frames += 1
        except MediaStreamError:
            pass
        except asyncio.CancelledError:
            pass
        except Exception as e:  # a frame we cannot analyse is a finding, not a crash
            log.exception("session %s: track %s", self.id, record.kind)
            self.error = f"{record.kind}: {e!r}"
        finally:
            record.ended = True

    async def vanish(self):
        """Drops the session without a word: sockets closed first, then the objects."""
        if self.closed:
            return
        self.vanished = True
        log.info("session %s: vanishing", self.id)
        for transceiver in self.pc.getTransceivers():
            ice = transceiver.receiver.transport.transport
            connection = getattr(ice, "_connection", None)
            for protocol in list(getattr(connection, "_protocols", [])):
                transport = getattr(protocol, "transport", None)
                if transport is not None:
                    transport.close()
        await self.close()

    async def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            await asyncio.wait_for(self.pc.close(), 10)
        except Exception as e:
            log.warning("session %s: close: %r", self.id, e)
        for task in self.tasks:
            task.cancel()

    def summary(self):
        return {
            "id": self.id,
            "path": self.path,
            "remote": self.remote,
            "created": self.created,
            "connectedAt": self.connected_at,
            "states": list(self.states),
            "iceStates": list(self.ice_states),
            "deleted": self.deleted,
            "vanished": self.vanished,
            "closed": self.closed,
            "error": self.error,
            "offerCodecs": sdp_codecs(self.offer) if self.offer else None,
            "answerCodecs": sdp_codecs(self.answer) if self.answer else None,
            "offer": self.offer,
            "answer": self.answer,
            "video": [t.summary() for t in self.tracks if t.kind == "video"],
            "audio": [t.summary() for t in self.tracks if t.kind == "audio"],
        }


class Receiver:
    def __init__(self, token=None, status=None, bad_fingerprint=False, vanish_after=None, vanish_on_answer=False):
        self.token = token
        self.status = status
        self.bad_fingerprint = bad_fingerprint
        self.vanish_after = vanish_after
        self.vanish_on_answer = vanish_on_answer
        self.sessions = {}
        self.order = []
        self.requests = []
        self.port = None
        self.vanish_task = None

    # -- HTTP --------------------------------------------------------------

    def app(self):
        app = web.Application()
        app.router.add_get("/summary", self.handle_summary)
        app.router.add_post("/_reset", self.handle_reset)   # before the catch-all offer route
        app.router.add_delete("/resource/{id}", self.handle_delete)
        app.router.add_route("PATCH", "/resource/{id}", self.handle_patch)
        app.router.add_route("OPTIONS", "/{tail:.*}", self.handle_options)
        app.router.add_post("/{tail:.*}", self.handle_post)
        return app

    def note(self, request, status, **extra):
        entry = {"method": request.method, "path": request.path, "status": status, "time": time.time()}
        entry.update(extra)
        self.requests.append(entry)

    async def handle_options(self, request):
        self.note(request, 204)
        return web.Response(status=204, headers={"Allow": "OPTIONS, POST, DELETE, PATCH"})

    async def handle_post(self, request):
        if self.status is not None:
            self.note(request, self.status)
            return web.Response(status=self.status, text=f"forced status {self.status}\n")
        if self.token is not None:
            auth = request.headers.get("Authorization", "")
            if auth != f"Bearer {self.token}":
                self.note(request, 401, authorization=auth)
                return web.Response(status=401, headers={"WWW-Authenticate": "Bearer"}, text="unauthorized\n")
        ctype = request.headers.get("Content-Type", "")
        if ctype.split(";")[0].strip().lower() != "application/sdp":
            self.note(request, 415, contentType=ctype)
            return web.Response(status=415, text="the offer must be application/sdp\n")
        offer = await request.text()
        peer = request.transport.get_extra_info("peername") if request.transport else None
        session = Session(self, request.path, list(peer) if peer else None)
        session.offer = offer
        try:
            await session.pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
            answer = await session.pc.createAnswer()
            # setLocalDescription gathers every candidate before it returns.
            await session.pc.setLocalDescription(answer)
        except Exception as e:
            log.warning("unusable offer: %r", e)
            session.error = f"offer: {e!r}"
            await session.close()
            self.note(request, 400, error=str(e))
            return web.Response(status=400, text=f"unusable offer: {e}\n")
        sdp = session.pc.localDescription.sdp
        if self.bad_fingerprint:
            sdp = alter_fingerprint(sdp)
        session.answer = sdp
        self.sessions[session.id] = session
        self.order.append(session.id)
        self.note(request, 201, session=session.id)
        log.info("session %s: created for %s", session.id, request.path)
        if self.vanish_on_answer:
            await session.vanish()
        return web.Response(
            status=201,
            body=sdp.encode(),
            headers={"Content-Type": "application/sdp", "Location": f"/resource/{session.id}",
                     "ETag": f'"{session.id}"'},
        )

    async def handle_delete(self, request):
        session = self.sessions.get(request.match_info["id"])
        if session is None or session.deleted:
            self.note(request, 404)
            return web.Response(status=404, text="no such resource\n")
        session.deleted = True
        self.note(request, 200, session=session.id)
        await session.close()
        return web.Response(status=200)

    async def handle_patch(self, request):
        self.note(request, 405)
        return web.Response(status=405, headers={"Allow": "DELETE"}, text="no trickle ICE\n")

    async def handle_summary(self, request):
        return web.json_response(self.summary())

    async def handle_reset(self, request):
        summary = self.summary()
        await asyncio.wait_for(self.close(), 10)
        self.sessions.clear()
        self.order.clear()
        self.requests.clear()
        return web.json_response(summary)

    # -- faults --------------------------------------------------------------

    def on_connected(self, session):
        if self.vanish_after is not None and self.vanish_task is None:
            async def later():
                await asyncio.sleep(self.vanish_after)
                await session.vanish()
            self.vanish_task = asyncio.ensure_future(later())

    # -- results -------------------------------------------------------------

    def summary(self):
        return {
            "port": self.port,
            "token": self.token is not None,
            "status": self.status,
            "badFingerprint": self.bad_fingerprint,
            "vanishAfter": self.vanish_after,
            "vanishOnAnswer": self.vanish_on_answer,
            "posts": sum(1 for r in self.requests if r["method"] == "POST"),
            "unauthorized": sum(1 for r in self.requests if r["status"] == 401),
            "deletes": sum(1 for r in self.requests if r["method"] == "DELETE" and r["status"] == 200),
            "requests": list(self.requests),
            "sessions": [self.sessions[i].summary() for i in self.order],
        }

    async def close(self):
        for session in self.sessions.values():
            if not session.vanished:
                await session.close()


async def serve(args):
    receiver = Receiver(token=args.token, status=args.status, bad_fingerprint=args.bad_fingerprint,
                        vanish_after=args.vanish_after, vanish_on_answer=args.vanish_on_answer)
    runner = web.AppRunner(receiver.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    receiver.port = site._server.sockets[0].getsockname()[1]
    print(receiver.port, flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    # Everything recorded so far is written before anything is torn down.
    if args.summary:
        tmp = args.summary + ".tmp"
        with open(tmp, "w") as f:
            json.dump(receiver.summary(), f, indent=1)
        os.replace(tmp, args.summary)
    try:
        await asyncio.wait_for(receiver.close(), 10)
    except asyncio.TimeoutError:
        pass
    await runner.cleanup()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=0, help="TCP port (0: any free one, printed first)")
    p.add_argument("--token", help="require Authorization: Bearer TOKEN (401 otherwise)")
    p.add_argument("--status", type=int, help="answer every POST with this HTTP status")
    p.add_argument("--bad-fingerprint", action="store_true", help="alter the fingerprint in the answer")
    p.add_argument("--vanish-after", type=float, metavar="S",
                   help="S seconds after the first connection, drop it silently")
    p.add_argument("--vanish-on-answer", action="store_true",
                   help="drop each session silently as soon as its answer is made (no ICE ever answered)")
    p.add_argument("--summary", metavar="FILE", help="write the summary JSON here on exit")
    add_break_analysis_option(p)
    p.add_argument("-v", "--verbose", action="count", default=0)
    args = p.parse_args(argv)
    global BREAK_ANALYSIS
    BREAK_ANALYSIS = args.break_analysis
    logging.basicConfig(level=logging.WARNING if args.verbose == 0 else
                        logging.INFO if args.verbose == 1 else logging.DEBUG,
                        format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    if args.verbose:
        log.setLevel(logging.INFO)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
