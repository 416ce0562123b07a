"""Lines from a child's pipe, read from its descriptor and split here.

Not with pipe.readline() after select(): readline takes whatever the pipe holds,
so a line printed together with the one before it waits in Python's buffer, where
select() cannot see it, and a test waiting for it times out though it was printed.
What was read and not yet handed out stays here: read the rest with rest()."""
import os
import select
import subprocess
import time


class PipeLines:
    def __init__(self, pipe):
        self.fd = pipe.fileno()
        self.pending = b""
        self.ended = False

    def next(self, deadline, proc=None):
        """The next line (text, newline kept), or None when none comes before `deadline`
        (time.monotonic()), at end of file, or once `proc` has exited with nothing left."""
        while True:
            end = self.pending.find(b"\n")
            if end >= 0:
                line, self.pending = self.pending[:end + 1], self.pending[end + 1:]
                return line.decode(errors="replace")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._more(min(remaining, 0.5), proc):
                if self.ended and self.pending:
                    line, self.pending = self.pending, b""
                    return line.decode(errors="replace")
                return None

    def _more(self, timeout, proc):
        if self.ended:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return proc is None or proc.poll() is None
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.ended = True
            return False
        self.pending += chunk
        return True

    def rest(self, proc, timeout):
        """Everything left once `proc` has exited (communicate() for one pipe): up to end of
        file, or until the process has exited and its pipe holds nothing more.
        subprocess.TimeoutExpired if that takes more than `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self._more(min(0.5, max(0.0, deadline - time.monotonic())), proc):
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout)
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        rest, self.pending = self.pending, b""
        return rest.decode(errors="replace")
