"""One load level: a closed loop of N concurrent conversations, or an open-loop schedule."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Sequence

from ..workload import Conversation, messages_for
from .session import Session

perf_counter = time.perf_counter


async def play(session: Session, conv: Conversation, budget: "_Budget | None", *,
               user: int | None, scheduled: float, think: tuple[float, float],
               rng: random.Random, warmup: bool = False, sem: asyncio.Semaphore | None = None,
               stop: asyncio.Event | None = None) -> bool:
    """Send a conversation's turns in order, each with the real replies before it.

    Returns False when a turn failed or the run is stopping (the conversation was cut short)."""
    stop = stop or session.stopping
    replies: list[str] = []
    for t in range(len(conv.turns)):
        if stop.is_set() or session.stopping.is_set() or (budget is not None and not budget.take()):
            return False
        msgs = messages_for(conv, t, replies)
        if sem is not None:
            async with sem:
                rec, text = await session.request(msgs, conv.turns[t], scheduled=scheduled,
                                                  user=user, conversation=conv.id, turn_index=t,
                                                  warmup=warmup)
        else:
            rec, text = await session.request(msgs, conv.turns[t], scheduled=scheduled, user=user,
                                              conversation=conv.id, turn_index=t, warmup=warmup)
        if not rec.ok:
            return False    # a person whose reply failed does not go on with that conversation
        replies.append(text)
        if t + 1 < len(conv.turns) and not await pause(stop, think, rng):
            return False
        scheduled = perf_counter()
    return True


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep unless told to stop meanwhile; False if stopped."""
    if seconds <= 0:
        return not stop.is_set()
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return False
    except asyncio.TimeoutError:
        return True


async def pause(stop: asyncio.Event, think: tuple[float, float], rng: random.Random) -> bool:
    """Think for a random time in the range; False if told to stop meanwhile."""
    return await sleep_or_stop(stop, rng.uniform(*think) if think[1] > 0 else 0.0)


class _Budget:
    """How many requests may still start: a count, a deadline, or both."""

    def __init__(self, requests: int | None, deadline: float | None) -> None:
        self.left = requests
        self.deadline = deadline

    def take(self) -> bool:
        if self.deadline is not None and perf_counter() >= self.deadline:
            return False
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True


async def run_closed(session: Session, convs: Sequence[Conversation], concurrency: int,
                     requests: int | None, duration_s: float | None, warmup: int = 0,
                     think: tuple[float, float] = (0.0, 0.0), seed: int = 0) -> float:
    """N workers, each starting its next conversation as soon as the last one finished.

    With neither ``requests`` nor ``duration_s``, every conversation is played once.
    Returns the perf_counter time dispatch of measured requests began."""
    next_conv = 0
    once = requests is None and duration_s is None

    def take_conv() -> Conversation:
        nonlocal next_conv
        c = convs[next_conv % len(convs)]
        next_conv += 1
        return c

    async def worker(i: int, budget: _Budget, is_warmup: bool) -> None:
        rng = random.Random(seed * 7919 + i)
        while not session.stopping.is_set():
            if budget.left is not None and budget.left <= 0:
                return
            if budget.deadline is not None and perf_counter() >= budget.deadline:
                return
            if once and not is_warmup and next_conv >= len(convs):
                return
            await play(session, take_conv(), budget, user=i, scheduled=perf_counter(),
                        think=think, rng=rng, warmup=is_warmup)

    if warmup > 0:
        wb = _Budget(warmup, None)
        await asyncio.gather(*(worker(i, wb, True) for i in range(min(concurrency, warmup))))
    t0 = perf_counter()
    budget = _Budget(requests, t0 + duration_s if duration_s else None)
    await asyncio.gather(*(worker(i, budget, False) for i in range(concurrency)))
    return t0


async def run_open(session: Session, convs: Sequence[Conversation], offsets: Sequence[float],
                   max_concurrency: int | None, warmup: int = 0,
                   think: tuple[float, float] = (0.0, 0.0), seed: int = 0) -> float:
    """Start conversation i at t0 + offsets[i], whatever happened to the others (open loop).

    With a concurrency cap, a request that waited for a free place shows it as client queue
    time (start - scheduled), never hidden."""
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    if warmup > 0:
        wb = _Budget(warmup, None)
        await asyncio.gather(*(play(session, convs[i % len(convs)], wb, user=None,
                                     scheduled=perf_counter(), think=think,
                                     rng=random.Random(i), warmup=True, sem=sem)
                               for i in range(warmup)))
    loop = asyncio.get_running_loop()
    t0 = perf_counter()
    budget = _Budget(len(offsets) * max(len(c.turns) for c in convs), None)
    tasks = []
    for i, off in enumerate(offsets):
        due = t0 + off
        delay = due - perf_counter()
        if delay > 0:
            try:
                await asyncio.wait_for(session.stopping.wait(), delay)
                break
            except asyncio.TimeoutError:
                pass
        if session.stopping.is_set():
            break
        conv = convs[(warmup + i) % len(convs)]
        tasks.append(loop.create_task(play(session, conv, budget, user=None, scheduled=due,
                                            think=think, rng=random.Random(seed * 7919 + i),
                                            sem=sem)))
    if tasks:
        await asyncio.gather(*tasks)
    return t0
