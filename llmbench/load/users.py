"""Virtual users and the ramp's steps: add users, hold, evaluate the hold window, repeat.

Each user chats like a person: picks a conversation, sends a turn, reads the whole reply,
thinks, sends the next turn with the real history. When the server slows down, users slow down
too (a closed loop), which the report says.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..metrics import summarize
from ..records import Record
from ..slo import HELD, Threshold, check_all, verdict_of, within_requests
from ..workload import Conversation
from . import arrivals
from .fixed import pause, play, sleep_or_stop
from .monitor import LAG_P99_LIMIT_MS, LoopMonitor, busy
from .session import Session

perf_counter = time.perf_counter


@dataclass
class RampPlan:
    steps: list[float]                 # users per step (or requests/s with by="rate")
    by: str = "users"
    ramp_in_s: float = 10.0
    hold_s: float = 60.0
    think_s: tuple[float, float] = (5.0, 10.0)
    thresholds: list[Threshold] = field(default_factory=list)
    keep_going: bool = False
    drain_s: float = 300.0
    burstiness: float = 1.0
    seed: int = 0
    stall_s: float = 1.0
    lag_limit_ms: float = LAG_P99_LIMIT_MS     # the generator's own event-loop lag, p99


@dataclass
class StepResult:
    index: int
    load: float                         # users, or requests/s
    ramp_start: float
    hold_start: float
    hold_end: float
    summary: dict[str, Any]
    checks: list[dict[str, Any]]
    held: bool
    monitor: dict[str, Any]
    unfinished: int = 0
    state: str = "held"                 # held | over | not enough data (slo.verdict_of)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "load": self.load, "ramp_start": self.ramp_start,
                "hold_start": self.hold_start, "hold_end": self.hold_end, "held": self.held,
                "state": self.state, "checks": self.checks, "monitor": self.monitor,
                "unfinished": self.unfinished,
                "summary": self.summary}


def window_records(records: Sequence[Record], step: int, start: float, end: float) -> list[Record]:
    """A step's numbers come from the requests that started in its hold window."""
    return [r for r in records if r.step == step and start <= r.start < end and not r.warmup]


def evaluate(records: Sequence[Record], index: int, load: float, ramp_start: float,
             hold_start: float, hold_end: float, thresholds: list[Threshold],
             monitor_samples: list[Any], stall_s: float = 1.0, unfinished: int = 0,
             lag_limit_ms: float = LAG_P99_LIMIT_MS) -> StepResult:
    """Pure: a step's summary and threshold checks from its records."""
    recs = window_records(records, index, hold_start, hold_end)
    s = summarize(recs, t0=hold_start, t_end=hold_end, stall_s=stall_s,
                  within=within_requests(thresholds))
    checks = check_all(thresholds, s)
    if not recs:
        checks.append({"threshold": "requests>0", "ok": False, "actual": 0, "limit": 0,
                       "metric": "requests", "stat": None, "insufficient": True,
                       "reason": "not enough data: no request started in the hold window",
                       "text": "requests>0: no request started in the hold window"})
    state = verdict_of(checks)
    mon = busy([m for m in monitor_samples if hold_start <= m.t <= hold_end + 1.0], lag_limit_ms)
    return StepResult(index, load, ramp_start, hold_start, hold_end, s, checks, state == HELD,
                      mon, unfinished, state)


async def run_ramp(session: Session, convs: Sequence[Conversation], plan: RampPlan,
                   monitor: LoopMonitor, on_step: Callable[[StepResult], None] | None = None,
                   state: dict[str, Any] | None = None) -> list[StepResult]:
    """Step through the plan; stop at the first step that does not hold (unless keep_going).

    ``state`` is updated live (current step, users) for the progress line and the timeline."""
    state = state if state is not None else {}
    state.setdefault("user_changes", [])      # (perf time, users) for the timeline
    results: list[StepResult] = []
    user_stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    conv_ids = itertools.count()
    loop = asyncio.get_running_loop()

    async def user(uid: int, delay: float) -> None:
        rng = random.Random(plan.seed * 1_000_003 + uid)
        if not await sleep_or_stop(user_stop, delay):
            return
        state["users"] = state.get("users", 0) + 1
        state["user_changes"].append((perf_counter(), state["users"]))
        try:
            while not user_stop.is_set() and not session.stopping.is_set():
                conv = convs[next(conv_ids) % len(convs)]
                await play(session, conv, None, user=uid, scheduled=perf_counter(),
                           think=plan.think_s, rng=rng, stop=user_stop)
                if not await pause(user_stop, plan.think_s, rng):
                    return
        finally:
            state["users"] -= 1
            state["user_changes"].append((perf_counter(), state["users"]))

    async def arrivals_at(rate: float, seconds: float, step: int) -> None:
        n = max(int(rate * seconds), 1)
        offsets = arrivals.schedule(n, rate, plan.burstiness, plan.seed + step, "gamma")
        t0 = perf_counter()
        for i, off in enumerate(offsets):
            if not await sleep_or_stop(user_stop, t0 + off - perf_counter()):
                return
            conv = convs[next(conv_ids) % len(convs)]
            tasks.append(loop.create_task(play(session, conv, None, user=None, scheduled=t0 + off,
                                               think=plan.think_s, rng=random.Random(i),
                                               stop=user_stop)))

    try:
        for index, load in enumerate(plan.steps):
            session.step = index
            state["step"] = index
            state["load"] = load
            state["phase"] = "ramp-in"          # what the live line shows
            ramp_start = perf_counter()
            rate_task = None
            if plan.by == "users":
                target = int(load)
                new = target - len(tasks)
                for k in range(max(new, 0)):
                    delay = plan.ramp_in_s * k / max(new, 1)
                    tasks.append(loop.create_task(user(len(tasks), delay)))
                if not await sleep_or_stop(session.stopping, plan.ramp_in_s):
                    break
            else:
                rate_task = loop.create_task(arrivals_at(load, plan.ramp_in_s + plan.hold_s, index))
                if not await sleep_or_stop(session.stopping, plan.ramp_in_s):
                    break
            hold_start = perf_counter()
            state["hold_start"] = hold_start
            state["phase"] = "hold"
            if not await sleep_or_stop(session.stopping, plan.hold_s):
                break
            hold_end = perf_counter()
            state["hold_start"] = None
            state["phase"] = "drain"            # the window's last requests finish
            if rate_task is not None:
                rate_task.cancel()
            # let the window's requests finish; users keep chatting meanwhile
            drain_deadline = perf_counter() + plan.drain_s
            while perf_counter() < drain_deadline and not session.stopping.is_set():
                pending = [r for r in session.active
                           if r.step == index and hold_start <= r.start < hold_end]
                if not pending:
                    break
                await asyncio.sleep(0.05)
            unfinished = sum(1 for r in session.active
                             if r.step == index and hold_start <= r.start < hold_end)
            result = evaluate(session.records, index, load, ramp_start, hold_start, hold_end,
                              plan.thresholds, monitor.samples, plan.stall_s, unfinished,
                              plan.lag_limit_ms)
            results.append(result)
            if on_step is not None:
                on_step(result)
            if not result.held and not plan.keep_going:
                break
    finally:
        state["phase"] = "finishing"
        user_stop.set()
        session.step = None
        if tasks:
            # in-flight requests after the last window do not count; give them a moment
            done, pending = await asyncio.wait(tasks, timeout=2.0)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
    return results
