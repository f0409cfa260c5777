"""The load generator watching itself: event-loop lag and CPU, once a second.

If the generator is busy its timestamps are late and its latencies inflated; reports say so
instead of blaming the server.

Where a token's stamp may still be late (issue 50 §1; docs/metrics.md tells both clocks and
why reads are not kept waiting): where the loop does not run at all (the process descheduled,
a GC pause, a freeze) or a turn is made long by something else, exactly what the 10 ms tick's
lateness measures. ``lag_max_ms`` of a second bounds how late any stamp of that
second can be; ``lag_p99_ms`` is how late most could be. ``with_clock`` puts the sentence for
the run's clock in the health.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from llmbench.client.request import FROZEN_S

perf_counter = time.perf_counter

LAG_P99_LIMIT_MS = 10.0
CPU_LIMIT_PCT = 90.0
# The client's own send delay (definitions.send_delay), p99: past this the generator's numbers
# are not trusted. The same error budget as the loop lag (--generator-lag-limit sets both):
# each is how late llmbench can make a timing. The lag monitor cannot see this one: at 128+
# lock-step streams requests start in waves, each wave costs the loop tens of milliseconds
# once per cycle and makes every request in it late, which a p99 of 10 ms ticks dilutes.
SEND_DELAY_P99_LIMIT_MS = LAG_P99_LIMIT_MS
# The ``worker`` of the coordinator's own samples (--workers N): it receives every worker's
# records and writes requests.jsonl, so it is watched and judged like a worker.
COORDINATOR = "coordinator"


@dataclass
class MonitorSample:
    """One second of the load generator's own health: loop lag and CPU."""
    t: float              # perf_counter at the end of the second
    lag_p99_ms: float
    lag_max_ms: float
    cpu_pct: float        # this process, % of one core
    # which worker process (--workers N), or COORDINATOR; None: the only process
    worker: int | str | None = None


@dataclass
class LoopMonitor:
    """Samples the event loop's lag and the process's CPU while the load runs."""
    tick_s: float = 0.01
    samples: list[MonitorSample] = field(default_factory=list)
    worker: int | str | None = None                 # the tag of its samples
    on_sample: Callable[[MonitorSample], None] | None = None   # each sample as it is taken
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        lags: list[float] = []
        sec_start = perf_counter()
        cpu_start = time.process_time()
        while True:
            t = perf_counter()
            await asyncio.sleep(self.tick_s)
            lags.append(max(perf_counter() - t - self.tick_s, 0.0))
            now = perf_counter()
            if now - sec_start >= 1.0:
                cpu = time.process_time()
                lags.sort()
                p99 = lags[min(int(len(lags) * 0.99), len(lags) - 1)] if lags else 0.0
                sample = MonitorSample(now, p99 * 1000, (lags[-1] if lags else 0) * 1000,
                                       100.0 * (cpu - cpu_start) / (now - sec_start),
                                       self.worker)
                self.samples.append(sample)
                if self.on_sample is not None:
                    self.on_sample(sample)
                lags = []
                sec_start, cpu_start = now, cpu

    def owns(self, task: "asyncio.Task[object]") -> bool:
        """Is this the monitor's own task (not to be cancelled with the requests)?"""
        return task is self._task

    @property
    def latest(self) -> MonitorSample | None:
        return self.samples[-1] if self.samples else None


def busy(samples: list[MonitorSample], lag_limit_ms: float = LAG_P99_LIMIT_MS,
         cpu_limit_pct: float = CPU_LIMIT_PCT) -> dict[str, Any]:
    """Summary of a window of samples, and whether the generator was too busy to trust.

    Samples of worker processes are judged per worker: any worker over its limits makes the
    window untrustworthy, and the summary is that worker's (the worst), naming it
    (``worker``, ``overloaded_workers``, ``workers``: how many worker processes reported).
    The coordinator's own samples (COORDINATOR) are judged the same way."""
    groups: dict[int | str | None, list[MonitorSample]] = {}
    for s in samples:
        groups.setdefault(s.worker, []).append(s)
    if not groups or list(groups) == [None]:
        return _busy_one(samples, lag_limit_ms, cpu_limit_pct)
    per = {w: _busy_one(g, lag_limit_ms, cpu_limit_pct) for w, g in groups.items()}
    wid, worst = max(per.items(), key=lambda kv: (bool(kv[1]["overloaded"]),
                                                   kv[1]["lag_p99_ms"], kv[1]["cpu_pct"]))
    return {**worst, "worker": wid, "workers": sum(isinstance(w, int) for w in per),
            "overloaded_workers": sorted((w for w, b in per.items()
                                          if b["overloaded"] and w is not None), key=_order)}


def _order(w: int | str) -> tuple[int, int]:
    """The coordinator first, then the workers by id."""
    return (1, w) if isinstance(w, int) else (0, 0)


def who_was_busy(mon: dict[str, Any]) -> str:
    """Who the window's figures are from, for a sentence: '', 'worker 1 of 2', 'the
    coordinator of 2 workers'; when several were over their limits, all of them."""
    bad = mon.get("overloaded_workers") or []
    if not bad:
        return ""
    n, worst = mon.get("workers"), mon.get("worker")
    who = f"the coordinator of {n} workers" if worst == COORDINATOR else f"worker {worst} of {n}"
    if len(bad) > 1:
        who += "; over its limits: " + ", ".join(
            "the coordinator" if w == COORDINATOR else str(w) for w in bad)
    return who


def _busy_one(samples: list[MonitorSample], lag_limit_ms: float,
              cpu_limit_pct: float) -> dict[str, Any]:
    if not samples:
        return {"lag_p99_ms": 0.0, "lag_max_ms": 0.0, "cpu_pct": 0.0, "overloaded": False}
    # a typical second, not the worst one: one GC pause or a scheduler hiccup on a shared
    # machine is not an overloaded generator; a busy loop lags every second
    per_second = sorted(s.lag_p99_ms for s in samples)
    lag = per_second[len(per_second) // 2]
    cpu = sum(s.cpu_pct for s in samples) / len(samples)
    out = {"lag_p99_ms": lag, "lag_max_ms": max(s.lag_max_ms for s in samples), "cpu_pct": cpu,
           "overloaded": lag > lag_limit_ms or cpu > cpu_limit_pct,
           "cores": os.cpu_count() or 1}
    # ... but a loop that did not run for seconds was frozen (stopped, swapped out, its VM
    # suspended): every timing across that gap is llmbench's own, however short it was
    frozen = [s.lag_max_ms / 1000.0 for s in samples if s.lag_max_ms >= FROZEN_S * 1000.0]
    if frozen:
        out.update(frozen_s=round(sum(frozen), 3), freezes=len(frozen), overloaded=True)
    return out


def freezes(samples: list[MonitorSample]) -> list[tuple[float, float]]:
    """(start, end) in perf_counter seconds of every freeze of the loop: a one-second sample
    whose longest tick lagged FROZEN_S or more ended just after the freeze (the monitor's
    10 ms tick resumes as the loop does), which began that long before."""
    return [(s.t - s.lag_max_ms / 1000.0, s.t) for s in samples
            if s.lag_max_ms >= FROZEN_S * 1000.0]


def with_freezes(mon: dict[str, Any], samples: list[MonitorSample], records: Any,
                 t0: float | None = None) -> dict[str, Any]:
    """``busy()``'s verdict with the freezes of the loop named: when (seconds after ``t0``),
    how long, how many requests were in flight across one (their timings hold the freeze) and
    how many timed out during one (client_stall: not measured, not the server's)."""
    spans = freezes(samples)
    if not spans:
        return mon
    import numpy as np
    n = len(records)
    start = records.col("start") if n else np.zeros(0)
    done = records.col("done") if n else np.zeros(0)
    across = np.zeros(n, dtype=bool)
    for a, b in spans:
        across |= (start < b) & (done > a)
    sid = records.str_id("client_stall") if n else -1
    stalled = int(np.count_nonzero(records.col("error_kind") == sid)) if sid >= 0 else 0
    base = t0 if t0 is not None else 0.0
    return {**mon, "freeze_spans": [{"at_s": round(a - base, 3), "frozen_s": round(b - a, 3)}
                                    for a, b in spans],
            "frozen_requests": int(np.count_nonzero(across)), "client_stalls": stalled}


class MonitorView:
    """Monitor samples gathered from worker processes (by the coordinator), read as a
    LoopMonitor is: ``samples`` (all, each naming its worker) and ``latest`` (the busiest
    worker's most recent second, for the live line)."""

    def __init__(self) -> None:
        self.samples: list[MonitorSample] = []
        self._latest: dict[int | str | None, MonitorSample] = {}

    def add(self, sample: MonitorSample) -> None:
        self.samples.append(sample)
        self._latest[sample.worker] = sample

    @property
    def latest(self) -> MonitorSample | None:
        if not self._latest:
            return None
        return max(self._latest.values(), key=lambda m: (m.lag_p99_ms, m.cpu_pct))

    def owns(self, task: "asyncio.Task[object]") -> bool:
        return False


def with_clock(mon: dict[str, Any], clock: str) -> dict[str, Any]:
    """``busy()``'s verdict with where a stamp on ``clock`` (client.rxstamp.KERNEL or READ,
    run.json's environment.stamp_clock) may still be late."""
    from llmbench.client.rxstamp import late_where
    return {**mon, "stamp_late": late_where(clock)}


def with_send_delay(mon: dict[str, Any], p50_ms: float | None, p99_ms: float | None,
                    limit_ms: float = SEND_DELAY_P99_LIMIT_MS) -> dict[str, Any]:
    """``busy()``'s verdict with the client's own send delay added: a p99 over ``limit_ms``
    makes the window untrustworthy too (``send_delay_over``), whatever the loop lag said."""
    over = p99_ms is not None and p99_ms > limit_ms
    return {**mon, "send_delay_p50_ms": p50_ms, "send_delay_p99_ms": p99_ms,
            "send_delay_limit_ms": limit_ms, "send_delay_over": over,
            "overloaded": bool(mon.get("overloaded")) or over}
