"""The one virtual user and the one open-loop dispatcher every load shape is built on.

A virtual user chats like a person: picks a conversation, sends a turn, reads the whole reply,
thinks, sends the next turn with the real history. The dispatcher starts conversations on a
precomputed schedule (absolute times, so it never drifts), whatever happened to the others.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Callable, Sequence

from llmbench.load.agent import play_agent
from llmbench.load.session import Session
from llmbench.workload import Conversation, messages_for
from llmbench.workload.agents import is_agent
from llmbench.workload.words import WORDS
from llmbench.load.eventloop import sleep_or_stop

perf_counter = time.perf_counter

# a turn that asks no reply length (a dataset that gives none): its synthetic reply's words
DEFAULT_REPLY_WORDS = 128


def synthetic_reply(max_tokens: int | None, rng: random.Random) -> str:
    """The text of a reply the server never gave (``--join spread``'s history): as many of
    the common one-token words as the turn asks tokens, so the prompt carries about the
    length the real reply would have had."""
    n = max_tokens if max_tokens and max_tokens > 0 else DEFAULT_REPLY_WORDS
    return " ".join(rng.choice(WORDS) for _ in range(n))


def mid_conversation(conv: Conversation, rng: random.Random) -> tuple[int, list[str]]:
    """Where a user who joins a conversation already under way is (``--join spread``): a turn
    drawn uniformly, and the replies before it, synthetic (the server never produced them), so
    the first request carries the whole history a person at that turn would send (an agent
    session's: load.agent.play_agent)."""
    if len(conv.turns) <= 1 or conv.turns[0].batch:
        return 0, []
    t = rng.randrange(len(conv.turns))
    return t, [synthetic_reply(conv.turns[i].max_tokens, rng) for i in range(t)]


async def play(session: Session, conv: Conversation, budget: "Budget | None", *,
               user: int | None, scheduled: float, think: tuple[float, float],
               rng: random.Random, warmup: bool = False, sem: asyncio.Semaphore | None = None,
               stop: asyncio.Event | None = None, start_turn: int = 0,
               history: list[str] | None = None) -> bool:
    """Send a conversation's turns in order, each with the real replies before it (from
    ``start_turn`` on, after the replies in ``history``: a user who joined mid-conversation).

    Returns False when a turn failed or the run is stopping (the conversation was cut short).
    An agent session (workload.agents) is played by the agent loop (load.agent) instead."""
    if is_agent(conv):
        return await play_agent(session, conv, budget, user=user,  # type: ignore[arg-type]
                                scheduled=scheduled, warmup=warmup, sem=sem, stop=stop,
                                start_step=start_turn, history=history)
    stop = stop or session.stopping
    replies: list[str] = list(history or [])
    for t in range(start_turn, len(conv.turns)):
        if stop.is_set() or session.stopping.is_set() or (budget is not None and not budget.take()):
            return False
        msgs = messages_for(conv, t, replies)
        if sem is not None:
            async with sem:
                rec, text = await session.request(msgs, conv.turns[t], scheduled=scheduled,
                                                  user=user, conversation=conv.id, turn_index=t,
                                                  warmup=warmup, lap=conv.lap)
        else:
            rec, text = await session.request(msgs, conv.turns[t], scheduled=scheduled, user=user,
                                              conversation=conv.id, turn_index=t, warmup=warmup,
                                              lap=conv.lap)
        if not rec.ok:
            return False    # a person whose reply failed does not go on with that conversation
        replies.append(text)
        if t + 1 < len(conv.turns) and not await pause(stop, think, rng):
            return False
        scheduled = perf_counter()
    return True


async def pause(stop: asyncio.Event, think: tuple[float, float], rng: random.Random) -> bool:
    """Think for a random time in the range; False if told to stop meanwhile."""
    return await sleep_or_stop(stop, rng.uniform(*think) if think[1] > 0 else 0.0)


class Budget:
    """How many requests may still start: a count, a deadline, or both."""

    def __init__(self, requests: int | None, deadline: float | None) -> None:
        self.left = requests
        self.deadline = deadline
        # when agent sessions under way stop (load.agent): the deadline, or an open loop's
        # end of --duration (whose own requests are sized by the schedule, not a deadline)
        self.sessions_end: float | None = None

    def take(self) -> bool:
        """One more request may start (before the deadline, within the count)."""
        if self.deadline is not None and perf_counter() >= self.deadline:
            return False
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def spent(self) -> bool:
        """Nothing more may start (checked before picking a conversation)."""
        if self.left is not None and self.left <= 0:
            return True
        return self.deadline is not None and perf_counter() >= self.deadline


async def virtual_user(session: Session, next_conv: Callable[[int], Conversation | None], *,
                       uid: int, think: tuple[float, float], rng: random.Random,
                       stop: asyncio.Event, budget: Budget | None = None, warmup: bool = False,
                       think_after: bool = True, mid: bool = False) -> None:
    """One user: plays conversations until told to stop, the budget is spent, or ``next_conv``
    has none left (None). ``next_conv(k)`` gets how many conversations this user played so
    far. ``think_after``: the user also thinks between conversations (a person does; the
    vLLM-style fixed level sends the next one at once). ``mid``: the first conversation is
    joined at a random turn, its history filled (``mid_conversation``)."""
    k = 0
    while not stop.is_set() and not session.stopping.is_set():
        if budget is not None and budget.spent():
            return
        conv = next_conv(k)
        if conv is None:
            return
        start, history = mid_conversation(conv, rng) if mid and k == 0 else (0, [])
        k += 1
        await play(session, conv, budget, user=uid, scheduled=perf_counter(), think=think,
                   rng=rng, warmup=warmup, stop=stop, start_turn=start, history=history)
        if think_after and not await pause(stop, think, rng):
            return


# A finished Task keeps about 650 bytes (the task and its finished coroutine): an open loop that
# kept every one held 70 MB an hour at 30 req/s, 1.6 kB a record in all where the records
# themselves take 0.1-0.4. Every this many starts, the finished ones are let go.
PRUNE_EVERY = 256


def prune(tasks: list[asyncio.Task[Any]]) -> None:
    """Drop the finished tasks, in place; one that raised stays, so that gathering what is
    left raises it as it did."""
    tasks[:] = [t for t in tasks
                if not t.done() or (not t.cancelled() and t.exception() is not None)]


async def dispatch(session: Session, offsets: Sequence[float], conv_for: Callable[[int], Conversation],
                   *, stop: asyncio.Event, think: tuple[float, float], seed: int,
                   sem: asyncio.Semaphore | None = None, budget: Budget | None = None,
                   tasks: list[asyncio.Task[bool]] | None = None,
                   t0: float | None = None,
                   index: Sequence[int] | None = None) -> list[asyncio.Task[bool]]:
    """Open loop: start conversation i at t0 + offsets[i] (t0: now), until ``stop`` is set.

    With a concurrency cap (``sem``), a request that waited for a free place shows it as client
    queue time (start - scheduled), never hidden. Started tasks go into ``tasks`` (returned).
    ``index``: each arrival's number in the whole schedule (a worker process's share), which
    picks its conversation and seed; default 0, 1, 2..."""
    loop = asyncio.get_running_loop()
    tasks = tasks if tasks is not None else []
    t0 = perf_counter() if t0 is None else t0
    for k, off in enumerate(offsets):
        i = index[k] if index is not None else k
        due = t0 + off
        if not await sleep_or_stop(stop, due - perf_counter()):
            break
        if session.stopping.is_set():
            break
        tasks.append(loop.create_task(play(session, conv_for(i), budget, user=None, scheduled=due,
                                           think=think, rng=random.Random(seed * 7919 + i),
                                           sem=sem, stop=stop)))
        if k % PRUNE_EVERY == PRUNE_EVERY - 1:
            prune(tasks)
    return tasks
