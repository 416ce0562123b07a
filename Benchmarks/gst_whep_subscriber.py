#!/usr/bin/python3
"""GStreamer's webrtcbin receiving a stream over WHEP and decoding it to fakesink:
the GStreamer side of the subscriber benchmark (Benchmarks/subscriber.py).

Debian 12's GStreamer (1.22) has webrtcbin but no whepsrc, so this script does
the WHEP part itself: a recvonly video transceiver that takes VP8 or H.264,
ICE gathering to the end, POST the offer, apply the answer. The stream that
webrtcbin hands out is depayloaded and decoded with the same libraries
camagent decodes with, on one thread as camagent does:

    VP8     rtpvp8depay ! vp8dec threads=1 ! fakesink sync=false
    H.264   rtph264depay ! h264parse ! openh264dec ! fakesink sync=false

Frames are counted by fakesink itself (its "stats" property, "rendered"):
nothing per frame runs in Python, so the process's CPU is GStreamer's.

    gst_whep_subscriber.py --whep URL [--token T] [--duration S] [--connect-timeout S]

Stdout gets JSON lines: {"event":"connected","codec":...} once a decoder is
linked, {"event":"stats","framesDecoded":N} once a second, and
{"event":"summary",...} at the end (after --duration, or SIGTERM/SIGINT; the
WHEP resource is DELETEd). Run with Debian's python3 (python3-gi,
python3-gst-1.0). Exit 0 when it watched; 2 the server did not answer 201; 3 no
connection within --connect-timeout, or it failed; 4 anything else (a pipeline
error included).
"""
import argparse
import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

EXIT_HTTP = 2
EXIT_NOT_CONNECTED = 3
EXIT_OTHER = 4

# What the transceiver takes; the server's answer picks one.
RECEIVE_CAPS = ("application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000;"
                "application/x-rtp,media=video,encoding-name=H264,payload=102,clock-rate=90000,"
                "packetization-mode=(string)1,profile-level-id=(string)42e01f,level-asymmetry-allowed=(string)1")
DECODERS = {
    "VP8": "rtpvp8depay ! vp8dec threads=1 ! fakesink name=sink sync=false enable-last-sample=false",
    # openh264dec takes only caps that name the profile, which h264parse reads from the SPS.
    "H264": "rtph264depay ! h264parse ! openh264dec ! fakesink name=sink sync=false enable-last-sample=false",
}


def emit(**event):
    print(json.dumps(event), flush=True)


class Subscriber:
    def __init__(self, args):
        self.args = args
        self.pipe = Gst.Pipeline.new("subscriber")
        self.webrtc = Gst.ElementFactory.make("webrtcbin", "recv")
        self.webrtc.set_property("bundle-policy", GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)
        self.pipe.add(self.webrtc)
        self.sink = None
        self.codec = None
        self.offer_sdp = None
        self.offer_ready = threading.Event()
        self.linked = threading.Event()
        self.failed = None
        self.location = None
        self.webrtc.connect("on-negotiation-needed", self.on_negotiation_needed)
        self.webrtc.connect("notify::ice-gathering-state", self.on_gathering)
        self.webrtc.connect("notify::connection-state", self.on_connection)
        self.webrtc.connect("pad-added", self.on_pad)
        self.webrtc.emit("add-transceiver", GstWebRTC.WebRTCRTPTransceiverDirection.RECVONLY,
                         Gst.Caps.from_string(RECEIVE_CAPS))
        bus = self.pipe.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self.on_error)

    def fail(self, why):
        if self.failed is None:
            self.failed = why
            print(f"gst-whep: {why}", file=sys.stderr, flush=True)
        self.linked.set()

    def on_error(self, _bus, message):
        error, debug = message.parse_error()
        self.fail(f"pipeline error from {message.src.get_name()}: {error.message} ({debug})")

    def on_negotiation_needed(self, element):
        promise = Gst.Promise.new_with_change_func(self.on_offer_created, element, None)
        element.emit("create-offer", None, promise)

    def on_offer_created(self, promise, element, _):
        promise.wait()
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None and reply.has_field("offer") else None
        if offer is None:
            self.fail(f"create-offer: {reply.to_string() if reply else 'no reply'}")
            self.offer_ready.set()
            return
        element.emit("set-local-description", offer, Gst.Promise.new())

    def on_gathering(self, element, _pspec):
        if element.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            self.offer_sdp = element.get_property("local-description").sdp.as_text()
            self.offer_ready.set()

    def on_connection(self, element, _pspec):
        if element.get_property("connection-state") == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            self.fail("connection failed")

    def on_pad(self, _element, pad):
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        caps = pad.get_current_caps() or pad.query_caps(None)
        name = caps.get_structure(0).get_string("encoding-name") if caps and caps.get_size() else None
        if name not in DECODERS:
            self.fail(f"webrtcbin offers a stream this subscriber does not decode: {caps.to_string() if caps else None}")
            return
        branch = Gst.parse_bin_from_description(DECODERS[name], True)
        self.pipe.add(branch)
        branch.sync_state_with_parent()
        if pad.link(branch.get_static_pad("sink")) != Gst.PadLinkReturn.OK:
            self.fail(f"cannot link webrtcbin's {name} pad to the decoder")
            return
        self.sink = branch.get_by_name("sink")
        self.codec = name
        self.linked.set()

    def frames(self):
        if self.sink is None:
            return 0
        return self.sink.get_property("stats").get_value("rendered")

    def headers(self):
        return {"Authorization": f"Bearer {self.args.token}"} if self.args.token else {}

    def post_offer(self):
        request = urllib.request.Request(self.args.whep, data=self.offer_sdp.encode(), method="POST",
                                         headers={"Content-Type": "application/sdp", **self.headers()})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = response.read().decode()
                status = response.status
                self.location = urllib.parse.urljoin(self.args.whep, response.headers.get("Location", ""))
        except urllib.error.HTTPError as e:
            raise HTTPRefused(f"WHEP POST answered {e.code}: {e.read().decode(errors='replace').strip()[:300]}")
        if status != 201:
            raise HTTPRefused(f"WHEP POST answered {status}")
        _, sdp = GstSdp.SDPMessage.new_from_text(answer)
        description = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, sdp)
        self.webrtc.emit("set-remote-description", description, Gst.Promise.new())

    def delete(self):
        if not self.location:
            return
        try:
            urllib.request.urlopen(urllib.request.Request(self.location, method="DELETE", headers=self.headers()),
                                   timeout=10).read()
        except Exception as e:
            print(f"gst-whep: DELETE failed: {e}", file=sys.stderr)

    def run(self):
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        loop = GLib.MainLoop()
        threading.Thread(target=loop.run, daemon=True).start()
        self.pipe.set_state(Gst.State.PLAYING)
        code = 0
        try:
            if not self.offer_ready.wait(20) or self.offer_sdp is None:
                raise RuntimeError(self.failed or "ICE gathering did not complete within 20 s")
            self.post_offer()
            if not self.linked.wait(self.args.connect_timeout) or self.failed:
                code = EXIT_NOT_CONNECTED
                self.fail(self.failed or f"no stream within {self.args.connect_timeout} s")
            else:
                emit(event="connected", codec=self.codec)
                deadline = time.monotonic() + self.args.duration
                next_stats = time.monotonic() + 1
                while not stop.is_set() and time.monotonic() < deadline:
                    stop.wait(max(0.0, min(next_stats, deadline) - time.monotonic()))
                    if self.failed:
                        code = EXIT_OTHER
                        break
                    if time.monotonic() >= next_stats:
                        next_stats += 1
                        emit(event="stats", framesDecoded=self.frames())
            self.delete()
        except HTTPRefused as e:
            self.fail(str(e))
            code = EXIT_HTTP
        except Exception as e:
            self.fail(repr(e))
            code = EXIT_OTHER
        frames = self.frames()
        self.pipe.set_state(Gst.State.NULL)
        loop.quit()
        emit(event="summary", code=code, framesDecoded=frames, codec=self.codec, error=self.failed)
        return code


class HTTPRefused(RuntimeError):
    pass


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--whep", required=True)
    p.add_argument("--token")
    p.add_argument("--duration", type=float, default=600, help="seconds to watch once the stream is linked")
    p.add_argument("--connect-timeout", type=float, default=20)
    args = p.parse_args()
    Gst.init(None)
    sys.exit(Subscriber(args).run())


if __name__ == "__main__":
    main()
