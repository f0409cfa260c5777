"""How busy the machine is, measured, for waits that stretch with it (issue 49).

A test that waits for something (a child process, a page, a count) needs a deadline that
catches a hang, yet a fixed one is too tight on a 2-core machine shared with other work: the
same run takes 2 s alone and 20 s at load 16. Multiplying every deadline by 10 would hide a
slow hang on a quiet machine; instead the slowness is measured, now, the way it affects the
test: a short CPU-bound spin, whose wall time over the CPU time this thread got is how many
times slower CPU-bound work runs than on a free core (1.0 on a quiet machine, about
runnable processes / cores on a busy one; the GIL held by a server thread in this process
counts too, as it slows that thread's work as much).

``slowdown()``     the factor, now (a spin of ~20 ms CPU; at most ~0.5 s wall)
``Deadline(s)``    ``s`` seconds of a quiet machine: its budget drains at 1/slowdown per
                   second of wall time, re-measured as the wait goes, so a machine that gets
                   busy half way stretches only the rest of the wait
``run(cmd, s)``    ``subprocess.run`` whose timeout is such a Deadline
"""

from __future__ import annotations

import subprocess
import time

# the most a deadline stretches: a hang still ends, at MAX_FACTOR times the quiet wait
MAX_FACTOR = 12.0


def slowdown(cpu_s: float = 0.02, wall_cap_s: float = 0.5) -> float:
    """Wall time over this thread's CPU time for a spin of ``cpu_s`` CPU seconds (or until
    ``wall_cap_s`` of wall time), at least 1."""
    w0, c0 = time.perf_counter(), time.thread_time()
    while True:
        for _ in range(2000):
            pass
        cpu = time.thread_time() - c0
        wall = time.perf_counter() - w0
        if cpu >= cpu_s or wall >= wall_cap_s:
            break
    # thread_time ticks coarsely on some kernels: never divide by ~0
    return min(max(wall / max(cpu, 1e-3), 1.0), MAX_FACTOR)


class Deadline:
    """``quiet_s`` seconds of waiting on a quiet machine, stretched by the machine's measured
    slowdown while the wait goes on (never beyond ``MAX_FACTOR`` x ``quiet_s`` of wall time).

        d = Deadline(30)
        while not done():
            assert not d.expired(), f"not done in {d}"
            time.sleep(0.1)
    """

    def __init__(self, quiet_s: float, every_s: float = 1.0) -> None:
        self.quiet_s = quiet_s
        self.every_s = every_s
        self.start = self._last = self._measured = time.monotonic()
        self.factor = slowdown()
        self.factors = [self.factor]
        self.used_quiet_s = 0.0           # the budget spent, in quiet-machine seconds

    def _advance(self) -> None:
        now = time.monotonic()
        dt = now - self._last
        if dt <= 0:
            return
        # the interval since the last look ran at the factor measured then; a new one is
        # measured at most every every_s (a spin costs ~20 ms of CPU)
        self.used_quiet_s += dt / self.factor
        self._last = now
        if now - self._measured >= self.every_s:
            self.factor = slowdown()
            self.factors.append(self.factor)
            self._measured = time.monotonic()

    def left(self) -> float:
        """Wall seconds left at the slowdown measured last (0 once expired)."""
        self._advance()
        wall_left = MAX_FACTOR * self.quiet_s - (time.monotonic() - self.start)
        return max(0.0, min((self.quiet_s - self.used_quiet_s) * self.factor, wall_left))

    def expired(self) -> bool:
        return self.left() <= 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __str__(self) -> str:
        fs = sorted(self.factors)
        return (f"{self.elapsed():.1f} s (a {self.quiet_s:g} s wait on a quiet machine; the "
                f"machine measured {fs[0]:.1f}-{fs[-1]:.1f}x slower)")


def wait_for(cond, quiet_s: float, poll_s: float = 0.02) -> bool:
    """Poll ``cond()`` until it holds or a Deadline of ``quiet_s`` expires; its last value."""
    d = Deadline(quiet_s)
    while not d.expired():
        if cond():
            return True
        time.sleep(poll_s)
    return bool(cond())


def communicate(proc: subprocess.Popen, quiet_s: float, input=None):
    """``proc.communicate()`` within a Deadline of ``quiet_s``; on expiry the child is killed
    and ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` does, naming the wait."""
    d = Deadline(quiet_s)
    while True:
        try:
            return proc.communicate(input, timeout=max(0.2, min(d.left(), 2.0)))
        except subprocess.TimeoutExpired:
            input = None                      # already written: communicate() keeps it
            if d.expired():
                proc.kill()
                out, err = proc.communicate()
                raise subprocess.TimeoutExpired(proc.args, d.elapsed(), out, err) from None


def run(cmd, quiet_s: float, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, **kw)`` with its timeout a Deadline of ``quiet_s`` quiet seconds
    (``capture_output``, ``text``, ``env``, ``cwd`` and ``input`` as subprocess.run takes)."""
    inp = kw.pop("input", None)
    if kw.pop("capture_output", False):
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    if inp is not None:
        kw["stdin"] = subprocess.PIPE
    with subprocess.Popen(cmd, **kw) as proc:
        out, err = communicate(proc, quiet_s, inp)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
