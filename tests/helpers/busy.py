"""How busy the machine is, measured, for waits that stretch with it (issue 49).

A test that waits for something (a child process, a page, a count) needs a deadline that
catches a hang, yet a fixed one is too tight on a 2-core machine shared with other work: the
same run takes 2 s alone and 20 s at load 16. Multiplying every deadline by 10 would hide a
slow hang on a quiet machine; instead the slowness is measured, now, the way it affects the
test: a short CPU-bound spin, whose wall time over the CPU time this thread got is how many
times slower CPU-bound work runs than on a free core (1.0 on a quiet machine, about
runnable processes / cores on a busy one).

``slowdown()``     the factor, now (a spin of ~20 ms CPU; at most ~0.5 s wall)
``Deadline(s)``    ``s`` seconds of a quiet machine: its budget drains at 1/slowdown per
                   second of wall time, re-measured as the wait goes, so a machine that gets
                   busy half way stretches only the rest of the wait
``run(cmd, s)``    ``subprocess.run`` whose timeout is such a Deadline
"""

from __future__ import annotations

import hashlib
import subprocess
import time

# the most a deadline stretches: a hang still ends, at MAX_FACTOR times the quiet wait
MAX_FACTOR = 20.0


_BLOCK = bytes(1 << 18)


def slowdown(cpu_s: float = 0.02, wall_cap_s: float = 0.5) -> float:
    """Wall time over this thread's CPU time for ``cpu_s`` CPU seconds of hashing (or until
    ``wall_cap_s`` of wall time), at least 1. hashlib lets go of the GIL on large blocks, so
    the spin neither waits for nor delays a server thread in this process (the mock): it
    measures the cores, which other processes share."""
    w0, c0 = time.perf_counter(), time.thread_time()
    while True:
        hashlib.sha256(_BLOCK)
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

    def __init__(self, quiet_s: float, every_s: float = 2.0) -> None:
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


def communicate(proc: subprocess.Popen, quiet_s: float, input=None, dump: bool = False):
    """``proc.communicate()`` within a Deadline of ``quiet_s``; on expiry the child is killed
    and ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` does, naming the wait.
    ``dump``: a Python child started with PYTHONFAULTHANDLER=1 gets SIGABRT first, so where
    each of its threads was stuck is in the exception's stderr."""
    import signal
    d = Deadline(quiet_s)
    while True:
        try:
            return proc.communicate(input, timeout=max(0.2, min(d.left(), 2.0)))
        except subprocess.TimeoutExpired:
            input = None                      # already written: communicate() keeps it
            if d.expired():
                if dump:
                    proc.send_signal(signal.SIGABRT)
                    try:
                        out, err = proc.communicate(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
                    else:
                        raise subprocess.TimeoutExpired(proc.args, d.elapsed(), out,
                                                        err) from None
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


def generator_finding(doc: dict) -> str | None:
    """llmbench's own finding, in a run.json, that its load generator could not be trusted
    (its event loop lagged past --generator-lag-limit, or froze: load.monitor): the verdict's
    words when the verdict is that, else the steps it judged overloaded; None without one.
    On a shared machine this is the honest outcome a timing test may meet: the tool saying
    its numbers are not the server's, rather than numbers the test would then misjudge."""
    v = doc.get("verdict") or {}
    if v.get("kind") == "load_generator":
        return " ".join([v.get("result") or ""] + list(v.get("evidence") or []))
    bad = [s for s in doc.get("steps") or [] if (s.get("monitor") or {}).get("overloaded")]
    mon = doc.get("monitor") or {}
    if bad:
        return f"{len(bad)} step(s) with the load generator overloaded: " + "; ".join(
            f"load {s.get('load')}: {s['monitor']}" for s in bad)
    if mon.get("overloaded"):
        return f"the load generator was overloaded: {mon}"
    return None


def unless_busy(attempt, tries: int = 2):
    """``attempt()`` -> (result, run.json as a dict), run again (up to ``tries`` in all) while
    llmbench itself found its load generator overloaded (``generator_finding``): a busy
    machine gets another chance to measure, and a test that still meets the finding checks
    that finding instead of numbers the tool says are not the server's. Returns (result, doc,
    finding or None)."""
    for i in range(tries):
        result, doc = attempt()
        finding = generator_finding(doc)
        if finding is None:
            return result, doc, None
    return result, doc, finding


BUSY_WORDS = ("machine busy", "llmbench busy", "not trustworthy", "itself was frozen",
              "machine was busy", "load generator was busy")


def said_busy(text: str) -> bool:
    """Whether llmbench's output says its load generator was busy or frozen (the ramp table's
    "(machine busy)", the verdict's "not trustworthy", the summary's WARNING)."""
    return any(w in text for w in BUSY_WORDS)


class Lines:
    """A child's stderr read line by line as it comes, each wait within a Deadline (the pipe
    is read with select and os.read, never a blocking readline). ``seen`` keeps every line;
    what is left unread stays for ``proc.communicate``.

        err = Lines(proc)
        url = err.wait(r"Dashboard: (http://\\S+)", 90).group(1)
    """

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self._buf = b""

    def wait(self, pattern: str, quiet_s: float):
        """The first line from now on that matches ``pattern`` (its re.Match); an
        AssertionError with the lines seen if the child ends or the Deadline expires first."""
        import os
        import re
        import select
        d = Deadline(quiet_s)
        fd = self.proc.stderr.fileno()
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                self.seen.append(line.decode(errors="replace"))
                m = re.search(pattern, self.seen[-1])
                if m:
                    return m
            if d.expired():
                break
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                self._buf += chunk
            elif self.proc.poll() is not None and not select.select([fd], [], [], 0)[0]:
                break
        raise AssertionError(f"no line matching {pattern!r} on stderr in {d}: "
                             f"{self.seen + [self._buf.decode(errors='replace')]}")
