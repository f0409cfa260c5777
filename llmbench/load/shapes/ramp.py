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
from typing import Any, Callable, Protocol, Sequence

from llmbench.load import arrivals
from llmbench.load.monitor import LAG_P99_LIMIT_MS, busy
from llmbench.load.session import Session
from llmbench.records.definitions import started_in
from llmbench.records.record import Record
from llmbench.workload import Conversation
from llmbench.load.shapes.base import Drive
from llmbench.load.shapes.user import dispatch, sleep_or_stop, virtual_user

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


class JudgedStep(Protocol):
    """What the judge makes of a step (the command's: ``results.schema.Step``); the shape
    only needs to know whether it held, to stop at the first that did not."""

    held: bool


Judge = Callable[[StepWindow], JudgedStep]


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
    on_step: Callable[[Any], None] | None = None
    results: list[Any] = field(default_factory=list)       # the judge's steps, in order
    kind: str = "ramp"

    @property
    def unit(self) -> str:
        return "users" if self.by == "users" else "req/s"

    def rate_offsets(self, index: int, rate: float) -> list[float]:
        """A rate step's arrivals from its start: over the whole ramp-in and hold, not
        stretched to a count, so the hold window gets rate x hold of them on average."""
        return arrivals.covering(rate, self.ramp_in_s + self.hold_s, self.burstiness,
                                 self.seed + index)

    def max_in_flight(self) -> int:
        return (int(max(self.steps)) if self.by == "users" else 256) + 16

    def crowd(self, d: Drive) -> "Crowd":
        return Crowd(d.session, self.convs, self.think_s, self.seed, self.burstiness,
                     d.live.users_changed)

    async def drive(self, d: Drive) -> list[Any]:
        """Step through the plan; stop at the first step that does not hold (unless
        keep_going). ``d.live`` is updated as it goes (step, users, phase). The users live in
        a Crowd: here, or spread over worker processes (``d.remote``, llmbench.workers),
        while the steps are decided here either way."""
        live = d.live
        assert self.judge is not None, "a ramp needs a judge for its steps"
        crowd = d.remote if d.remote is not None else self.crowd(d)
        stopping = d.stopping
        users = 0
        try:
            for index, load in enumerate(self.steps):
                crowd.set_step(index)
                live.step, live.load, live.phase = index, load, "ramp-in"
                ramp_start = perf_counter()
                if self.by == "users":
                    new = int(load) - users
                    # user k of the step's new ones comes in at ramp_start + ramp_in * k / new
                    await crowd.add_users([(users + k, ramp_start + self.ramp_in_s * k / max(new, 1))
                                           for k in range(max(new, 0))])
                    users = max(users, int(load))
                else:
                    # arrivals over the whole ramp-in and hold, not stretched to a count: the
                    # hold window gets rate x hold of them on average (issue 31)
                    crowd.start_rate(index, self.rate_offsets(index, load), perf_counter())
                if not await sleep_or_stop(stopping, self.ramp_in_s):
                    break
                hold_start = perf_counter()
                live.phase = "hold"
                if not await sleep_or_stop(stopping, self.hold_s):
                    break
                hold_end = perf_counter()
                live.phase = "drain"            # the window's last requests finish
                crowd.stop_rate()
                # let the window's requests finish; users keep chatting meanwhile
                drain_deadline = perf_counter() + self.drain_s
                while perf_counter() < drain_deadline and not stopping.is_set():
                    if not await crowd.pending(index, hold_start, hold_end):
                        break
                    await asyncio.sleep(0.05)
                mon = busy([m for m in d.monitor.samples
                            if hold_start <= m.t <= hold_end + 1.0], self.lag_limit_ms)
                result = self.judge(StepWindow(index, load, ramp_start, hold_start, hold_end,
                                               crowd.records,
                                               await crowd.pending(index, hold_start, hold_end),
                                               mon))
                self.results.append(result)
                if self.on_step is not None:
                    self.on_step(result)
                if not result.held and not self.keep_going:
                    break
        finally:
            live.phase = "finishing"
            await crowd.finish()
        return self.results


class Crowd:
    """The ramp's users and arrivals in one process: added step by step, stopped at the end.
    A worker process runs one for its share (llmbench.workers), the coordinator's steps
    calling the same methods through messages. Times are this process's perf_counter."""

    def __init__(self, session: Session, convs: Sequence[Conversation],
                 think_s: tuple[float, float], seed: int, burstiness: float,
                 users_changed: Callable[[float, int], None]) -> None:
        self.session = session
        self.convs = convs
        self.think_s = think_s
        self.seed = seed
        self.burstiness = burstiness
        self.users_changed = users_changed
        self.user_stop = asyncio.Event()
        self.tasks: list[asyncio.Task[Any]] = []
        self.rate_task: asyncio.Task[None] | None = None
        self._conv_ids = itertools.count()

    @property
    def records(self) -> Sequence[Record]:
        return self.session.records

    def next_conv(self, _k: int) -> Conversation:
        return self.convs[next(self._conv_ids) % len(self.convs)]

    def set_step(self, index: int | None) -> None:
        self.session.step = index

    async def add_users(self, users: list[tuple[int, float]]) -> None:
        """Users (id, when it comes in) join and chat until the end."""
        loop = asyncio.get_running_loop()
        for uid, at in users:
            self.tasks.append(loop.create_task(self._user(uid, at)))

    async def _user(self, uid: int, at: float) -> None:
        if not await sleep_or_stop(self.user_stop, at - perf_counter()):
            return
        self.users_changed(perf_counter(), +1)
        try:
            await virtual_user(self.session, self.next_conv, uid=uid, think=self.think_s,
                               rng=random.Random(self.seed * 1_000_003 + uid),
                               stop=self.user_stop)
        finally:
            self.users_changed(perf_counter(), -1)

    def start_rate(self, step: int, offsets: Sequence[float], t0: float,
                   index: Sequence[int] | None = None) -> None:
        """Arrivals at t0 + offsets (a worker's share: ``index``, their numbers)."""
        self.rate_task = asyncio.get_running_loop().create_task(
            dispatch(self.session, offsets, self.next_conv, stop=self.user_stop,
                     think=self.think_s, seed=self.seed, tasks=self.tasks, t0=t0, index=index))

    def stop_rate(self) -> None:
        if self.rate_task is not None:
            self.rate_task.cancel()
            self.rate_task = None

    async def pending(self, index: int, hold_start: float, hold_end: float) -> int:
        """Requests of the step's hold window still in flight, and agent sessions that started
        in it and have not finished (a step's sessions are those: analysis.sessions)."""
        return sum(1 for r in self.session.active
                   if r.step == index and started_in(r.start, hold_start, hold_end)) + \
            sum(1 for step, t in self.session.agents_open.values()
                if step == index and started_in(t, hold_start, hold_end))

    async def finish(self) -> None:
        self.user_stop.set()
        self.session.step = None
        if self.tasks:
            # in-flight requests after the last window do not count; give them a moment
            done, still = await asyncio.wait(self.tasks, timeout=2.0)
            for t in still:
                t.cancel()
            await asyncio.gather(*still, return_exceptions=True)
