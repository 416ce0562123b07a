"""GStreamer's encoder elements set up as camagent's own encoders are, in one
place for every comparison that runs them (the publish path in
gst_whip_publisher.py, the encoders alone in bench.py). Plain strings for
gst-launch / Gst.parse_launch: no GStreamer import, so any Python can use it."""


def vp8enc(bitrate_kbps, fps, threads):
    """camagent's VP8Encoder: realtime, CBR, cpu-used -6, no lag, error resilient,
    a keyframe at least every 10 s, and the thread count camagent picks for the
    size on this machine (`camagent bench --encode vp8 --json` tells it)."""
    return (f"vp8enc deadline=1 cpu-used=-6 end-usage=cbr target-bitrate={bitrate_kbps * 1000} "
            f"lag-in-frames=0 error-resilient=default threads={threads} keyframe-max-dist={fps * 10}")


def openh264enc(bitrate_kbps, fps):
    """camagent's H264Encoder: bitrate rate control, the fastest complexity, an IDR every 3 s."""
    return f"openh264enc bitrate={bitrate_kbps * 1000} rate-control=bitrate complexity=low gop-size={fps * 3}"
