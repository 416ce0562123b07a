"""Benchmarks/malloc-counter.c, built for the allocation tests (Tests/Device/test_allocations.py
and Tests/Publish/test_publish_allocations.py)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each test runs the same thing twice, short and long, and divides the difference in
# allocations by the difference in frames. A few allocations can land in the long run only
# (a log line, a stats snapshot, the frame-rate governor's notice when the slow VM lags):
# the long runs are long enough that one such line stays far below this bound, while one
# allocation per frame would show as >= 1.0.
MAX_ALLOCATIONS_PER_FRAME = 0.05


def build_counter(directory):
    """Compiles the LD_PRELOAD counter into `directory` (a pathlib.Path); returns the library's path."""
    lib = directory / "malloc-counter.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib),
                    os.path.join(ROOT, "Benchmarks", "malloc-counter.c")], check=True)
    return lib
