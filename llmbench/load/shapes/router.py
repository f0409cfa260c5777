"""The router A/B probe: the same users through a router and straight to a backend.

Each step runs in short slices that alternate between the two paths (router first, then direct
first, and so on), so drift over time hits both equally. Each path sends conversations of the
same shape but its own text (its session's salt, workload.salt): a path never reads from the
backend's prefix cache what the other path's slice put there. A step is evaluated by ``judge``,
handed in from above (bootstrap intervals live in the statistics, not here).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from llmbench.load.eventloop import sleep_or_stop
from llmbench.load.monitor import LAG_P99_LIMIT_MS, busy
from llmbench.load.session import Session
from llmbench.records.record import Record
from llmbench.workload import Conversation, draw
from llmbench.load.shapes.base import Drive
from llmbench.load.shapes.user import virtual_user

perf_counter = time.perf_counter

PATHS = ("router", "direct")


@dataclass
class ProbeWindow:
    """What the judge sees of one step."""

    index: int
    users: int
    records: Sequence[Record]
    active_s: dict[str, float]          # seconds each path was driven (its slices only)
    monitor: dict[str, Any]             # load.monitor.busy() over the step
    # (path, start, end) of each slice, perf_counter: the intervals resample slices, so load
    # that differed between slices is not taken for overhead
    slices: list[tuple[str, float, float]] = field(default_factory=list)


async def _slice(session: Session, convs: Sequence[Conversation], users: int, seconds: float,
                 think: tuple[float, float], seed: int, offset: int,
                 uids: Sequence[int] | None = None) -> int:
    """``users`` users on one path for ``seconds`` (``uids``: a worker process's share of
    them), then their in-flight requests finish. Returns how many conversations the busiest
    user started (the next round starts after them: no conversation is sent twice on a path,
    where the second time would find the first in the backend's prefix cache)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    played = [0]

    def conv_of(uid: int) -> Callable[[int], Conversation]:
        # the same conversations on both paths in a round: a like-for-like workload
        def pick(k: int) -> Conversation:
            played[0] = max(played[0], k + 1)
            return draw(convs, offset + uid + k * users)
        return pick

    tasks = [loop.create_task(virtual_user(session, conv_of(u), uid=u, think=think,
                                           rng=random.Random(seed * 7919 + u), stop=stop))
             for u in (range(users) if uids is None else uids)]
    await sleep_or_stop(session.stopping, seconds)
    stop.set()
    await asyncio.gather(*tasks)        # in-flight requests finish before the other path runs
    return played[0]


@dataclass
class RouterAB:
    """The router probe's shape: each step through the router and straight to a backend."""
    convs: Sequence[Conversation]
    steps: list[int]
    judge: Callable[[ProbeWindow], Any] | None = None   # handed in by the command
    slice_s: float = 5.0
    rounds: int = 3
    think_s: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    lag_limit_ms: float = LAG_P99_LIMIT_MS
    on_step: Callable[[Any], None] | None = None
    results: list[Any] = field(default_factory=list)      # the judge's steps, in order
    kind: str = "probe"

    def max_in_flight(self) -> int:
        return max(self.steps) + 16

    async def drive(self, d: Drive) -> list[Any]:
        assert self.judge is not None, "a probe needs a judge for its steps"
        sessions = {p: d.sessions[p] for p in PATHS}
        offset = 0
        # which path goes first alternates round after round across steps too: with an odd
        # number of rounds a step starts with the path the step before ended with
        turn = 0
        for index, users in enumerate(self.steps):
            for s in sessions.values():
                s.step = index
            d.live.step, d.live.load, d.live.phase = index, users, "router"
            t_step = perf_counter()
            active = {p: 0.0 for p in PATHS}
            slices: list[tuple[str, float, float]] = []
            for rnd in range(self.rounds):
                order = PATHS if turn % 2 == 0 else PATHS[::-1]
                turn += 1
                used = 0
                for path in order:
                    if d.stopping.is_set():
                        break
                    d.live.phase = path
                    t_slice = perf_counter()
                    if d.remote is not None:      # the users are in worker processes
                        got = await d.remote.slice(path, users, self.slice_s, self.seed + rnd,
                                                   offset)
                    else:
                        got = await _slice(sessions[path], self.convs, users, self.slice_s,
                                           self.think_s, self.seed + rnd, offset)
                    used = max(used, int(got or 0))
                    active[path] += perf_counter() - t_slice
                    slices.append((path, t_slice, perf_counter()))
                # the next round's conversations follow this round's (both paths sent the same)
                offset += users * max(used, 1)
            if d.stopping.is_set():
                break
            mon = busy([m for m in d.monitor.samples if t_step <= m.t <= perf_counter() + 1.0],
                       self.lag_limit_ms)
            records = sessions["router"].records + sessions["direct"].records
            step = self.judge(ProbeWindow(index, users, records, active, mon, slices))
            self.results.append(step)
            if self.on_step is not None:
                self.on_step(step)
        return self.results
