"""No heap allocation per frame on publish's capture and encoder threads.

Benchmarks/malloc-counter.c is preloaded into `camagent publish` (the test
pattern, 640x480 at 15 fps, to one aiortc WHEP viewer of the built-in viewer)
and counts the allocations made on two threads by name: the test pattern's
capture thread (camagent-pattern: drawing into a pooled frame and handing it
over) and the encoder thread (camagent-encode: encoding, cutting RTP packets
and handing them to the connections). Each codec runs twice, short and long,
so start-up and teardown (the encoder made at the first watched frame, the
viewer's arrival and departure) cancel out: the difference divided by the
difference in frames encoded is what one more frame costs on each thread. The
bound is a count, not a time.

Start-up does not always cost the same: on a loaded machine the encoder
thread's start-up made 58 allocations in one run and 66 in the next (VP8;
traced with MALLOC_COUNTER_TRACE_AFTER, calloc included: none at all after
5 s in either). That is one-off work (the first JSON line it prints, and
Foundation's caches warmed by whichever thread comes first), not per frame. The
long run is therefore long enough (over 200 more frames) that such a
difference stays well under the bound, while one allocation per frame, or
even one per ten frames, would still be far over it.

The whole process still allocates per frame (the transport thread: SRTP and
RTCP, BENCHMARKS.md); these two threads must not.
"""
import os
import time

import pytest

from malloc_counter import MAX_ALLOCATIONS_PER_FRAME, build_counter  # Tests/Device
from test_viewer_agent import Agent, start_viewer, viewer_result, brief

# As the kernel keeps them (15 characters): camagent-pattern is "camagent-patter".
THREADS = ("camagent-pattern"[:15], "camagent-encode")


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    return build_counter(tmp_path_factory.mktemp("malloc"))


def counted_publish(net, workdir, counter, codec, viewer_seconds):
    """Publishes to one viewer for `viewer_seconds`; returns ({thread: allocations}, frames encoded)."""
    out = os.path.join(workdir, f"allocations-{codec}-{viewer_seconds}")
    wrapper = ["env", f"LD_PRELOAD={counter}", f"MALLOC_COUNTER_OUT={out}",
               f"MALLOC_COUNTER_THREAD={','.join(THREADS)}"]
    agent = Agent(net, workdir, duration=viewer_seconds + 6, codec=codec, wrapper=wrapper)
    viewer = start_viewer(net, workdir, agent, f"viewer-{codec}-{viewer_seconds}", duration=viewer_seconds)
    time.sleep(2)
    names = thread_names(agent.proc.pid)
    result = viewer_result(viewer, timeout=viewer_seconds + 60)
    code, events = agent.finish(timeout=viewer_seconds + 60)
    assert result["exit"] == 0 and result.get("status") == 201, brief(result)
    assert code == 0, agent.log()
    summaries = [e for e in events if e.get("event") == "summary"]
    assert summaries, events[-5:]
    encoded = summaries[-1]["framesEncoded"]
    counts = thread_counts(out)
    # The counter goes by thread name: a count of 0 must mean no allocation, not a renamed thread.
    assert set(THREADS) <= names, f"camagent's threads while publishing: {sorted(names)}"
    return counts, encoded


def thread_counts(out):
    """The counter's allocations per watched thread, from its output file."""
    counts = {}
    for line in open(out).read().splitlines():
        words = line.split()
        if words[0] == "thread":
            counts[words[1]] = int(words[2])
    assert set(counts) == set(THREADS), open(out).read()
    return counts


def check_per_frame(label, short, short_frames, long, long_frames):
    """What one more frame costs each thread, from a short and a long run: under the bound."""
    extra = long_frames - short_frames
    assert extra >= 200, f"the long run should encode at least 200 more frames: {short_frames} → {long_frames}"
    # The counter sees the encoder thread: it allocates while it starts (the encoder is made then).
    assert short["camagent-encode"] > 0, short
    for thread in THREADS:
        rate = (long[thread] - short[thread]) / extra
        print(f"{label} {thread}: {short[thread]} → {long[thread]} allocations, {short_frames} → {long_frames} frames")
        assert rate < MAX_ALLOCATIONS_PER_FRAME, \
            f"{thread}: {rate:.2f} allocations per frame ({short[thread]} → {long[thread]} over {extra} more frames)"


def thread_names(pid):
    """The names of a running camagent's threads (`ip netns exec` and `env` exec it in place)."""
    with open(f"/proc/{pid}/comm") as f:
        assert f.read().strip() == "camagent", f"process {pid} is not camagent"
    names = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/comm") as f:
            names.add(f.read().strip())
    return names


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_publish_allocates_nothing_per_frame_on_the_capture_and_encoder_threads(net, workdir, counter, codec):
    short, short_frames = counted_publish(net, workdir, counter, codec, viewer_seconds=4)
    long, long_frames = counted_publish(net, workdir, counter, codec, viewer_seconds=20)
    check_per_frame(codec, short, short_frames, long, long_frames)


def counted_simulcast_publish(net, workdir, counter, seconds):
    """`publish --simulcast` into a router's session (its WHIP connection is the receiver that
    makes it encode) for `seconds`; returns ({thread: allocations}, frames encoded)."""
    from router_support import Router
    from publish_support import BIN, json_lines
    router = Router(net, workdir)
    session = router.create_session()
    out = os.path.join(workdir, f"allocations-simulcast-{seconds}")
    proc = net.run(["env", f"LD_PRELOAD={counter}", f"MALLOC_COUNTER_OUT={out}", f"MALLOC_COUNTER_THREAD={','.join(THREADS)}",
                    BIN, "publish", "--device", "test-pattern", "--size", "640x480", "--fps", "15", "--audio", "none",
                    "--simulcast", "--session", router.session_url(session), "--token", router.token(session, "publisher"),
                    "--duration", str(seconds), "--json"], timeout=seconds + 60)
    net.stop(router.proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = json_lines(proc.stdout)
    negotiated = [e for e in lines if e.get("event") == "negotiated"]
    assert negotiated and negotiated[0].get("simulcast") == ["640x480", "320x240"], negotiated
    summaries = [e for e in lines if e.get("event") == "summary"]
    assert summaries, lines[-5:]
    counts = thread_counts(out)
    return counts, summaries[-1]["framesEncoded"]


def test_simulcast_allocates_nothing_per_frame_on_the_capture_and_encoder_threads(net, workdir, counter):
    """The same with `publish --simulcast` (VP8): the second encoder, the half picture (scaled
    2:1 into a frame made once) and the second layer's packets cost no allocation per frame."""
    short, short_frames = counted_simulcast_publish(net, workdir, counter, seconds=4)
    long, long_frames = counted_simulcast_publish(net, workdir, counter, seconds=21)
    check_per_frame("simulcast", short, short_frames, long, long_frames)
