"""A ramp of several traffic classes (``--scenario``): a mixed crowd, and each class alone.

``ClassRamp`` is the ramp (llmbench/load/shapes/ramp.py) with a ``MixedCrowd``: at each step
every class gets its users (or its arrivals) as ``split`` says, each class on its own Session
(its own client, request options and record stamp, ``Record.traffic_class``; all sharing one
record store), so the judge cuts a step's window once and each class's figures are its own
records'. With ``isolate``, once the ramp stopped at a step that broke, each class is run
alone at the load it had in that step (ramp-in, hold, judged like a step): what the others
added is measured, not guessed (analysis.classes).

How the users split (``split``, pure):

- ``by="users"``: a step of N users gives each class with a share round(share x N) users, by
  largest remainder so they add up to N; a class with a floor (``min_users``) gets at least
  that many, the others' shares splitting what is left (a step below the floors' sum has the
  floors); a class with its own ``users`` keeps them at every step, one with its own ``rate``
  gets those arrivals per second at every step.
- ``by="rate"``: the shares split the step's requests per second (no rounding).
- ``grow=CLASS``: the steps are CLASS's users (its rate with ``by="rate"``); every other class
  stays at what it had at the first step of the proportional ramp (``split(steps[0])``).

A search for the limit (``--find``: search.SearchPacer) drives a ClassRamp like any ramp: the
steps are recorded as the pacer issues them (``loads(index)`` reads them); going down, each
class's newest users leave after their request in flight, and a rate step's conversations end.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from llmbench.load import arrivals
from llmbench.load.session import Session
from llmbench.load.shapes.base import Drive
from llmbench.load.shapes.pace import FixedSteps, JudgedStep, Pacer, StepPlan
from llmbench.load.shapes.ramp import Leaving, Ramp, StepWindow
from llmbench.load.shapes.user import dispatch, sleep_or_stop
from llmbench.records.record import Record
from llmbench.workload import Conversation, draw

perf_counter = time.perf_counter


@dataclass
class LoadClass:
    """One class as the load sees it: its conversations, think time, its share (or fixed
    users or rate), and the name of its Session in the Drive."""

    name: str
    convs: Sequence[Conversation]
    think_s: tuple[float, float] = (5.0, 10.0)
    share: float | None = None
    users: int | None = None
    rate: float | None = None
    session: str = "main"
    min_users: int | None = None        # a share's floor (users at every step)


@dataclass(frozen=True)
class ClassLoad:
    """What a class runs at one step: ``users`` closed-loop users, or ``rate`` arrivals/s."""

    users: int = 0
    rate: float = 0.0

    @property
    def amount(self) -> float:
        return self.rate if self.rate else self.users

    @property
    def unit(self) -> str:
        return "req/s" if self.rate else "users"

    @property
    def idle(self) -> bool:
        return self.users == 0 and self.rate == 0


def apportion(total: int, shares: Sequence[tuple[str, float]],
              floors: dict[str, int] | None = None) -> dict[str, int]:
    """``total`` whole users over named shares (summing to 1) by largest remainder, so they add
    up to ``total``; ties go to the larger share, then to the one named first. ``floors``: a
    class whose part would fall below its floor gets the floor, and the other shares (scaled
    up to 1) split what is left, until none falls below; below the floors' sum, the floors."""
    if floors:
        pinned: dict[str, int] = {}
        while True:
            rest = [(n, s) for n, s in shares if n not in pinned]
            left = total - sum(pinned.values())
            weight = sum(s for _, s in rest)
            if not rest or left <= 0 or weight <= 0:
                out = {n: 0 for n, _ in shares}
                out.update(pinned)
                return out
            scaled = [(n, s / weight) for n, s in rest]
            low = [n for n, s in scaled if floors.get(n, 0) > s * left + 1e-9]
            if not low:
                out = apportion(left, scaled)
                out.update(pinned)
                return {n: out[n] for n, _ in shares}
            for n in low:
                pinned[n] = floors[n]
    exact = [(name, s * total) for name, s in shares]
    out = {name: int(math.floor(x + 1e-9)) for name, x in exact}
    left = total - sum(out.values())
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i][1] - math.floor(exact[i][1]
                                                                                 + 1e-9)),
                                                     -shares[i][1], i))
    for i in order[:max(left, 0)]:
        out[exact[i][0]] += 1
    return out


def split(classes: Sequence[LoadClass], load: float, by: str = "users",
          grow: str | None = None, first: float | None = None) -> dict[str, ClassLoad]:
    """Each class's load at a step of ``load`` (see the module's docstring). ``first``: the
    ramp's first step, which fixes the other classes when one grows."""
    shared = [(c.name, float(c.share)) for c in classes if c.share is not None]
    floors = {c.name: int(c.min_users) for c in classes if c.share is not None and c.min_users}

    def proportional(n: float) -> dict[str, ClassLoad]:
        out: dict[str, ClassLoad] = {}
        if by == "users":
            users = apportion(int(round(n)), shared, floors) if shared else {}
            for c in classes:
                if c.share is not None:
                    out[c.name] = ClassLoad(users=users[c.name])
        else:
            for c in classes:
                if c.share is not None:
                    out[c.name] = ClassLoad(rate=n * float(c.share))
        for c in classes:
            if c.users is not None:
                out[c.name] = ClassLoad(users=int(c.users))
            elif c.rate is not None:
                out[c.name] = ClassLoad(rate=float(c.rate))
        return out
    if grow is None:
        return proportional(load)
    out = proportional(load if first is None else first)
    out[grow] = ClassLoad(users=int(round(load))) if by == "users" else ClassLoad(rate=load)
    return out


@dataclass
class _Paced:
    """A pacer as a ClassRamp runs it: a step held longer (too few requests to judge) keeps
    its fixed-rate classes' arrivals coming; with ``record`` (a search), each new step's load
    goes into the ramp's ``steps`` before the engine begins it (``loads`` reads them)."""

    pacer: Pacer
    ramp: "ClassRamp"
    record: bool

    def _seen(self, plan: StepPlan | None) -> StepPlan | None:
        if plan is not None and plan.extend:
            if self.ramp._crowd is not None:
                self.ramp._crowd.extend(plan.hold_s)
        elif plan is not None and self.record:
            self.ramp.steps.append(plan.load)
        return plan

    def first(self) -> StepPlan | None:
        if self.record:
            self.ramp.steps.clear()
        return self._seen(self.pacer.first())

    def after(self, step: JudgedStep, spent_s: float) -> StepPlan | None:
        return self._seen(self.pacer.after(step, spent_s))

    def peak(self) -> float:
        return self.pacer.peak()

    def planned(self) -> int | None:
        return self.pacer.planned()


@dataclass
class Isolated:
    """What the isolation judge gets back for one class: its name, its load and its window."""

    name: str
    load: ClassLoad
    window: StepWindow


IsolationJudge = Callable[[Isolated], Any]


@dataclass
class ClassRamp(Ramp):
    """A ramp of traffic classes; ``steps`` are the whole crowd's users (or one class's, with
    ``grow``). ``broken``: picks the step whose loads ``isolate`` runs each class alone at (the
    command's: the first that broke after the last that held); ``isolation_judge`` judges
    each isolated class; its results go to ``isolated``."""

    classes: list[LoadClass] = field(default_factory=list)
    grow: str | None = None
    isolate: bool = False
    broken: Callable[[list[Any]], Any] | None = None
    isolation_judge: IsolationJudge | None = None
    on_isolated: Callable[[Any], None] | None = None
    isolated: list[Any] = field(default_factory=list)
    isolation_note: str | None = None          # why it did not run, when asked for

    _crowd: "MixedCrowd | None" = field(default=None, init=False, repr=False)

    def loads(self, index: int) -> dict[str, ClassLoad]:
        """Each class's load at step ``index``."""
        return split(self.classes, self.steps[index], self.by, self.grow,
                     self.steps[0] if self.steps else None)

    def max_in_flight(self) -> int:
        if self.searching:
            # a search: its steps are not known before, only the most it may ask
            top = [split(self.classes, self.peak_load(), self.by, self.grow,
                         self.peak_load())]
        else:
            top = [self.loads(i) for i in range(len(self.steps))] or [{}]
        users = max(sum(x.users for x in per.values()) for per in top)
        rate = max(sum(x.rate for x in per.values()) for per in top)
        return users + (256 if rate else 0) + 16

    @property
    def searching(self) -> bool:
        """A search for the limit (--find) paces it, not a fixed list."""
        return self.pacer is not None and not isinstance(self.pacer, FixedSteps)

    def pace(self) -> Pacer:
        pacer = super().pace()
        if isinstance(pacer, FixedSteps):
            return _Paced(pacer, self, record=False) if pacer.extend else pacer
        return _Paced(pacer, self, record=True)

    def crowd(self, d: Drive) -> "MixedCrowd":
        if d.remote is not None:
            raise RuntimeError("traffic classes run in one process")
        self._crowd = MixedCrowd(self, d)
        return self._crowd

    async def drive(self, d: Drive) -> list[Any]:
        results = await super().drive(d)
        if self.isolate and not d.stopping.is_set():
            await self._isolate_all(d, results)
        return results

    # -- each class alone ------------------------------------------------------------------------
    async def _isolate_all(self, d: Drive, results: list[Any]) -> None:
        step = self.broken(results) if self.broken is not None else None
        if step is None:
            self.isolation_note = ("no step broke, so no class was run alone (--isolate "
                                   "runs each class alone at the load of the first step that "
                                   "broke)")
            return
        index = getattr(step, "index", len(results) - 1)
        loads = self.loads(index)
        for k, c in enumerate(self.classes):
            load = loads.get(c.name)
            if load is None or load.idle or d.stopping.is_set():
                continue
            got = await self._alone(d, c, load, len(self.steps) + k, index)
            if got is None:
                break
            self.isolated.append(got)
            if self.on_isolated is not None:
                self.on_isolated(got)

    async def _alone(self, d: Drive, c: LoadClass, load: ClassLoad, index: int,
                     of_step: int) -> Any:
        """One class alone at ``load``: ramp-in, hold, drain, judged (None: stopped)."""
        live, stopping = d.live, d.stopping
        crowd = MixedCrowd(self, d, only=c.name)
        try:
            crowd.set_step(index)
            # the live line names the step whose load this is
            live.step, live.load, live.phase = of_step, load.amount, f"alone: {c.name}"
            ramp_start = perf_counter()
            crowd.begin(index, {c.name: load}, ramp_start)
            if not await sleep_or_stop(stopping, self.ramp_in_s):
                return None
            hold_start = perf_counter()
            if not await sleep_or_stop(stopping, self.hold_s):
                return None
            w = await self._window(d, crowd, index, load.amount, ramp_start, hold_start,
                                   perf_counter())
            assert self.isolation_judge is not None, "--isolate needs a judge for its classes"
            return self.isolation_judge(Isolated(c.name, load, w))
        finally:
            await crowd.finish()


class MixedCrowd(Leaving):
    """The crowd of a ClassRamp in one process: each class's users and arrivals on its own
    Session, brought to the step's loads when the step begins (``set_step``); the ramp's
    own ``add_users``/``remove_users``/``start_rate`` calls (made for one crowd of one kind)
    are taken care of there. ``only``: just that class (run alone)."""

    def __init__(self, ramp: ClassRamp, d: Drive, only: str | None = None) -> None:
        super().__init__(d.live.users_changed)
        self.ramp = ramp
        self.d = d
        self.classes = [c for c in ramp.classes if only is None or c.name == only]
        self.sessions: dict[str, Session] = {c.name: d.sessions[c.session] for c in self.classes}
        self.rate_tasks: list[asyncio.Task[Any]] = []
        # each class's users in, oldest first: (id, its own stop, its task)
        self.users: dict[str, list[tuple[int, asyncio.Event, asyncio.Task[Any]]]] = {
            c.name: [] for c in self.classes}
        self._next_uid = 0
        self._conv_ids = {c.name: itertools.count() for c in self.classes}
        self._step: int | None = None
        self._loads: dict[str, ClassLoad] = {}

    @property
    def running(self) -> dict[str, int]:
        """Users in per class (told to leave: not counted)."""
        return {n: len(u) for n, u in self.users.items()}

    @property
    def records(self) -> Sequence[Record]:
        """Every class's finished requests (their sessions share one store)."""
        return next(iter(self.sessions.values())).records

    def set_step(self, index: int | None) -> None:
        for s in self.sessions.values():
            s.step = index
        self._step = index
        if index is not None and index < len(self.ramp.steps) and len(self.classes) == len(
                self.ramp.classes):
            self.begin(index, self.ramp.loads(index), perf_counter())

    def begin(self, index: int, loads: dict[str, ClassLoad], t0: float) -> None:
        """Bring each class to its load: new users spread over the ramp-in, the newest told to
        leave when there are fewer, arrivals over the ramp-in and hold (a rate step's,
        llmbench/load/shapes/ramp.py)."""
        loop = asyncio.get_running_loop()
        ramp_in = self.ramp.ramp_in_s
        self._loads = dict(loads)
        for ci, c in enumerate(self.classes):
            load = loads.get(c.name)
            if load is None:
                continue
            mine = self.users[c.name]
            new = load.users - len(mine)
            # when each comes in: as the one-crowd ramp's users do (Ramp.join_times)
            times = self.ramp.join_times(index * 1009 + ci, self._next_uid, max(new, 0), t0,
                                         ramp_in)
            self._next_uid += max(new, 0)
            for uid, at in times:
                stop = asyncio.Event()
                task = loop.create_task(self._user(c, uid, at, stop))
                self.tasks.append(task)
                mine.append((uid, stop, task))
            if new < 0:
                # fewer: the newest leave, each once its request in flight is answered (never
                # cut: Ramp._users_to)
                gone, self.users[c.name] = mine[load.users:], mine[:load.users]
                for _uid, stop, task in gone:
                    stop.set()
                    if not task.done():
                        self._leaving.append(task)
        if self.ramp.by != "users" and self.ramp.searching and index > 0:
            # a search's rate step holds its own rate only: the conversations earlier steps
            # started end after their turn in flight (before this step's arrivals start)
            self._end_rate_plays()
        self._start_rates(index, ramp_in + self.ramp.hold_s, t0)

    def _start_rates(self, index: int, span: float, t0: float) -> None:
        loop = asyncio.get_running_loop()
        for ci, c in enumerate(self.classes):
            load = self._loads.get(c.name)
            if load is None or not load.rate:
                continue
            seed = self.ramp.seed + 7919 * index + 104729 * ci
            offsets = arrivals.covering(load.rate, span, self.ramp.burstiness, seed)
            self.rate_tasks.append(loop.create_task(dispatch(
                self.sessions[c.name], offsets, self._next_conv(c), stop=self._rate_stop,
                think=c.think_s, seed=seed, tasks=self._rate_plays, t0=t0)))

    def extend(self, hold_s: float) -> None:
        """The step just judged is held ``hold_s`` longer (a search's step with too few
        requests): the rate classes' arrivals go on over it (the users chat on by themselves)."""
        if self._step is not None:
            self._start_rates(self._step, hold_s, perf_counter())

    def _next_conv(self, c: LoadClass) -> Callable[[int], Conversation]:
        ids = self._conv_ids[c.name]
        return lambda _k: draw(c.convs, next(ids))

    async def _user(self, c: LoadClass, uid: int, at: float, stop: asyncio.Event) -> None:
        await self._chat(self.sessions[c.name], self._next_conv(c), uid, at, stop, c.think_s,
                         self.ramp.seed, self.ramp.join)

    # the ramp's calls for one crowd of one kind: set_step did the work
    async def add_users(self, users: list[tuple[int, float]]) -> None:
        return None

    async def remove_users(self, uids: Sequence[int]) -> None:
        return None

    def start_rate(self, step: int, offsets: Sequence[float], t0: float,
                   index: Sequence[int] | None = None) -> None:
        return None

    def start_trace(self, items: Sequence[Any], copies: int, speed: float, t0: float) -> None:
        # a recording is one class: ramp --trace refuses --scenario (RampOpts.check_trace)
        raise AssertionError("ramp --trace has no traffic classes")

    async def playing(self) -> int:
        return 0                    # no recording plays here (start_trace)

    async def end_conversations(self) -> None:
        # the engine asks after set_step began the step's arrivals: begin ended the earlier
        # steps' conversations before starting them (_end_rate_plays)
        return None

    def stop_rate(self) -> None:
        for t in self.rate_tasks:
            t.cancel()
        self.rate_tasks = []

    async def pending(self, index: int, hold_start: float, hold_end: float) -> int:
        return sum(1 for s in {id(s): s for s in self.sessions.values()}.values()
                   for r in s.active if r.step == index and hold_start <= r.start < hold_end)

    async def finish(self) -> None:
        for s in self.sessions.values():
            s.step = None
        await self._wait_out([stop for mine in self.users.values() for _uid, stop, _t in mine])
