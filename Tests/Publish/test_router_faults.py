"""The router across a faulty network upstream: the fault link (fault_link.py) sits between
a camagent publisher (side A) and the router with a `camagent subscribe` (side B), so what
is lost is lost between the publisher and the router, before any subscriber could ask for
it. The router asks the publisher again itself (NACK) and holds the frames after a gap for
a short bound; without that, each lost packet broke its frame and held every frame back
until the keyframe a PLI brought, and the subscriber's counter jumped by several frames
at each loss.
"""
import os

from fault_link import fault_link  # noqa: F401  (fixture)
from publish_support import BIN
from router_support import Router
from test_subscribe import check_pattern_y4m, start_publisher

LOSS_PERCENT = 5
WATCH_SECONDS = 10


def test_loss_between_publisher_and_router_is_repaired_by_the_router(fault_link, workdir):
    router = Router(fault_link.b, workdir)
    session = router.create_session()
    url = router.session_url(session)
    fault_link.set(loss=LOSS_PERCENT)
    start_publisher(fault_link.a, workdir, "--session", url, "--token", router.token(session, "publisher"),
                    duration=WATCH_SECONDS + 30)
    router.wait_for_streams(session, 1)
    y4m = os.path.join(workdir, "upstream-loss.y4m")
    proc = fault_link.b.run([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                             "--first", "--video-out", y4m, "--duration", str(WATCH_SECONDS), "--json"], timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:] + router.log()
    lost = fault_link.counts("a->b")["lost"]
    assert lost >= 20, fault_link.stats()
    # The subscriber got the frames whole and in order: the counter's steps stay as small
    # as on a clean network.
    counters = check_pattern_y4m(y4m, fps=15, seconds=WATCH_SECONDS - 2, size=(640, 480))
    assert counters[-1] - counters[0] >= 60, counters[:3] + counters[-3:]
    # Because the router asked again, and what it asked for came.
    metrics = router.metrics()
    nacked, recovered = (metrics["camagent_router_nacked_packets_total"],
                         metrics["camagent_router_recovered_packets_total"])
    assert nacked > 0 and recovered > 0, (nacked, recovered, lost, router.log())
