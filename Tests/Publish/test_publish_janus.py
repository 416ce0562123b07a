"""`camagent publish` into a Janus VideoRoom, as a black box.

camagent -> janus_whip_bridge.py (WHIP -> Janus HTTP API) -> Janus (Debian's
janus, VideoRoom plugin) -> janus_subscriber.py (aiortc), which decodes what
Janus forwards and reads the frame counter drawn into the test pattern. The
same path is proven with aiortc's publisher in test_receiver_selfcheck.py.
"""
import pytest

from publish_support import camagent_publish, check_audio, check_video

WATCH = 5       # seconds the subscriber decodes, once it has joined
PUBLISH = 12    # seconds camagent publishes: the subscriber joins and watches within them


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_through_janus(net, janus_any_ice, codec):
    summary, bridge = janus_any_ice.watch(
        lambda: camagent_publish(net, janus_any_ice.url, codec=codec, duration=PUBLISH), watch=WATCH)
    # The server really was what the fixture says (ICE-lite or full).
    assert ("a=ice-lite" in bridge["resources"][0]["answer"]) == janus_any_ice.ice_lite
    assert len(summary["video"]) == 1 and len(summary["audio"]) == 1, summary
    check_video(summary["video"][0], duration=WATCH, codec=codec.upper())
    check_audio(summary["audio"][0], duration=WATCH)
