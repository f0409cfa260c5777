"""The ramp: add users (or requests/s) step by step, hold, have the step judged, repeat.

The shape only drives load and cuts windows; whether a step held is decided by ``judge``, a
function handed in by the command (thresholds, summaries), so this layer never imports them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..load import arrivals
from ..load.monitor import LAG_P99_LIMIT_MS, busy
from ..records import Record
from ..workload import Conversation
from .base import Drive
from .user import dispatch, sleep_or_stop, virtual_user

perf_counter = time.perf_counter


@dataclass
class StepWindow:
    """What the judge sees of one step: its hold window, the records so far, the generator."""

    index: int
    load: float                         # users, or requests/s
    ramp_start: float
    hold_start: float
    hold_end: float
    records: Sequence[Record]
    unfinished: int
    monitor: dict[str, Any]             # load.monitor.busy() over the hold window


@dataclass
class StepResult:
    index: int
    load: float
    ramp_start: float
    hold_start: float
    hold_end: float
    summary: dict[str, Any]
    checks: list[dict[str, Any]]
    held: bool
    monitor: dict[str, Any]
    unfinished: int = 0
    state: str = "held"                 # held | over | not enough data (slo.verdict_of)
    steady: dict[str, Any] | None = None    # first vs second half of the hold (stepstats)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "load": self.load, "ramp_start": self.ramp_start,
                "hold_start": self.hold_start, "hold_end": self.hold_end, "held": self.held,
                "state": self.state, "checks": self.checks, "monitor": self.monitor,
                "unfinished": self.unfinished, "steady": self.steady,
                "summary": self.summary}


Judge = Callable[[StepWindow], StepResult]


@dataclass
class Ramp:
    convs: Sequence[Conversation]
    steps: list[float]                 # users per step (or requests/s with by="rate")
    judge: Judge | None = None         # handed in by the command before the run
    by: str = "users"
    ramp_in_s: float = 10.0
    hold_s: float = 60.0
    think_s: tuple[float, float] = (5.0, 10.0)
    keep_going: bool = False
    drain_s: float = 300.0
    burstiness: float = 1.0
    seed: int = 0
    lag_limit_ms: float = LAG_P99_LIMIT_MS     # the generator's own event-loop lag, p99
    on_step: Callable[[StepResult], None] | None = None
    results: list[StepResult] = field(default_factory=list)
    kind: str = "ramp"

    @property
    def unit(self) -> str:
        return "users" if self.by == "users" else "req/s"

    def max_in_flight(self) -> int:
        return (int(max(self.steps)) if self.by == "users" else 256) + 16

    async def drive(self, d: Drive) -> list[StepResult]:
        """Step through the plan; stop at the first step that does not hold (unless
        keep_going). ``d.live`` is updated as it goes (step, users, phase)."""
        session, live = d.session, d.live
        assert self.judge is not None, "a ramp needs a judge for its steps"
        user_stop = asyncio.Event()
        tasks: list[asyncio.Task[Any]] = []
        conv_ids = itertools.count()
        loop = asyncio.get_running_loop()

        def next_conv(_k: int) -> Conversation:
            return self.convs[next(conv_ids) % len(self.convs)]

        async def user(uid: int, delay: float) -> None:
            if not await sleep_or_stop(user_stop, delay):
                return
            live.users_changed(perf_counter(), +1)
            try:
                await virtual_user(session, next_conv, uid=uid, think=self.think_s,
                                   rng=random.Random(self.seed * 1_000_003 + uid), stop=user_stop)
            finally:
                live.users_changed(perf_counter(), -1)

        async def rate_step(rate: float, seconds: float, step: int) -> None:
            n = max(int(rate * seconds), 1)
            offsets = arrivals.schedule(n, rate, self.burstiness, self.seed + step, "gamma")
            await dispatch(session, offsets, lambda i: next_conv(i), stop=user_stop,
                           think=self.think_s, seed=self.seed, tasks=tasks)

        try:
            for index, load in enumerate(self.steps):
                session.step = index
                live.step, live.load, live.phase = index, load, "ramp-in"
                ramp_start = perf_counter()
                rate_task = None
                if self.by == "users":
                    new = int(load) - len(tasks)
                    for k in range(max(new, 0)):
                        tasks.append(loop.create_task(
                            user(len(tasks), self.ramp_in_s * k / max(new, 1))))
                else:
                    rate_task = loop.create_task(rate_step(load, self.ramp_in_s + self.hold_s,
                                                           index))
                if not await sleep_or_stop(session.stopping, self.ramp_in_s):
                    break
                hold_start = perf_counter()
                live.phase = "hold"
                if not await sleep_or_stop(session.stopping, self.hold_s):
                    break
                hold_end = perf_counter()
                live.phase = "drain"            # the window's last requests finish
                if rate_task is not None:
                    rate_task.cancel()

                def pending() -> int:
                    return sum(1 for r in session.active
                               if r.step == index and hold_start <= r.start < hold_end)
                # let the window's requests finish; users keep chatting meanwhile
                drain_deadline = perf_counter() + self.drain_s
                while perf_counter() < drain_deadline and not session.stopping.is_set():
                    if not pending():
                        break
                    await asyncio.sleep(0.05)
                mon = busy([m for m in d.monitor.samples
                            if hold_start <= m.t <= hold_end + 1.0], self.lag_limit_ms)
                result = self.judge(StepWindow(index, load, ramp_start, hold_start, hold_end,
                                               session.records, pending(), mon))
                self.results.append(result)
                if self.on_step is not None:
                    self.on_step(result)
                if not result.held and not self.keep_going:
                    break
        finally:
            live.phase = "finishing"
            user_stop.set()
            session.step = None
            if tasks:
                # in-flight requests after the last window do not count; give them a moment
                done, still = await asyncio.wait(tasks, timeout=2.0)
                for t in still:
                    t.cancel()
                await asyncio.gather(*still, return_exceptions=True)
        return self.results
