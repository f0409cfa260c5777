"""One load level: a closed loop of N concurrent conversations, or an open-loop schedule."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

from llmbench.load import arrivals
from llmbench.load.session import Session
from llmbench.workload import Conversation, draw
from llmbench.load.shapes.base import Drive
from llmbench.load.shapes.user import Budget, dispatch, play, virtual_user

perf_counter = time.perf_counter


async def preconnect(session: Session, n: int) -> None:
    """Open the connections the first wave will use before the clock starts (issue 28): a
    wave of N users that all start together otherwise pays N connects in the one event loop
    between each request's start and its bytes on the wire. Clients without it (tests' fakes,
    the aiohttp transport) are left alone; a server that refuses is found by the requests."""
    pre = getattr(session.client, "preconnect", None)
    if pre is not None and n > 1 and not session.stopping.is_set():
        try:
            await pre(n)
        except (OSError, asyncio.TimeoutError):
            pass


async def run_closed(session: Session, convs: Sequence[Conversation], concurrency: int,
                     requests: int | None, duration_s: float | None, warmup: int = 0,
                     think: tuple[float, float] = (0.0, 0.0), seed: int = 0,
                     gate: Callable[[], Awaitable[float]] | None = None,
                     uids: Sequence[int] | None = None) -> float:
    """N virtual users, each starting its next conversation as soon as the last one finished.

    With neither ``requests`` nor ``duration_s``, every conversation is played once.
    Returns the perf_counter time dispatch of measured requests began. ``gate`` (worker
    processes): awaited after the warm-up, gives that time; ``uids``: the users' ids (a
    worker's share of the run's users)."""
    next_conv = 0
    once = requests is None and duration_s is None

    def take(is_warmup: bool):
        def next_one(_k: int) -> Conversation | None:
            nonlocal next_conv
            if once and not is_warmup and next_conv >= len(convs):
                return None
            c = draw(convs, next_conv)
            next_conv += 1
            return c
        return next_one

    ids = list(uids) if uids is not None else list(range(concurrency))

    def users(n: int, budget: Budget, is_warmup: bool):
        return (virtual_user(session, take(is_warmup), uid=i, think=think,
                             rng=random.Random(seed * 7919 + i), stop=session.stopping,
                             budget=budget, warmup=is_warmup, think_after=False)
                for i in ids[:n])

    if warmup > 0:
        await asyncio.gather(*users(min(concurrency, warmup), Budget(warmup, None), True))
    await preconnect(session, len(ids))
    t0 = perf_counter() if gate is None else await gate()
    budget = Budget(requests, t0 + duration_s if duration_s else None)
    await asyncio.gather(*users(concurrency, budget, False))
    return t0


async def run_open(session: Session, convs: Sequence[Conversation], offsets: Sequence[float],
                   max_concurrency: int | None, warmup: int = 0,
                   think: tuple[float, float] = (0.0, 0.0), seed: int = 0,
                   gate: Callable[[], Awaitable[float]] | None = None,
                   index: Sequence[int] | None = None, duration_s: float | None = None) -> float:
    """Start conversation i at t0 + offsets[i], whatever happened to the others (open loop).

    ``index`` (worker processes): the arrivals' numbers in the whole schedule, so a worker's
    share gets the same conversations and seeds as in one process. ``duration_s``: agent
    sessions under way stop at t0 + duration_s (their tool gaps end there: load.agent)."""
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    if warmup > 0:
        wb = Budget(warmup, None)
        await asyncio.gather(*(play(session, draw(convs, i), wb, user=None,
                                     scheduled=perf_counter(), think=think,
                                     rng=random.Random(i), warmup=True, sem=sem)
                               for i in range(warmup)))
    if max_concurrency:
        await preconnect(session, min(max_concurrency, len(offsets)))
    t0 = perf_counter() if gate is None else await gate()
    budget = Budget(len(offsets) * max(len(c.turns) for c in convs), None)
    budget.sessions_end = t0 + duration_s if duration_s else None
    tasks = await dispatch(session, offsets, lambda i: draw(convs, warmup + i),
                           stop=session.stopping, think=think, seed=seed, sem=sem, budget=budget,
                           t0=t0, index=index)
    if tasks:
        await asyncio.gather(*tasks)
    return t0


@dataclass
class ClosedLoop:
    """``concurrency`` users without think time between conversations (vLLM's
    --max-concurrency with an infinite rate)."""

    convs: Sequence[Conversation]
    concurrency: int
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    think_s: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    kind: str = "run"
    uids: tuple[int, ...] | None = None    # a worker process's users (llmbench.workers.plan)

    def max_in_flight(self) -> int:
        return max(self.concurrency, 64) + 16

    async def drive(self, d: Drive) -> float:
        return await run_closed(d.session, self.convs, self.concurrency, self.requests,
                                self.duration_s, self.warmup, self.think_s, self.seed,
                                gate=d.gate, uids=self.uids)


@dataclass
class OpenLoop:
    """Requests per second on a seeded schedule (gamma, Poisson or constant gaps)."""

    convs: Sequence[Conversation]
    rate: float
    requests: int | None = None
    duration_s: float | None = None
    burstiness: float = 1.0
    arrival: str = "gamma"
    max_concurrency: int | None = None
    warmup: int = 0
    think_s: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    kind: str = "run"
    # A worker process's share of the schedule, computed once by the coordinator: (number in
    # the whole schedule, offset) pairs (llmbench.workers.plan). None: the whole schedule.
    share: tuple[tuple[int, float], ...] | None = None

    def max_in_flight(self) -> int:
        return max(self.max_concurrency or 0, 64) + 16

    def offsets(self) -> list[float]:
        n = self.requests or max(int(self.rate * (self.duration_s or 60)), 1)
        return arrivals.schedule(n, self.rate, self.burstiness, self.seed, self.arrival)

    async def drive(self, d: Drive) -> float:
        share = self.share
        return await run_open(d.session, self.convs,
                              self.offsets() if share is None else [o for _, o in share],
                              self.max_concurrency, self.warmup, self.think_s, self.seed,
                              gate=d.gate, index=None if share is None else [i for i, _ in share],
                              duration_s=self.duration_s)
