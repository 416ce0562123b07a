#!/usr/bin/python3
"""GStreamer's webrtcbin publishing to a WHIP endpoint: the publish-path comparison for camagent.

Debian 12's GStreamer (1.22) has webrtcbin but no whipsink, so this script does
the WHIP part (RFC 9725) itself: it builds the pipeline, waits for ICE
gathering to finish, POSTs the offer, applies the answer, runs for --duration
seconds, then DELETEs the resource. Everything per frame happens inside
GStreamer's own threads; Python only sets things up and waits.

    gst_whip_publisher.py --whip URL [--token T] [--codec vp8|h264] [--size 1280x720] [--fps 30]
                          [--bitrate KBPS] [--duration S] [--y4m FIFO]

The source is a Y4M stream (--y4m: the benchmark feeds camagent's own test
pattern through a FIFO, so both encode the same pictures), or videotestsrc
generating a moving picture in-process; it is encoded with the same libraries
camagent uses: libvpx (vp8enc: realtime deadline, CBR, the same speed setting)
or OpenH264 (openh264enc, constrained baseline). Run with Debian's python3
(python3-gi, python3-gst-1.0). Exit 0 when the stream ran, 1 otherwise.
"""
import argparse
import sys
import threading
import time
import urllib.parse
import urllib.request

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GLib, GObject, Gst, GstSdp, GstWebRTC  # noqa: E402

import gst_encoders  # noqa: E402  (beside this script)


def encoder(codec, bitrate_kbps, fps, threads):
    if codec == "vp8":
        return (f"{gst_encoders.vp8enc(bitrate_kbps, fps, threads)} "
                "! rtpvp8pay pt=96 mtu=1200 ! application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000")
    return (f"{gst_encoders.openh264enc(bitrate_kbps, fps)} "
            "! video/x-h264,profile=constrained-baseline "
            "! h264parse ! rtph264pay pt=97 mtu=1200 config-interval=-1 aggregate-mode=zero-latency "
            "! application/x-rtp,media=video,encoding-name=H264,payload=97,clock-rate=90000")


class Publisher:
    def __init__(self, args):
        self.args = args
        width, height = args.size.split("x")
        if args.y4m:
            # camagent's own test pattern, written live into a FIFO by `camagent capture`:
            # the same pictures as camagent encodes, so the encoders get the same work.
            source = f"filesrc location={args.y4m} ! y4mdec ! queue max-size-buffers=2 leaky=downstream"
        else:
            source = (f"videotestsrc is-live=true pattern=ball motion=sweep animation-mode=running-time "
                      f"! video/x-raw,format=I420,width={width},height={height},framerate={args.fps}/1")
        pipeline = (f"{source} "
                    f"! {encoder(args.codec, args.bitrate, args.fps, args.threads)} "
                    "! webrtcbin name=send bundle-policy=max-bundle")
        self.pipe = Gst.parse_launch(pipeline)
        self.webrtc = self.pipe.get_by_name("send")
        # Sender reports on the wall clock, as camagent's are: the pipeline runs on
        # CLOCK_REALTIME and rtpbin takes NTP time from that clock, so the receiver
        # (same host) can tell when each frame was produced.
        clock = Gst.SystemClock.obtain()
        realtime = GObject.new(type(clock), clock_type=Gst.ClockType.REALTIME)
        self.pipe.use_clock(realtime)
        rtpbin = self.webrtc.get_by_name("rtpbin")
        if rtpbin is not None:
            rtpbin.set_property("ntp-time-source", 0)   # NTP from the real-time clock
            rtpbin.set_property("rtcp-sync-send-time", False)
        self.offer_ready = threading.Event()
        self.offer_sdp = None
        self.connected = threading.Event()
        self.failed = None
        self.webrtc.connect("on-negotiation-needed", self.on_negotiation_needed)
        self.webrtc.connect("notify::ice-gathering-state", self.on_gathering)
        self.webrtc.connect("notify::connection-state", self.on_connection)
        self.location = None

    def on_negotiation_needed(self, element):
        promise = Gst.Promise.new_with_change_func(self.on_offer_created, element, None)
        element.emit("create-offer", None, promise)

    def on_offer_created(self, promise, element, _):
        promise.wait()
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply.has_field("offer") else None
        if offer is None:
            self.failed = f"create-offer: {reply.to_string()}"
            print(f"gst-whip: {self.failed}", file=sys.stderr)
            return
        element.emit("set-local-description", offer, Gst.Promise.new())

    def on_gathering(self, element, _pspec):
        if element.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            self.offer_sdp = element.get_property("local-description").sdp.as_text()
            self.offer_ready.set()

    def on_connection(self, element, _pspec):
        state = element.get_property("connection-state")
        if state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED:
            self.connected.set()
        elif state == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            self.failed = "connection failed"
            self.connected.set()

    def post_offer(self):
        # webrtcbin as the DTLS server fails its handshake with aiortc's client (seen
        # with GStreamer 1.22 and aiortc 1.16: "DTLS handshake failed", no alert), so the
        # offer takes the client role itself; webrtcbin follows the answer's passive.
        offer = self.offer_sdp.replace("a=setup:actpass", "a=setup:active")
        request = urllib.request.Request(self.args.whip, data=offer.encode(), method="POST",
                                         headers={"Content-Type": "application/sdp", **self.auth()})
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.read().decode()
            self.location = urllib.parse.urljoin(self.args.whip, response.headers.get("Location", ""))
        _, sdp = GstSdp.SDPMessage.new_from_text(answer)
        description = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, sdp)
        self.webrtc.emit("set-remote-description", description, Gst.Promise.new())

    def auth(self):
        return {"Authorization": f"Bearer {self.args.token}"} if self.args.token else {}

    def delete(self):
        """DELETEs the resource; False (and a line on stderr) when the server did not take it."""
        if not self.location:
            return True
        try:
            urllib.request.urlopen(urllib.request.Request(self.location, method="DELETE", headers=self.auth()),
                                   timeout=10).read()
            return True
        except Exception as e:
            print(f"gst-whip: DELETE failed: {e}", file=sys.stderr)
            return False

    def run(self):
        loop = GLib.MainLoop()
        threading.Thread(target=loop.run, daemon=True).start()
        self.pipe.set_state(Gst.State.PLAYING)
        try:
            if not self.offer_ready.wait(20):
                raise RuntimeError("ICE gathering did not complete")
            self.post_offer()
            if not self.connected.wait(20) or self.failed:
                raise RuntimeError(self.failed or "not connected within 20 s")
            print("gst-whip: connected", file=sys.stderr, flush=True)
            time.sleep(self.args.duration)
            return 0 if self.delete() else 1
        except Exception as e:
            print(f"gst-whip: {e}", file=sys.stderr)
            self.delete()
            return 1
        finally:
            self.pipe.set_state(Gst.State.NULL)
            loop.quit()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--whip", required=True)
    p.add_argument("--token", help="bearer token for the WHIP server (a router's publisher token)")
    p.add_argument("--codec", choices=["vp8", "h264"], default="vp8")
    p.add_argument("--size", default="1280x720")
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--bitrate", type=int, default=1500)
    p.add_argument("--threads", type=int, default=1, help="vp8enc threads (camagent's choice: bench --encode vp8)")
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--y4m", metavar="PATH", help="read the picture from a Y4M stream (a FIFO) instead of videotestsrc")
    args = p.parse_args()
    Gst.init(None)
    sys.exit(Publisher(args).run())


if __name__ == "__main__":
    main()
