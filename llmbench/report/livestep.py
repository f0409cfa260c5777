"""The one per-step accumulator every live view shares (the terminal view, the dashboard's
feed, and through the feed a notebook cell's view): the current step's finished requests so
far, by the summary's definitions (METRICS.md: TTFT = first token event - start; ITL = every
gap between two token events; over successful measured requests), and the token events as
they arrive (load.observe.Observer.token).

Filled where each view drains its records (the terminal's redraw, the dashboard's feeder
thread), never on the event loop: ``Observer.observe`` only appends to a deque.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from llmbench.analysis import percentile
from llmbench.records.definitions import is_measured
from llmbench.records.record import Record

MAX_VALUES = 20_000          # TTFTs and inter-token gaps kept per step for its percentiles
RATE_WINDOW_S = 1.0          # the live token rate: token events over the last second
TOKENS_KEEP_S = 10.0         # token arrivals kept (a tick may come late on a busy machine)


@dataclass
class Newest:
    """The newest ``cap`` values, in arrays (a million-request run keeps a bounded few MB)."""

    cap: int = MAX_VALUES
    parts: deque = field(default_factory=deque)
    n: int = 0

    def add(self, values: list[float]) -> None:
        if not values:
            return
        self.parts.append(np.asarray(values, dtype=float))
        self.n += len(values)
        while len(self.parts) > 1 and self.n - len(self.parts[0]) >= self.cap:
            self.n -= len(self.parts.popleft())

    def values(self) -> np.ndarray:
        return np.concatenate(list(self.parts)) if self.parts else np.empty(0)

    def pcts_ms(self, qs: tuple[float, ...]) -> list[float | None]:
        return pcts_ms(self.values(), qs)


def pcts_ms(values: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Several percentiles of seconds, in ms, in one pass (one call: its overhead is most of
    the cost on a second's few hundred values), by the tool's one percentile rule (None: no
    value yet)."""
    if not len(values):
        return [None] * len(qs)
    return [x * 1000.0 for x in percentile.percentiles(values, qs)]


@dataclass(eq=False)
class StepSoFar:
    """One step's finished measured requests so far (a run is one step)."""

    started: float = 0.0                 # when a view first saw the step (its clock)
    done: int = 0
    failed: int = 0
    ttft: Newest = field(default_factory=Newest)
    gaps: Newest = field(default_factory=Newest)
    errors: Counter = field(default_factory=Counter)


def gaps_of(rec: Record) -> list[float]:
    times = rec.token_times
    return [y - x for x, y in zip(times, times[1:])]


@dataclass
class Steps:
    """The steps so far, keyed by step (-1: a run). ``add`` takes a drained record; values are
    gathered per call to ``flush`` and added as one array each (not one per request)."""

    by_step: dict[int, StepSoFar] = field(default_factory=dict)
    _ttft: dict[int, list[float]] = field(default_factory=dict)
    _gaps: dict[int, list[float]] = field(default_factory=dict)

    def get(self, step: int | None, now: float = 0.0) -> StepSoFar:
        key = -1 if step is None else step
        st = self.by_step.get(key)
        if st is None:
            st = self.by_step[key] = StepSoFar(started=now)
        return st

    def add(self, rec: Record, now: float = 0.0) -> StepSoFar | None:
        """A finished record: counted in its step if measured (None: not measured)."""
        if not is_measured(rec.warmup, rec.error_kind):
            return None
        st = self.get(rec.step, now)
        key = -1 if rec.step is None else rec.step
        st.done += 1
        if not rec.ok:
            st.failed += 1
            st.errors[rec.error_kind or "error"] += 1
            return st
        if rec.ttft is not None:
            self._ttft.setdefault(key, []).append(rec.ttft)
        if len(rec.token_times) > 1:
            self._gaps.setdefault(key, []).extend(gaps_of(rec))
        return st

    def flush(self) -> None:
        for key, values in self._ttft.items():
            self.get(key).ttft.add(values)
        for key, values in self._gaps.items():
            self.get(key).gaps.add(values)
        self._ttft.clear()
        self._gaps.clear()

    def forget_before(self, step: int | None) -> None:
        """Steps before ``step`` are over (their figures are judged): let them go."""
        key = -1 if step is None else step
        for old in [k for k in self.by_step if k < key]:
            del self.by_step[old]


@dataclass
class TokenRate:
    """Token events as they arrive (``add`` from Observer.token, on the event loop: one
    append), read as a rate over the last second, or counted in a span of time."""

    arrivals: deque = field(default_factory=deque)       # (perf_counter s, n)

    def add(self, now_s: float, n: int) -> None:
        self.arrivals.append((now_s, n))

    def count(self, start_s: float, end_s: float) -> int:
        """Token events that arrived in (start_s, end_s]."""
        return sum(n for t, n in list(self.arrivals) if start_s < t <= end_s)

    def per_s(self, now_s: float) -> float:
        """Token events a second over the last RATE_WINDOW_S (old arrivals let go)."""
        arrivals = self.arrivals
        while arrivals and arrivals[0][0] < now_s - TOKENS_KEEP_S:
            arrivals.popleft()
        return self.count(now_s - RATE_WINDOW_S, now_s) / RATE_WINDOW_S
