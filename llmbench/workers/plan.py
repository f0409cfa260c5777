"""What each worker runs: a run shape cut into shares, or the ramp's / the probe's crowd that
the coordinator's steps drive by messages. Values only (they cross process boundaries by
pickle), and how many workers ``auto`` chooses.

Shares are deterministic: user u is worker u % N's; arrival i of an open-loop schedule (computed
once, here, in the coordinator) is worker i % N's; conversation k of a closed loop is worker
k % N's; a trace's session (a conversation and all its turns) is one worker's, in time order
round robin, so a session's turns stay in order on one worker.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from llmbench.load.shapes.fixed import ClosedLoop, OpenLoop
from llmbench.load.shapes.trace import TraceReplay
from llmbench.workload import Conversation

# Streams one worker process carries before its own check (event-loop lag p99 over 10 ms or
# CPU over 90%) flags it; ``auto`` plans for this many per process (docs/workers.md measures it)
STREAMS_PER_PROCESS = 64
# Cores ``auto`` leaves to a server on the same machine and to the coordinator: with the mock on
# the same 2 cores a second worker made the TTFT tail worse (issue 28; docs/workers.md). Other
# processes' load (host_busy_cores) comes on top.
RESERVED_CORES = 1.0
# Overrides the measured busy cores and the reserve: how many of this host's cores auto must
# leave alone (0: plan for every core, as the tests that need two workers on two cores do).
HOST_BUSY_ENV = "LLMBENCH_HOST_BUSY_CORES"
# How long host_busy_cores samples /proc/stat before the run starts
BUSY_SAMPLE_S = 0.2
BUSY_KEEP_S = 30.0
# Overrides STREAMS_PER_PROCESS: the capacity you measured on your own machine, or, in the
# tests, a tiny one so that a small ramp needs a second worker (tests/e2e/test_workers.py).
STREAMS_PER_PROCESS_ENV = "LLMBENCH_STREAMS_PER_PROCESS"
# Open loop without --max-concurrency: streams ~ rate x how long a request lasts, which is not
# known before the run; this is the assumed length (a chat reply of ~100-200 tokens).
ASSUMED_REQUEST_S = 4.0


@dataclass
class RunShare:
    """A run shape's share (ClosedLoop, OpenLoop or TraceReplay value), run as it is."""

    shape: Any


@dataclass
class RampCrowd:
    """A ramp's share of users (and arrivals), added and stopped by the coordinator."""

    convs: Sequence[Conversation]
    think_s: tuple[float, float]
    seed: int
    burstiness: float
    join: str = "start"


@dataclass
class ProbeCrowd:
    """The probe's users on either path, slice by slice, as the coordinator says."""

    convs: Sequence[Conversation]
    think_s: tuple[float, float]


class Strided(Sequence[Conversation]):
    """``base[start::step]`` without copying: a worker's conversations of a workload that is
    not held (workload.synthetic.Regenerated pickles as its recipe, so a worker gets a few KB
    per million conversations and makes its own again; a list slice would make the
    coordinator hold and pickle every prompt)."""

    def __init__(self, base: Sequence[Conversation], start: int, step: int) -> None:
        self.base = base
        self._at = range(start, len(base), step)    # where each of ours is in base

    def __len__(self) -> int:
        return len(self._at)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self.base[j] for j in self._at[i]]
        return self.base[self._at[i]]               # range raises IndexError past the end

    def __iter__(self):
        base = self.base
        for j in self._at:
            yield base[j]


def stride(convs: Sequence[Conversation], w: int, n: int) -> Sequence[Conversation]:
    """Worker w's conversations of n (conversation k is worker k % n's): all of them when
    there are fewer than n. A list is sliced (it is held anyway); anything else is a view."""
    if len(convs) < n:
        return convs
    if isinstance(convs, (list, tuple)):
        return convs[w::n]
    return Strided(convs, w, n)


def _share(total: int, n: int, w: int) -> int:
    return total // n + (1 if w < total % n else 0)


def split_run(shape: Any, n: int) -> list[RunShare]:
    """A run shape in ``n`` shares (fewer when there is less to share: 3 users, 3 workers)."""
    if isinstance(shape, ClosedLoop):
        n = max(1, min(n, shape.concurrency, shape.requests or n))
        out = []
        for w in range(n):
            mine = stride(shape.convs, w, n)
            uids = tuple(range(shape.concurrency))[w::n]
            out.append(RunShare(replace(
                shape, convs=mine, concurrency=len(uids), uids=uids,
                requests=None if shape.requests is None else _share(shape.requests, n, w),
                warmup=_share(shape.warmup, n, w))))
        return out
    if isinstance(shape, OpenLoop):
        offsets = shape.offsets()                    # the schedule, computed once, here
        n = max(1, min(n, len(offsets)))
        out = []
        for w in range(n):
            share = tuple((i, o) for i, o in enumerate(offsets) if i % n == w)
            cap = shape.max_concurrency
            out.append(RunShare(replace(
                shape, share=share, warmup=_share(shape.warmup, n, w),
                max_concurrency=None if cap is None else max(1, _share(cap, n, w)))))
        return out
    if isinstance(shape, TraceReplay):
        items = list(shape.items)
        n = max(1, min(n, len(items)))
        return [RunShare(replace(shape, items=items[w::n])) for w in range(n)]
    raise TypeError(f"no worker split for {type(shape).__name__}")


def streams(shape: Any) -> int:
    """How many requests the shape may keep in flight at its peak (for ``auto``)."""
    if isinstance(shape, ClosedLoop):
        return shape.concurrency
    if isinstance(shape, OpenLoop):
        if shape.max_concurrency:
            return shape.max_concurrency
        return int(math.ceil(shape.rate * ASSUMED_REQUEST_S)) if math.isfinite(shape.rate) \
            else (shape.requests or 1)
    if isinstance(shape, TraceReplay):
        return max(shape.max_in_flight() - 16, 1)
    peak = shape.peak_load() if hasattr(shape, "peak_load") else max(
        getattr(shape, "steps", None) or [0])
    if peak:
        if getattr(shape, "by", "users") == "rate":
            return int(math.ceil(peak * ASSUMED_REQUEST_S))
        return int(peak)
    return 1


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                        # not Linux
        return os.cpu_count() or 1


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [float(x) for x in fields[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0.0)          # idle + iowait
    total = sum(v[:8])                                     # guest time is inside user already
    return total - idle, total


def host_busy_cores(sample_s: float = BUSY_SAMPLE_S) -> float:
    """How many cores other processes keep busy now: /proc/stat over ``sample_s`` (this
    process sleeps meanwhile), else the 1-minute load average; 0 when neither is known.
    Kept for BUSY_KEEP_S: a run asks twice (whether to start workers, then how many), and
    the second look would see the first's own work."""
    global _busy_seen
    now = time.monotonic()
    if _busy_seen is not None and now - _busy_seen[0] < BUSY_KEEP_S:
        return _busy_seen[1]
    v = _measure_busy(sample_s)
    _busy_seen = (now, v)
    return v


_busy_seen: tuple[float, float] | None = None


def _measure_busy(sample_s: float) -> float:
    a = _cpu_times()
    if a is not None:
        time.sleep(sample_s)
        b = _cpu_times()
        if b is not None and b[1] > a[1]:
            return cores() * (b[0] - a[0]) / (b[1] - a[1])
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


def _env_number(name: str, read: Callable[[str], float], ok: Callable[[float], bool],
                what: str) -> float | None:
    """$name read by ``read`` when it is set and ``ok``; None when unset, and when it is not
    ``what`` (said once on stderr, then ignored)."""
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        v = read(raw)
        if ok(v):
            return v
    except ValueError:
        pass
    if name not in _warned:
        _warned.add(name)
        print(f"warning: {name}={raw!r} is not {what}", file=sys.stderr)
    return None


_warned: set[str] = set()


def streams_per_process() -> int:
    """STREAMS_PER_PROCESS, or $LLMBENCH_STREAMS_PER_PROCESS when it is a whole number > 0."""
    n = _env_number(STREAMS_PER_PROCESS_ENV, int, lambda n: n > 0, "a whole number above 0; "
                    f"--workers auto plans for {STREAMS_PER_PROCESS} streams per process")
    return STREAMS_PER_PROCESS if n is None else int(n)


def _busy_override() -> float | None:
    return _env_number(HOST_BUSY_ENV, float, lambda v: v >= 0 and math.isfinite(v),
                       "a number of cores >= 0; --workers auto measures how busy the host is")


def auto_workers(n_streams: int, n_cores: int | None = None,
                 busy_cores: float | None = None) -> int:
    """Enough processes for the streams at streams_per_process() each, but no more than the
    cores left free: this host's cores (``n_cores``: a cluster's, given) minus ``busy_cores``
    (the reserve included): by default host_busy_cores() + RESERVED_CORES, or
    $LLMBENCH_HOST_BUSY_CORES as given; 0 when ``n_cores`` is given (a Ray cluster, a test)."""
    if n_cores is None:
        c = cores()
        if busy_cores is None:
            busy_cores = _busy_override()
        if busy_cores is None:
            want = int(math.ceil(n_streams / streams_per_process()))
            if want <= 1:
                return 1                    # nothing to decide: no need to measure
            busy_cores = host_busy_cores() + RESERVED_CORES
    else:
        c = n_cores
    free = int(math.floor(c - (busy_cores or 0.0) + 0.25))     # a core 75 % free counts
    return max(1, min(free, int(math.ceil(n_streams / streams_per_process()))))
