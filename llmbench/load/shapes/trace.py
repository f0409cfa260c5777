"""Trace replay: every request of a production trace starts at its own time.

Dispatch is on absolute times (t0 + due / speed), as the open loop's, so a late start never
shifts the ones after it. A record's ``scheduled`` is its trace time (for a session's later turn:
that, or the previous reply's end when it came later), so ``start - scheduled`` is how late this
generator was against the trace; the command reports it (p50/p99/max).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from llmbench.load.session import Session
from llmbench.workload import messages_for
from llmbench.workload.recording import replay_messages
from llmbench.workload.traces import TraceItem
from llmbench.load.shapes.base import Drive
from llmbench.load.shapes.user import PRUNE_EVERY, prune, sleep_or_stop

perf_counter = time.perf_counter

# epoll waits in whole milliseconds (rounded up): wake this much early and yield to the loop
# until due, so a request is not up to 1 ms late by the timer alone
SPIN_S = 0.0015
LEAD_S = 0.05      # t0 a little after now: creating the first tasks is not counted as lag


async def replay_item(session: Session, item: TraceItem, t0: float, speed: float,
                      stop: asyncio.Event) -> None:
    """A conversation's turns in order: each at its trace time, never before the previous
    reply (a person cannot answer a reply not yet read), with the real replies as history; a
    recording's turn also waits its recorded gap after the previous reply (think, tool time)."""
    replies: list[str] = []
    conv = item.conv
    ended = 0.0
    for t, due_s in enumerate(item.due_s):
        due = t0 + due_s / speed
        if t > 0:
            gap = item.gaps_s[t] if t < len(item.gaps_s) else None
            if gap is not None:          # a recording: the think or tool time it saw
                due = max(due, ended + gap / speed)
            due = max(due, perf_counter())
            if not await sleep_or_stop(stop, due - perf_counter()):
                return
        if stop.is_set() or session.stopping.is_set():
            return
        if item.recorded:       # a recording: its turns as they were sent, in their API
            step = item.recorded[t]
            msgs = replay_messages(item.recorded, t, replies)
            extra, api = step.extra or None, step.api
        else:
            msgs, extra, api = messages_for(conv, t, replies), None, None
        rec, text = await session.request(msgs, conv.turns[t], scheduled=due,
                                          conversation=conv.id, turn_index=t, lap=conv.lap,
                                          extra=extra, api=api)
        ended = perf_counter()
        if not rec.ok:
            return     # the rest of the session would be built on a reply that never came
        replies.append(text)


def copies_of(items: Sequence[TraceItem], copies: int, first_lap: int) -> list[TraceItem]:
    """A recording ``copies`` times over (ramp --trace's step): copy k's sessions are the
    recording's, each named ``<id>~<lap>`` and on lap ``first_lap + k``, so each copy begins
    with a salt of its own (workload.salt: Salt.for_lap) and is new to the server's prefix
    cache, while its own sessions share what the recording's shared (a system prompt). In
    arrival order; copies due at one time go copy by copy."""
    out = [replace(i, conv=replace(i.conv, id=f"{i.conv.id}~{first_lap + k}",
                                   lap=first_lap + k))
           for k in range(copies) for i in items]
    return sorted(out, key=lambda i: i.offset_s)   # stable: copy order kept at a tie


async def replay_user(session: Session, item: TraceItem, t0: float, speed: float,
                      stop: asyncio.Event, users_changed: Callable[[float, int], None]) -> None:
    """ramp --trace: a recorded session is a user, counted in while its turns play (the
    live view's and the timeline's users)."""
    users_changed(perf_counter(), +1)
    try:
        await replay_item(session, item, t0, speed, stop)
    finally:
        users_changed(perf_counter(), -1)


async def play(session: Session, items: Sequence[TraceItem], t0: float, speed: float,
               stop: asyncio.Event, tasks: list[asyncio.Task[None]],
               users_changed: Callable[[float, int], None] | None = None) -> None:
    """Start each item's session at t0 + its offset / speed (its turns: replay_item), the
    tasks in ``tasks``; until ``stop`` is set. ``users_changed``: told as each starts and
    ends (ramp --trace)."""
    loop = asyncio.get_running_loop()
    for item in items:
        due = t0 + item.offset_s / speed
        if not await sleep_or_stop(stop, due - perf_counter() - SPIN_S):
            return
        while perf_counter() < due:
            await asyncio.sleep(0)     # the last stretch: other tasks run, no timer rounding
        if stop.is_set() or session.stopping.is_set():
            return
        tasks.append(loop.create_task(
            replay_item(session, item, t0, speed, stop) if users_changed is None
            else replay_user(session, item, t0, speed, stop, users_changed)))
        if len(tasks) % PRUNE_EVERY == 0:
            prune(tasks)            # finished tasks are let go (user.PRUNE_EVERY)


@dataclass
class TraceReplay:
    """A trace's requests sent at their recorded times (scaled by speed)."""
    items: Sequence[TraceItem]
    speed: float = 1.0
    describe_trace: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    kind: str = "run"
    # what run.json's load config reads, as for the other shapes
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    think_s: tuple[float, float] = (0.0, 0.0)

    def offsets(self) -> list[float]:
        return [i.offset_s / self.speed for i in self.items]

    def max_in_flight(self) -> int:
        # the most conversations the trace starts within 10 s: enough connections that a
        # request never waits for one (that wait would hide as TTFT, not as dispatch lag)
        offs, peak, j = self.offsets(), 0, 0
        for i, o in enumerate(offs):
            while offs[j] < o - 10.0:
                j += 1
            peak = max(peak, i - j + 1)
        return min(max(peak, 64), 2048) + 16

    async def drive(self, d: Drive) -> float:
        tasks: list[asyncio.Task[None]] = []
        # worker processes share one t0 (the gate waits for every worker's "ready")
        t0 = perf_counter() + LEAD_S if d.gate is None else await d.gate()
        await play(d.session, self.items, t0, self.speed, d.stopping, tasks)
        if tasks:
            await asyncio.gather(*tasks)
        return t0
