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
bound is a count, not a time, so the runs go side by side (each process has
its own counter file): the test takes the time of its longest run.

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


class CountedPublish:
    """`camagent publish` to one viewer for `viewer_seconds`, under the counter. Started at once;
    `result()` waits for it. Runs of one test go on side by side: each has its own counter file."""

    def __init__(self, net, workdir, counter, codec, viewer_seconds):
        self.out = os.path.join(workdir, f"allocations-{codec}-{viewer_seconds}")
        wrapper = ["env", f"LD_PRELOAD={counter}", f"MALLOC_COUNTER_OUT={self.out}",
                   f"MALLOC_COUNTER_THREAD={','.join(THREADS)}"]
        self.viewer_seconds = viewer_seconds
        self.agent = Agent(net, workdir, duration=viewer_seconds + 6, codec=codec, wrapper=wrapper,
                           name=f"camagent-{codec}-{viewer_seconds}")
        self.viewer = start_viewer(net, workdir, self.agent, f"viewer-{codec}-{viewer_seconds}", duration=viewer_seconds)

    def wait_for_threads(self, timeout=20):
        """Until both watched threads run (the encoder's starts with the viewer's connection):
        the counter goes by thread name, so a count of 0 must mean no allocation, not a
        renamed thread. Checked while this run is young, before the next one starts."""
        deadline = time.monotonic() + timeout
        names = set()
        while time.monotonic() < deadline:
            names = thread_names(self.agent.proc.pid)
            if set(THREADS) <= names:
                return
            time.sleep(0.2)
        raise AssertionError(f"camagent's threads while publishing: {sorted(names)}")

    def result(self):
        """({thread: allocations}, frames encoded), once the run has ended."""
        result = viewer_result(self.viewer, timeout=self.viewer_seconds + 60)
        code, events = self.agent.finish(timeout=self.viewer_seconds + 60)
        assert result["exit"] == 0 and result.get("status") == 201, brief(result)
        assert code == 0, self.agent.log()
        summaries = [e for e in events if e.get("event") == "summary"]
        assert summaries, events[-5:]
        return thread_counts(self.out), summaries[-1]["framesEncoded"]


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


def test_publish_allocates_nothing_per_frame_on_the_capture_and_encoder_threads(net, workdir, counter):
    """VP8 and H.264, each short and long: the four publishers run side by side (the bound is a
    count per frame, not a time, so sharing the cores changes nothing but the wall time)."""
    runs = {}
    for codec in ("vp8", "h264"):
        for seconds in (4, 20):
            runs[(codec, seconds)] = CountedPublish(net, workdir, counter, codec, seconds)
            runs[(codec, seconds)].wait_for_threads()
    results = {key: run.result() for key, run in runs.items()}
    for codec in ("vp8", "h264"):
        check_per_frame(codec, *results[(codec, 4)], *results[(codec, 20)])


def test_simulcast_allocates_nothing_per_frame_on_the_capture_and_encoder_threads(net, workdir, counter):
    """The same with `publish --simulcast` (VP8) into a router's session (its WHIP connection is
    the receiver that makes it encode): the second encoder, the half picture (scaled 2:1 into a
    frame made once) and the second layer's packets cost no allocation per frame. The short and
    the long publisher go into the same session side by side."""
    from router_support import Router
    from publish_support import BIN, json_lines
    router = Router(net, workdir)
    session = router.create_session()
    procs = {}
    for seconds in (4, 21):
        out = os.path.join(workdir, f"allocations-simulcast-{seconds}")
        procs[seconds] = (out, net.start(
            ["env", f"LD_PRELOAD={counter}", f"MALLOC_COUNTER_OUT={out}", f"MALLOC_COUNTER_THREAD={','.join(THREADS)}",
             BIN, "publish", "--device", "test-pattern", "--size", "640x480", "--fps", "15", "--audio", "none",
             "--simulcast", "--session", router.session_url(session), "--token", router.token(session, "publisher"),
             "--duration", str(seconds), "--json"], f"simulcast-{seconds}", workdir))
    results = {}
    for seconds, (out, proc) in procs.items():
        stdout, _ = proc.communicate(timeout=seconds + 60)
        assert proc.returncode == 0, open(proc.log_path).read()[-3000:]
        lines = json_lines(stdout)
        negotiated = [e for e in lines if e.get("event") == "negotiated"]
        assert negotiated and negotiated[0].get("simulcast") == ["640x480", "320x240"], negotiated
        summaries = [e for e in lines if e.get("event") == "summary"]
        assert summaries, lines[-5:]
        results[seconds] = (thread_counts(out), summaries[-1]["framesEncoded"])
    net.stop(router.proc)
    check_per_frame("simulcast", *results[4], *results[21])
