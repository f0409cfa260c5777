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
from dataclasses import dataclass, replace
from typing import Any, Sequence

from llmbench.load.shapes.fixed import ClosedLoop, OpenLoop
from llmbench.load.shapes.trace import TraceReplay
from llmbench.workload import Conversation

# Streams one worker process carries before its own check (event-loop lag p99 over 10 ms or
# CPU over 90%) starts to flag it, measured with scripts/bench_worker_capacity.py against the
# mock on the 2-core project machine (shared with other jobs, so pessimistic): see
# docs/workers.md for the table. ``auto`` plans for this many per process.
STREAMS_PER_PROCESS = 64
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
        self.base, self.start, self.step = base, start, step
        self._n = len(range(start, len(base), step))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self.base[self.start + i * self.step]

    def __iter__(self):
        base = self.base
        for j in range(self.start, len(base), self.step):
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
    steps = getattr(shape, "steps", None)
    if steps:
        if getattr(shape, "by", "users") == "rate":
            return int(math.ceil(max(steps) * ASSUMED_REQUEST_S))
        return int(max(steps))
    return 1


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                        # not Linux
        return os.cpu_count() or 1


def streams_per_process() -> int:
    """STREAMS_PER_PROCESS, or $LLMBENCH_STREAMS_PER_PROCESS when it is a whole number > 0
    (anything else is said once on stderr and ignored)."""
    raw = os.environ.get(STREAMS_PER_PROCESS_ENV)
    if not raw:
        return STREAMS_PER_PROCESS
    try:
        n = int(raw)
        if n > 0:
            return n
    except ValueError:
        pass
    global _warned
    if not _warned:
        _warned = True
        print(f"warning: {STREAMS_PER_PROCESS_ENV}={raw!r} is not a whole number above 0; "
              f"--workers auto plans for {STREAMS_PER_PROCESS} streams per process",
              file=sys.stderr)
    return STREAMS_PER_PROCESS


_warned = False


def auto_workers(n_streams: int, n_cores: int | None = None) -> int:
    """Enough processes for the streams at streams_per_process() each, at most one per core
    this process may run on (more processes than cores only share the same CPUs)."""
    c = cores() if n_cores is None else n_cores
    return max(1, min(c, int(math.ceil(n_streams / streams_per_process()))))
