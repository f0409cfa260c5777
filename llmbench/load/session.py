"""A run's shared state on the hot path: the client, the record log, and live counters.

Load shapes call ``Session.request``; everything it learns goes into one Record, appended to
requests.jsonl the moment the request finishes.
"""

from __future__ import annotations

import asyncio
import random
import time
from array import array
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from llmbench.client.request import Client
from llmbench.load.pacing import TurnGate
from llmbench.records.record import (CANCELLED, REFUSED_KINDS, UNMEASURED_KINDS, Record,
                                     RecordLog, clean, token_us)
from llmbench.records.store import RecordStore
from llmbench.workload import Turn
from llmbench.workload.salt import Salt

perf_counter = time.perf_counter

# how long (first token time) the live line's recent TTFTs are kept: beyond its 10 s window
RECENT_KEEP_S = 30.0
# After a connection refused or reset before any response, that user waits before trying
# again: 50 ms doubling to 1 s, each wait drawn in [half, whole] (jitter, so users do not
# retry in lock-step). Without it 4 users with no think time sent ~10,000 requests a second
# at a dead port (21,746 failure records in a 3 s outage).
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
NOT_NOW_STATUSES = (429, 503)      # answers that ask the client to come back later
# lap salts kept made (Session.lap_salt): a 3-row dataset in an hour at 30 req/s goes round
# 36,000 times, and the users are on the last lap or two
LAP_SALTS_KEPT = 64


class RecentTTFT:
    """(first token time, TTFT) pairs of the requests whose first token came in the last
    RECENT_KEEP_S seconds, oldest first: two float arrays (16 bytes a pair, where a deque of
    tuples took ~110: 4 MB at 1,300 requests a second). Iterating gives the pairs."""

    __slots__ = ("times", "values", "head")

    def __init__(self) -> None:
        self.times, self.values = array("d"), array("d")
        self.head = 0                   # pairs before it are older than the window

    def add(self, first_token: float, ttft: float) -> None:
        times = self.times
        times.append(first_token)
        self.values.append(ttft)
        head, cutoff = self.head, first_token - RECENT_KEEP_S
        while times[head] < cutoff:     # stops at the pair just added at the latest
            head += 1
        if head > 4096 and 2 * head > len(times):
            del times[:head]
            del self.values[:head]
            head = 0
        self.head = head

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self.times[self.head:], self.values[self.head:])

    def __len__(self) -> int:
        return len(self.times) - self.head


@dataclass
class Counters:
    """A target's live counts: started, done, failed, in flight, events."""
    started: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    events: int = 0
    cancelled: int = 0        # --abandon: users who gave up (not failures)

    @classmethod
    def summed(cls, counts: Iterable["Counters"]) -> "Counters":
        """Several targets' (or worker processes') counts added up."""
        total = cls()
        for c in counts:
            for k in total.__dataclass_fields__:
                setattr(total, k, getattr(total, k) + getattr(c, k))
        return total


@dataclass(eq=False)
class Session:
    """One target's client, record log and live counts for a load."""
    client: Client
    log: RecordLog | None
    run_id: str = "r"
    records: RecordStore = field(default_factory=RecordStore)
    counters: Counters = field(default_factory=Counters)
    step: int | None = None
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # for the live line (stats.recent_p95): kept by time, not by count, so at any rate it sees
    # every request the timeline sees for the same seconds
    recent_ttft: RecentTTFT = field(default_factory=RecentTTFT)
    on_record: Callable[[Record], None] | None = None
    path: str | None = None          # stamped on every record (the probe's router/direct)
    traffic_class: str | None = None     # stamped on every record (--scenario: its class)
    # what goes first in every conversation this session sends (why: workload.salt)
    salt: Salt | None = None
    _lap_salts: dict[int, Salt] = field(default_factory=dict)
    active: set[Record] = field(default_factory=set)     # in flight now
    # reply texts by request_id, kept only when asked (run --save-detailed): a long run's
    # replies would otherwise sit in memory for nothing
    texts: dict[str, str] | None = None
    _next_id: int = 0
    _secrets: tuple[str, ...] | None = None
    _ollama: bool = False              # Ollama's native API: its prompt count omits the cache
    # refused attempts in a row, by user (None: the open loop's arrivals); the backoff's draws
    _refused_in_row: dict[int | None, int] = field(default_factory=dict)
    _backoff_rng: random.Random = field(default_factory=lambda: random.Random(0))
    # --responses-state server: each user's conversation and the server's id of its last reply
    _previous: dict[int | None, tuple[str | None, str]] = field(default_factory=dict)
    # agent sessions in progress (load.agent): id -> (the ramp step it started in, its start),
    # so a ramp's drain can wait for the sessions its hold window started
    agents_open: dict[str, tuple[int | None, float]] = field(default_factory=dict)
    _next_agent: int = 0
    # at most a few request starts and finishes per event-loop turn, so a burst of them
    # never keeps arrived tokens unread (load.pacing); None: no bound (a client on virtual
    # time, whose clock no loop turn moves)
    gate: TurnGate | None = field(default_factory=TurnGate)

    def new_agent_session(self) -> str:
        """An agent session's id, unique in the run (the session's run id names the worker)."""
        self._next_agent += 1
        return f"{self.run_id}-a{self._next_agent}"

    def __post_init__(self) -> None:
        target = getattr(self.client, "target", None)
        self._secrets = target.secrets() if target is not None else ()
        self._ollama = str(getattr(target, "api", "")).startswith("ollama")
        if getattr(self.client, "_timers", True) is False:
            self.gate = None

    def lap_salt(self, lap: int) -> Salt | None:
        """The salt of a conversation drawn on pass ``lap`` through the pool (lap 0: the run's)."""
        salt = self._lap_salts.get(lap)
        if salt is None:
            if self.salt is None:
                return None
            if len(self._lap_salts) >= LAP_SALTS_KEPT:     # laps go up: the oldest go first
                del self._lap_salts[min(self._lap_salts)]
            salt = self._lap_salts[lap] = self.salt.for_lap(lap)
        return salt

    def backoff_s(self, rec: Record, user: int | None) -> float:
        """How long this request's user waits before its next attempt: 0 unless the server
        refused or dropped the connection before answering, or said "not now" (503, 429:
        llama.cpp answers 503 "Loading model" for seconds after a restart, and users with no
        think time sent 4,660 requests into those 5 s); then stamped on the record."""
        if rec.error_kind not in REFUSED_KINDS and not (
                rec.error_kind == "http_status" and rec.status in NOT_NOW_STATUSES):
            self._refused_in_row.pop(user, None)
            return 0.0
        k = self._refused_in_row.get(user, 0)
        self._refused_in_row[user] = k + 1
        wait = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** min(k, 16))
        wait *= self._backoff_rng.uniform(0.5, 1.0)
        rec.backoff_ms = round(wait * 1000.0, 3)
        return wait

    async def request(self, messages: list[dict[str, str]], turn: Turn, *, scheduled: float,
                      user: int | None = None, conversation: str | None = None,
                      turn_index: int = 0, warmup: bool = False,
                      extra: dict | None = None, agent: tuple | None = None,
                      lap: int = 0, api: str | None = None) -> tuple[Record, str]:
        """``extra``: body fields of this request only (an agent step's tools); ``agent``: an
        agent step's (session_id, step_id, parent_step_id, tool_gap_ms, step_kind), stamped on
        its record; ``lap``: the conversation's pass through the pool (its salt's: for_lap);
        ``api``: this request's API when not the target's (a recording's replay)."""
        gate = self.gate
        if gate is not None:
            slot = gate.enter()
            if slot is not None:
                await slot              # a later loop turn: the sockets are read first
        self._next_id += 1
        rec = Record(request_id=f"{self.run_id}-{self._next_id}", scheduled=scheduled, user=user,
                     conversation=conversation, turn=turn_index, step=self.step, warmup=warmup,
                     stream=self.client.params.stream, path=self.path,
                     traffic_class=self.traffic_class)
        if agent is not None:
            rec.session_id, rec.step_id, rec.parent_step_id, rec.tool_gap_ms, rec.step_kind = agent
        c = self.counters
        c.started += 1
        c.in_flight += 1
        self.active.add(rec)
        server_state = self.client.params.responses_state == "server"
        counted = turn.prompt_tokens
        salt = self.salt if not lap else self.lap_salt(lap)
        if salt:
            messages = salt.apply(messages, batch=bool(turn.batch))
            if counted is not None and turn_index == 0:
                # the client's count is of the turn's own text; the salt is part of it now
                counted += salt.tokens * (1 + len(turn.batch))
        if server_state and turn_index > 0:
            # --responses-state server: the server kept the conversation; send only the new
            # turn and name the reply it follows (a turn after a failed one sends the history)
            prev = self._previous.get(user)
            if prev is not None and prev[0] == conversation:
                messages = messages[-1:]
                extra = {**(extra or {}), "previous_response_id": prev[1]}
        try:
            text = await self.client.send(messages, turn.max_tokens, rec,
                                          prompt_tokens_client=counted, extra=extra,
                                          **({"api": api} if api is not None else {}))
        except asyncio.CancelledError:
            self._finish(rec)
            raise
        if gate is not None:
            # the record is complete (its times taken): its finish is work like a start
            slot = gate.enter()
            if slot is not None:
                try:
                    await slot
                except asyncio.CancelledError:
                    self._finish(rec)
                    raise
        if self._ollama and counted and turn_index == 0 and not turn.batch \
                and rec.cached_tokens is None and rec.ok and rec.prompt_tokens is not None \
                and rec.prompt_tokens_source == "server":
            # a first turn only: the client counts a turn's own text, not the history before it
            _ollama_cached(rec, counted)
        if server_state:
            if rec.ok and rec.response_id:
                self._previous[user] = (conversation, rec.response_id)
            else:
                self._previous.pop(user, None)
        wait = self.backoff_s(rec, user)
        self._finish(rec)
        if self.texts is not None and not warmup:
            self.texts[rec.request_id] = text
        if wait > 0 and not self.stopping.is_set():
            # the user waits here, inside its request, whatever the shape: a closed-loop user
            # sends nothing meanwhile; an open-loop arrival's task just ends later
            try:
                await asyncio.wait_for(self.stopping.wait(), wait)
            except asyncio.TimeoutError:
                pass
        return rec, text

    def _finish(self, rec: Record) -> None:
        clean(rec, self._secrets or ())    # no secret, no NaN, no negative count goes further
        c = self.counters
        self.active.discard(rec)
        c.in_flight -= 1
        c.done += 1
        if rec.error_kind == CANCELLED:
            c.cancelled += 1
        elif not rec.ok and rec.error_kind not in UNMEASURED_KINDS:   # warm-up too: the live count
            c.failed += 1
        c.events += len(rec.token_times)
        if rec.token_times:
            self.recent_ttft.add(rec.token_times[0], rec.ttft)
        us = token_us(rec)              # once, for the store and the log alike
        self.records.append(rec, us)
        if self.log is not None:
            self.log.append(rec, us)
        if self.on_record is not None:
            self.on_record(rec)


def _ollama_cached(rec: Record, counted: int) -> None:
    """Ollama's native API reports ``prompt_eval_count``, the prompt tokens it evaluated: a
    prompt it found in its cache counts only the rest (1 token for a prompt sent again). The
    client's count of the prompt's own text is at most the whole prompt (the chat template
    adds to it), so ``counted - prompt_eval_count`` is a lower bound of the tokens it had
    cached; the record then holds the whole prompt, as OpenAI-style usage does. Only a count
    under half the client's is taken for a hit: a client tokenizer that is not the model's
    differs by some percent, never by half (below that the bound claimed is 0)."""
    evaluated = rec.prompt_tokens or 0
    cached = counted - evaluated if evaluated * 2 <= counted else 0
    rec.cached_tokens = cached
    rec.prompt_tokens = (rec.prompt_tokens or 0) + cached
