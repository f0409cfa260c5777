"""The ramp: add users (or requests/s) step by step, hold, have the step judged, repeat.

The shape only drives load and cuts windows; whether a step held is decided by ``judge``,
handed in by the command (why: shapes.base).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from llmbench.load import arrivals
from llmbench.load.monitor import LAG_P99_LIMIT_MS, busy
from llmbench.load.session import Session
from llmbench.records.definitions import started_in
from llmbench.records.record import Record
from llmbench.workload import Conversation, draw
from llmbench.load.shapes.base import Drive
from llmbench.load.shapes.pace import FixedSteps, JudgedStep, Pacer, StepPlan
from llmbench.load.shapes.trace import LEAD_S, copies_of, play
from llmbench.load.shapes.user import dispatch, sleep_or_stop, virtual_user
from llmbench.workload.traces import TraceItem

perf_counter = time.perf_counter


class Leaving:
    """Users and open-loop conversations told to stop that are still finishing a request: the
    ramp's crowd and the class crowd (shapes.classes.MixedCrowd) count, start and end them
    alike."""

    def __init__(self, users_changed: Callable[[float, int], None]) -> None:
        self.users_changed = users_changed
        self.user_stop = asyncio.Event()
        self.tasks: list[asyncio.Task[Any]] = []
        self._leaving: list[asyncio.Task[Any]] = []
        # the open-loop conversations of the current rate step, and what ends them
        self._rate_stop = asyncio.Event()
        self._rate_plays: list[asyncio.Task[Any]] = []

    def _end_rate_plays(self) -> None:
        self._rate_stop.set()
        self._leaving += [t for t in self._rate_plays if not t.done()]
        self._rate_stop = asyncio.Event()
        self._rate_plays = []

    async def leaving(self) -> int:
        """Users (and conversations) told to stop that are still finishing a request."""
        self._leaving = [t for t in self._leaving if not t.done()]
        return len(self._leaving)

    async def cancel_leaving(self) -> None:
        for t in self._leaving:
            t.cancel()
        await asyncio.gather(*self._leaving, return_exceptions=True)
        self._leaving = []

    async def _chat(self, session: Session, next_conv: Callable[[int], Conversation], uid: int,
                    at: float, stop: asyncio.Event, think_s: tuple[float, float], seed: int,
                    join: str) -> None:
        """One user: comes in at ``at`` (unless stopped first) and chats until ``stop``."""
        if not await sleep_or_stop(stop, at - perf_counter()):
            return
        self.users_changed(perf_counter(), +1)
        try:
            await virtual_user(session, next_conv, uid=uid, think=think_s,
                               rng=random.Random(seed * 1_000_003 + uid),
                               stop=stop, mid=join == "spread")
        finally:
            self.users_changed(perf_counter(), -1)

    async def _wait_out(self, stops: Sequence[asyncio.Event]) -> None:
        """The end: every user and conversation stopped; what is still in flight after the
        last window does not count, and gets a moment to finish before it is cancelled."""
        self.user_stop.set()
        self._rate_stop.set()
        for stop in stops:
            stop.set()
        self.stop_rate()
        every = self.tasks + self._rate_plays + self._leaving
        if every:
            done, still = await asyncio.wait(every, timeout=2.0)
            for t in still:
                t.cancel()
            await asyncio.gather(*still, return_exceptions=True)

    def stop_rate(self) -> None:
        raise NotImplementedError


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
    active: Sequence[Record] = ()       # requests in flight (asked during the hold: settle)


Judge = Callable[[StepWindow], JudgedStep]


@dataclass
class Ramp:
    """Users (or a rate) added step by step: its steps, or --find's pacer's, until a threshold
    breaks (or every step, with --keep-going)."""
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
    # what runs next (pace.py); None: the fixed list above (``steps``, ``keep_going``)
    pacer: Pacer | None = None
    # how a step's new users join: "start" (each at turn 0 of a new conversation, evenly over
    # the ramp-in) or "spread" (each at a random turn of its conversation with the history
    # filled, at random times over the ramp-in: the mix a server sees in steady state)
    join: str = "start"
    # told of each step's plan as it begins (the console says why a search step runs)
    on_plan: Callable[[int, StepPlan], None] | None = None
    # awaited before a step's users come in (--reset-cache: specs/reset.py)
    before_step: Callable[[int], Awaitable[None]] | None = None
    # ramp --trace: a recording's sessions are the users; a step of ``load`` users replays the
    # recording load / len(trace) times over on its recorded times (at ``trace_speed``)
    trace: Sequence[TraceItem] | None = None
    trace_speed: float = 1.0
    # a search's step ends its hold early once its checks are settled (analysis.settle, handed
    # in by the command): asked every ``settle_every_s`` with the window so far and why the
    # step runs (pace.WHYS), and once more when the hold runs out (``final``: it then says what
    # the checks stood at); what it returns (``ended``, ``text``) is kept by step index
    settle: Callable[..., Any] | None = None
    settle_every_s: float = 0.5
    settled: dict[int, Any] = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return "users" if self.by == "users" else "req/s"

    def describe_trace(self) -> dict[str, Any]:
        """run.json's config.ramp for --trace: the recorded sessions, each step's multiple of
        them (its load in users / the sessions), the speed; nothing without a trace."""
        if self.trace is None:
            return {}
        n = len(self.trace)
        return {"trace": {"sessions": n, "multiples": [round(x / n) for x in self.steps],
                          "speed": self.trace_speed}}

    def trace_lines(self) -> list[str]:
        """--trace: what a step's users are, said before the table."""
        d = self.describe_trace().get("trace")
        if d is None:
            return []
        n = d["sessions"]
        speed = f", {d['speed']:g}x as fast" if d["speed"] != 1 else ""
        return [f"Each step replays the recording's {n} session{'s' * (n != 1)} k times over "
                f"(k = {', '.join(map(str, d['multiples']))}),",
                f"each copy salted apart, on the recorded times{speed}: a step's users are "
                f"k x {n}."]

    def pace(self) -> Pacer:
        if self.pacer is None:
            self.pacer = FixedSteps(self.steps, self.ramp_in_s, self.hold_s, self.keep_going,
                                    # a recording's step is played once: holding it
                                    # longer would add no requests
                                    extend=self.by == "users" and self.trace is None)
        return self.pacer

    def peak_load(self) -> float:
        """The most load any step may have: the fixed list's top, or the search's ceiling."""
        return self.pace().peak()

    def rate_offsets(self, index: int, rate: float, span_s: float | None = None) -> list[float]:
        """A rate step's arrivals from its start: over the whole ramp-in and hold, not
        stretched to a count, so the hold window gets rate x hold of them on average."""
        span = self.ramp_in_s + self.hold_s if span_s is None else span_s
        return arrivals.covering(rate, span, self.burstiness, self.seed + index)

    def max_in_flight(self) -> int:
        return (int(self.peak_load()) if self.by == "users" else 256) + 16

    def crowd(self, d: Drive) -> "Crowd":
        return Crowd(d.session, self.convs, self.think_s, self.seed, self.burstiness,
                     d.live.users_changed, self.join)

    def join_times(self, index: int, first_uid: int, new: int, ramp_start: float,
                   ramp_in_s: float) -> list[tuple[int, float]]:
        """(user id, when it comes in) of a step's new users: evenly over the ramp-in, or
        (``spread``) one at a random time in each equal slice of it: no lock-step grid."""
        if self.join == "spread":
            rng = random.Random(self.seed * 7_919 + index)
            return [(first_uid + k, ramp_start + ramp_in_s * (k + rng.random()) / new)
                    for k in range(new)]
        return [(first_uid + k, ramp_start + ramp_in_s * k / max(new, 1)) for k in range(new)]

    async def drive(self, d: Drive) -> list[Any]:
        """Run the pacer's steps; each is brought in (users added, or removed: the newest
        first, each after its request in flight; or the rate's arrivals), held, drained and
        judged, and the pacer says what comes next. The users live in a Crowd: here, or spread
        over worker processes (``d.remote``, llmbench.workers); the steps are decided here."""
        live = d.live
        assert self.judge is not None, "a ramp needs a judge for its steps"
        crowd = d.remote if d.remote is not None else self.crowd(d)
        stopping = d.stopping
        pacer = self.pace()
        users: list[int] = []             # ids of the users in, oldest first
        next_uid = 0
        rate_now: float | None = None
        index = -1
        t_first: float | None = None
        ramp_start = hold_start = hold_end = 0.0
        plan = pacer.first()
        try:
            while plan is not None:
                if plan.extend and index >= 0:
                    # the step just judged holds longer: its window grows, same index (held
                    # in full: how its first hold ended no longer says how the window did)
                    self.settled.pop(index, None)
                    live.phase = "hold"
                    if self.on_plan is not None:
                        self.on_plan(index, plan)
                    if self.by != "users" and plan.load:
                        crowd.start_rate(index, self.rate_offsets(index, plan.load, plan.hold_s),
                                         perf_counter())
                    if not await sleep_or_stop(stopping, plan.hold_s):
                        break
                    hold_end = perf_counter()
                else:
                    index += 1
                    crowd.set_step(index)
                    load = plan.load
                    live.step, live.load, live.phase = index, load, "ramp-in"
                    ramp_start = perf_counter()
                    t_first = ramp_start if t_first is None else t_first
                    if self.on_plan is not None:
                        self.on_plan(index, plan)
                    if self.before_step is not None:
                        await self.before_step(index)
                    ramp_in_s = plan.ramp_in_s
                    if self.trace is not None:
                        # the sessions of the step before end after their turn in flight;
                        # this step's copies start with its hold window (below)
                        await crowd.end_conversations()
                    elif self.by == "users":
                        users, next_uid, ramp_in_s = await self._users_to(
                            crowd, int(load), users, next_uid, index, ramp_start, plan)
                    else:
                        if self.pacer is not None and not isinstance(self.pacer, FixedSteps) \
                                and rate_now is not None:
                            # a search's step holds its own rate only: the conversations earlier
                            # steps started end after their turn in flight
                            await crowd.end_conversations()
                        crowd.start_rate(index, self.rate_offsets(index, load,
                                                                  plan.ramp_in_s + plan.hold_s),
                                         perf_counter())
                        rate_now = load
                    if not await sleep_or_stop(stopping, ramp_in_s):
                        break
                    leave_by = perf_counter() + self.drain_s
                    while not stopping.is_set() and await crowd.leaving():
                        if perf_counter() >= leave_by:
                            await crowd.cancel_leaving()
                            break
                        await asyncio.sleep(0.05)
                    if stopping.is_set():
                        break
                    hold_start = perf_counter()
                    if self.trace is not None:
                        crowd.start_trace(self.trace, round(load / len(self.trace)),
                                          self.trace_speed, hold_start + LEAD_S)
                    live.phase = "hold"
                    if not await self._hold(d, crowd, index, plan, ramp_start, hold_start):
                        break
                    # a recording's step holds until its copies have played out (replies
                    # slower than recorded push later turns past the recording's length)
                    until = perf_counter() + self.drain_s
                    while self.trace is not None and not stopping.is_set() \
                            and perf_counter() < until and await crowd.playing():
                        await asyncio.sleep(0.05)
                    hold_end = perf_counter()
                live.phase = "drain"            # the window's last requests finish
                result = self.judge(await self._window(d, crowd, index, plan.load, ramp_start,
                                                       hold_start, hold_end))
                if plan.extend and self.results:
                    self.results[-1] = result
                else:
                    self.results.append(result)
                if self.on_step is not None:
                    self.on_step(result)
                assert t_first is not None
                plan = pacer.after(result, perf_counter() - t_first)
        finally:
            live.phase = "finishing"
            await crowd.finish()
        return self.results

    async def _window(self, d: Drive, crowd: Any, index: int, load: float, ramp_start: float,
                      hold_start: float, hold_end: float) -> StepWindow:
        """The step's window once its requests have finished (the drain; users keep chatting
        meanwhile), with the load generator's state over the hold."""
        crowd.stop_rate()
        drain_deadline = perf_counter() + self.drain_s
        while perf_counter() < drain_deadline and not d.stopping.is_set():
            if not await crowd.pending(index, hold_start, hold_end):
                break
            await asyncio.sleep(0.05)
        mon = busy([m for m in d.monitor.samples
                    if hold_start <= m.t <= hold_end + 1.0], self.lag_limit_ms)
        return StepWindow(index, load, ramp_start, hold_start, hold_end, crowd.records,
                          await crowd.pending(index, hold_start, hold_end), mon)

    async def _users_to(self, crowd: Any, want: int, users: list[int], next_uid: int,
                        index: int, ramp_start: float, plan: StepPlan
                        ) -> tuple[list[int], int, float]:
        """Bring the crowd to ``want`` users: (the users in, the next id, the ramp-in to wait).
        New users join over the ramp-in; when fewer are wanted the newest leave, each once its
        request in flight is answered (never cut: a cut request is a failure the server did
        not cause), and are gone before the hold window opens. A search stepping down has no
        ramp-in: nobody joins, and the users who stay are in their stride already."""
        if want > len(users):
            new = want - len(users)
            await crowd.add_users(self.join_times(index, next_uid, new, ramp_start,
                                                  plan.ramp_in_s))
            return users + list(range(next_uid, next_uid + new)), next_uid + new, \
                plan.ramp_in_s
        if want < len(users):
            await crowd.remove_users(users[want:])
            return users[:want], next_uid, \
                0.0 if not isinstance(self.pace(), FixedSteps) else plan.ramp_in_s
        return users, next_uid, plan.ramp_in_s

    async def _hold(self, d: Drive, crowd: Any, index: int, plan: StepPlan, ramp_start: float,
                    hold_start: float) -> bool:
        """Hold the step ``plan.hold_s``, or less once ``settle`` says its checks are settled
        (users in this process only: the requests in flight are read). False: stopped."""
        session = getattr(crowd, "session", None)
        if self.settle is None or session is None or self.by != "users" \
                or self.trace is not None:
            return await sleep_or_stop(d.stopping, plan.hold_s)
        end = hold_start + plan.hold_s
        store = crowd.records
        # the requests that finish from now on, read as they come (a request of the hold
        # window finishes after it opened): each ask costs the new records, not the run's
        first, window = len(store), []
        while True:
            left = end - perf_counter()
            if left > 0 and not await sleep_or_stop(d.stopping,
                                                    min(self.settle_every_s, left)):
                return False
            now = perf_counter()
            window += [store[i] for i in range(first + len(window), len(store))]
            # the hold ran out: asked once more (``final``: see ``settle`` above)
            got = self.settle(StepWindow(index, plan.load, ramp_start, hold_start, now,
                                         window, 0, {}, list(session.active)), plan.why,
                              now >= end)
            if got is not None or now >= end:
                self.settled[index] = got
                return True


class Crowd(Leaving):
    """The ramp's users and arrivals in one process: added step by step, removed (the newest
    first, after their request in flight) when a search steps down, stopped at the end. A
    worker process runs one for its share (llmbench.workers), the coordinator's steps calling
    the same methods through messages. Times are this process's perf_counter."""

    def __init__(self, session: Session, convs: Sequence[Conversation],
                 think_s: tuple[float, float], seed: int, burstiness: float,
                 users_changed: Callable[[float, int], None], join: str = "start") -> None:
        super().__init__(users_changed)
        self.session = session
        self.convs = convs
        self.think_s = think_s
        self.seed = seed
        self.burstiness = burstiness
        self.join = join
        self.rate_task: asyncio.Task[None] | None = None
        self._conv_ids = itertools.count()
        self._stops: dict[int, asyncio.Event] = {}            # each user's own
        self._user_tasks: dict[int, asyncio.Task[Any]] = {}
        self._trace_laps = 0          # ramp --trace: the laps its copies have used

    @property
    def records(self) -> Sequence[Record]:
        return self.session.records

    def next_conv(self, _k: int) -> Conversation:
        return draw(self.convs, next(self._conv_ids))

    def set_step(self, index: int | None) -> None:
        self.session.step = index

    async def add_users(self, users: list[tuple[int, float]]) -> None:
        """Users (id, when it comes in) join and chat until removed or the end."""
        loop = asyncio.get_running_loop()
        for uid, at in users:
            self._stops[uid] = asyncio.Event()
            task = loop.create_task(self._user(uid, at))
            self._user_tasks[uid] = task
            self.tasks.append(task)

    async def remove_users(self, uids: Sequence[int]) -> None:
        """These users stop: one thinking leaves now, one waiting for a reply leaves once it
        is answered (``leaving`` counts them until then)."""
        for uid in uids:
            stop = self._stops.pop(uid, None)
            if stop is not None:
                stop.set()
            task = self._user_tasks.pop(uid, None)
            if task is not None and not task.done():
                self._leaving.append(task)

    async def end_conversations(self) -> None:
        """The open-loop conversations started so far end after their turn in flight."""
        self._end_rate_plays()

    async def _user(self, uid: int, at: float) -> None:
        await self._chat(self.session, self.next_conv, uid, at, self._stops[uid], self.think_s,
                         self.seed, self.join)

    def start_rate(self, step: int, offsets: Sequence[float], t0: float,
                   index: Sequence[int] | None = None) -> None:
        """Arrivals at t0 + offsets (a worker's share: ``index``, their numbers)."""
        self.stop_rate()
        self.rate_task = asyncio.get_running_loop().create_task(
            dispatch(self.session, offsets, self.next_conv, stop=self._rate_stop,
                     think=self.think_s, seed=self.seed, tasks=self._rate_plays, t0=t0,
                     index=index))

    def start_trace(self, items: Sequence[TraceItem], copies: int, speed: float,
                    t0: float) -> None:
        """ramp --trace: the recording ``copies`` times over from t0, each copy on laps of
        its own (never one an earlier step used: its prompts would be in the server's cache)."""
        self.stop_rate()
        first, self._trace_laps = self._trace_laps, self._trace_laps + copies
        self.rate_task = asyncio.get_running_loop().create_task(
            play(self.session, copies_of(items, copies, first), t0, speed,
                 self._rate_stop, self._rate_plays, self.users_changed))

    async def playing(self) -> int:
        """ramp --trace: the sessions of the step's copies still playing (and 1 while some
        are still to start)."""
        waiting = self.rate_task is not None and not self.rate_task.done()
        return int(waiting) + sum(1 for t in self._rate_plays if not t.done())

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
        self.session.step = None
        await self._wait_out(list(self._stops.values()))
