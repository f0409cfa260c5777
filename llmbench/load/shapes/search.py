"""The search for the limit (``ramp --find``): a pacer for the one ramp engine.

docs/commands.md (``ramp --find``) tells the search: grow the load until a step breaks, narrow
the bracket (aimed, else halfway), confirm the limit for the sustain; a step short of data held
longer, a drifting one run again, the budget respected. The whys it does not give:

- Users grow x4 from the start, then x2: the start (one user by default) shows only that the
  server answers and its requests come slowest, so the climb leaves it boldly; a step that
  breaks beyond doubt ends within seconds of its hold, and the narrowing comes back down.
- ``aim`` (handed in by the command) extrapolates the broken step's statistic back at the
  server's measured cost per user; after an aimed step that came out the other way the next
  goes halfway, so a wrong model costs at most one bisection per aim (never worse than about
  twice plain bisection).
- A step the load generator itself broke ends the search: the server was not measured there.

Pure: it reads judged steps (``pace.JudgedStep``) and returns plans; the command turns its
``trials`` and bounds into the result's ``Search`` (llmbench.results.search).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from llmbench.load.shapes.pace import (AIM, BISECT, CONFIRM, GROW, LONGER, MAX_HOLD_FACTOR,
                                       NO_DATA, REPEAT, JudgedStep, StepPlan)

RATE_RESOLUTION = 0.05          # --by rate: the bracket is narrowed to 5 % of the rate
DEFAULT_CEILING = 1024.0        # growth stops here unless --up-to says otherwise
MAX_STEPS = 40                  # a search that has not ended by then is stopped, and says so
MAX_CONFIRMATIONS = 3           # limits that failed their sustain before the search gives up
FIRST_FACTOR = 4.0              # users: the first growth from the start (then ``factor``)

# why a search ended
FOUND = "found"                 # bracketed to the resolution and confirmed
BUDGET = "budget"               # the next step would not have finished within --budget
CEILING = "ceiling"             # every step held up to the most it may ask (--up-to)
NONE_HELD = "none_held"         # not even the lightest load held
NO_DATA_STOP = "no_data"        # a narrowing step had too few requests even held longest
GENERATOR = "load_generator"    # the load generator, not the server, broke a step
STEPS_CAP = "max_steps"
UNCONFIRMED = "unconfirmed"     # each found limit broke when held for the sustain
STOPPED = (FOUND, BUDGET, CEILING, NONE_HELD, NO_DATA_STOP, GENERATOR, STEPS_CAP, UNCONFIRMED)


@dataclass
class Trial:
    """One step the search ran, as it went. ``index``: its records' step; ``counted``: False
    for a drifting step repeated or one passed over for lack of data; ``hold_s``: its hold
    window's length, extensions included."""

    index: int | None
    load: float
    why: str
    state: str | None = None
    held: bool | None = None
    counted: bool = True
    hold_s: float = 0.0
    note: str | None = None


Aim = Callable[[JudgedStep, JudgedStep], "float | None"]


@dataclass
class SearchPacer:
    """--find's pacer: the next step's load from the steps judged so far."""
    by: str = "users"
    start: float = 1.0
    ramp_in_s: float = 10.0
    hold_s: float = 60.0
    sustain_s: float | None = None          # None: one more hold
    budget_s: float | None = None
    ceiling: float | None = None            # None: DEFAULT_CEILING
    factor: float = 2.0
    first_factor: float = FIRST_FACTOR      # users: the growth from the start step
    max_hold_factor: float = MAX_HOLD_FACTOR
    max_steps: int = MAX_STEPS
    # the lightest load it may try (users): 1, or a scenario's floors added up (min_users:
    # a step of fewer would not be its load)
    least: float = 1.0
    # the command's estimate of where the threshold is crossed (module docstring); None: bisect
    aim: Aim | None = None
    # whether a broken step broke because of the load generator (the command's)
    untrusted: Callable[[JudgedStep], bool] | None = None
    trials: list[Trial] = field(default_factory=list)
    lo: JudgedStep | None = None            # the highest load that held (counted)
    hi: JudgedStep | None = None            # the lowest load that broke (counted)
    stopped: str | None = None
    confirmed: bool | None = None
    confirm_failures: int = 0
    _counted: list[JudgedStep] = field(default_factory=list)
    _pending: StepPlan | None = None
    spent_s: float = 0.0                   # from the first step's start to the last judgement
    _overhead_s: float = 0.0
    _predicted: bool | None = None           # what the aimed step was expected to do
    _aim_failed: bool = False
    _slow_aims: int = 0
    _load_now: float = 0.0

    def __post_init__(self) -> None:
        if self.by == "users":
            self.least = float(max(1, int(self.least)))
            self.start = float(max(self.least, int(self.start)))

    # -- the pacer ----------------------------------------------------------------------------
    @property
    def top(self) -> float:
        return self.ceiling if self.ceiling is not None else DEFAULT_CEILING

    @property
    def sustain(self) -> float:
        return self.hold_s if self.sustain_s is None else self.sustain_s

    @property
    def resolution(self) -> float:
        """The bracket's width the search narrows to: 1 user, or 5 % of the rate (relative)."""
        return 1.0 if self.by == "users" else RATE_RESOLUTION

    def peak(self) -> float:
        return self.top

    def planned(self) -> int | None:
        return None

    def first(self) -> StepPlan | None:
        self.trials.clear()
        self._counted.clear()
        self.lo = self.hi = None
        self.stopped, self.confirmed, self.confirm_failures = None, None, 0
        self.spent_s = 0.0
        return self._issue(StepPlan(min(self.start, self.top), self.hold_s, self.ramp_in_s, GROW))

    def after(self, step: JudgedStep, spent_s: float) -> StepPlan | None:
        plan = self._pending
        assert plan is not None, "after() before first()"
        trial = self.trials[-1]
        took = spent_s - self.spent_s
        self.spent_s = spent_s
        self._overhead_s = max(0.0, took - plan.ramp_in_s - plan.hold_s)
        trial.index = getattr(step, "index", trial.index)
        trial.state, trial.held = step.state, step.held
        trial.hold_s = trial.hold_s + plan.hold_s if plan.extend else plan.hold_s
        self._load_now = step.load
        nxt = self._decide(step, trial)
        if nxt is None:
            return None
        if not nxt.extend and len(self.trials) >= self.max_steps:
            return self._stop(STEPS_CAP)
        if self.budget_s is not None:
            need = nxt.ramp_in_s + nxt.hold_s + self._overhead_s
            if spent_s + need > self.budget_s:
                return self._stop(BUDGET)
        return self._issue(nxt)

    def _issue(self, plan: StepPlan) -> StepPlan:
        self._pending = plan
        if not plan.extend:
            self.trials.append(Trial(None, plan.load, plan.why))
        return plan

    def _stop(self, why: str) -> None:
        self.stopped = why
        self._pending = None
        return None

    # -- deciding ---------------------------------------------------------------------------------
    def _decide(self, step: JudgedStep, trial: Trial) -> StepPlan | None:
        if step.state == NO_DATA:
            cap = self.max_hold_factor * self.hold_s
            if trial.hold_s < cap - 1e-9:
                extra = min(trial.hold_s, cap - trial.hold_s)
                if self.by == "users":
                    # the users stay and chat on: the same window, longer
                    trial.note = (f"too few requests to judge: held {_secs(trial.hold_s + extra)}"
                                  " in all")
                    return StepPlan(step.load, extra, 0.0, LONGER, extend=True)
                # arrivals stop with a window: the rate runs again, held twice as long
                trial.counted = False
                trial.note = "too few requests to judge: run again, held twice as long"
                return StepPlan(step.load, trial.hold_s + extra, 0.0, LONGER)
            trial.counted = False
            trial.note = (f"too few requests even held {_secs(trial.hold_s)}: counts as "
                          "neither held nor broken")
            if self.hi is None:
                return self._grow(step.load)     # more load sends more requests
            return self._stop(NO_DATA_STOP)
        if step.drifting and trial.why not in (REPEAT, CONFIRM):
            trial.counted = False
            trial.note = "had not settled (still drifting): run once more before it counts"
            return StepPlan(step.load, self.hold_s, 0.0, REPEAT)
        if not step.held and self.untrusted is not None and self.untrusted(step):
            trial.note = "the load generator broke this step, not the server"
            return self._stop(GENERATOR)
        self._counted.append(step)
        if trial.why == CONFIRM:
            if step.held:
                self.confirmed = True
                return self._stop(FOUND)
            self.confirmed = False
            self.confirm_failures += 1
            trial.note = "did not hold for the sustain: the limit is searched for below it"
        before = self._width()
        self._bound(step)
        if trial.why == AIM and self._predicted is not None:
            self._aim_failed = step.held != self._predicted
            # an aim that kept one side of the bracket and barely moved the other (a straight
            # line through a kink creeps up on the crossing): twice in a row, then bisect
            after = self._width()
            slow = before is not None and after is not None and after > before / 2
            self._slow_aims = self._slow_aims + 1 if slow else 0
            if self._slow_aims >= 2:
                self._aim_failed, self._slow_aims = True, 0
        elif trial.why == BISECT:
            self._aim_failed = False
        return self._next()

    def _sustained(self, lo: JudgedStep) -> Trial | None:
        """The limit's own trial when it needs no confirmation (docs/commands.md): its
        step held a whole hold of at least the sustain (not ended early: a narrowing step ends
        early only held beyond doubt, a growing one also held so far). None once a limit
        failed its sustain (the server is noisy there)."""
        if self.confirm_failures:
            return None
        own = next((t for t in self.trials if t.counted and t.why != CONFIRM
                    and t.index is not None and t.index == getattr(lo, "index", None)), None)
        held_s = _window_s(lo)
        if own is None or held_s is None or \
                held_s < max(self.sustain, own.hold_s) - 1e-6:
            return None
        return own

    def _width(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        return float(self.hi.load) - float(self.lo.load)

    def _bound(self, step: JudgedStep) -> None:
        """The bracket, newest measurement first: near the limit the steps are noisy, so a
        load that held at or above one that broke earlier (or broke at or below one that
        held) replaces that bound."""
        if step.held:
            if self.hi is not None and step.load >= self.hi.load:
                self.hi = min((s for s in self._counted if not s.held and s.load > step.load),
                              key=lambda s: s.load, default=None)
            if self.lo is None or step.load >= self.lo.load:
                self.lo = step
        else:
            if self.lo is not None and step.load <= self.lo.load:
                self.lo = max((s for s in self._counted if s.held and s.load < step.load),
                              key=lambda s: s.load, default=None)
            if self.hi is None or step.load <= self.hi.load:
                self.hi = step

    def _next(self) -> StepPlan | None:
        lo, hi = self.lo, self.hi
        if hi is None:
            top = lo.load if lo is not None else 0.0
            if top >= self.top - 1e-9:
                return self._stop(CEILING)
            return self._grow(top)
        if lo is None:
            if hi.load <= self._floor() + 1e-9:
                return self._stop(NONE_HELD)
            return self._plan(self._down(hi.load), BISECT)
        if self.converged(lo.load, hi.load):
            if self.confirm_failures >= MAX_CONFIRMATIONS:
                return self._stop(UNCONFIRMED)
            own = self._sustained(lo)
            if own is not None:
                self.confirmed = True
                own.note = "; ".join(filter(None, [
                    own.note, f"held its whole {_secs(own.hold_s)} hold, at least the "
                              "sustain: the limit is not held again to confirm it"]))
                return self._stop(FOUND)
            ramp_in = 0.0 if abs(self._load_now - lo.load) < 1e-9 else self.ramp_in_s
            return StepPlan(lo.load, self.sustain, ramp_in, CONFIRM)
        return self._narrow(lo, hi)

    def converged(self, lo: float, hi: float) -> bool:
        if self.by == "users":
            return hi - lo <= 1 + 1e-9
        return hi <= lo * (1 + RATE_RESOLUTION) + 1e-12

    def _floor(self) -> float:
        """The lightest load worth trying when nothing held: 1 user (a scenario's floors),
        or the start / 64."""
        return self.least if self.by == "users" else self.start / 64

    def _plan(self, load: float, why: str) -> StepPlan:
        return StepPlan(load, self.hold_s, self.ramp_in_s, why)

    def _grow(self, top: float) -> StepPlan:
        if top <= 0:
            nxt = self.start
        elif self.by == "users":
            f = self.first_factor if top <= self.start + 1e-9 else self.factor
            nxt = float(max(int(top) + 1, math.ceil(top * f - 1e-9)))
        else:
            nxt = _nice(top * self.factor, top, math.inf)
        return self._plan(min(nxt, self.top), GROW)

    def _down(self, hi: float) -> float:
        if self.by == "users":
            return float(max(self.least, int(hi // self.factor)))
        return _nice(hi / self.factor, 0.0, hi)

    def _narrow(self, lo: JudgedStep, hi: JudgedStep) -> StepPlan:
        a, b = float(lo.load), float(hi.load)
        est = None
        if self.aim is not None and not self._aim_failed:
            est = self.aim(lo, hi)
            if est is not None and not math.isfinite(est):
                est = None
        self._predicted = None
        if self.by == "users":
            if est is not None:
                x = float(min(max(math.floor(est + 1e-9), a + 1), b - 1))
                self._predicted = x <= est + 1e-9     # aimed at the most that holds
                return self._plan(x, AIM)
            return self._plan(float((int(a) + int(b)) // 2), BISECT)
        inner_lo, inner_hi = a * (1 + RATE_RESOLUTION), b / (1 + RATE_RESOLUTION)
        if est is not None and inner_lo < inner_hi:
            x = _nice(min(max(est * (1 - RATE_RESOLUTION / 2), inner_lo), inner_hi), a, b)
            self._predicted = x <= est
            return self._plan(x, AIM)
        return self._plan(_nice((a + b) / 2, a, b), BISECT)

    # -- what it found ------------------------------------------------------------------------
    @property
    def limit(self) -> float:
        """The most load that held (0: none did)."""
        return float(self.lo.load) if self.lo is not None else 0.0

    def worst_case_steps(self) -> int:
        """The most steps a search can take before its confirmation, up to its ceiling (for
        ``--dry-run``): growth from the start to the ceiling, then narrowing the last gap with
        every aim wrong (each costs one bisection more), plus the confirmation. Repeats of
        drifting steps and longer holds come on top."""
        grow, x = 1, self.start
        while x < self.top:
            f = self.first_factor if self.by == "users" and x <= self.start else self.factor
            x = min(x * f, self.top)
            grow += 1
        gap = self.top - self.top / self.factor
        if self.by == "users":
            narrow = math.ceil(math.log2(max(gap, 1.0))) if gap > 1 else 0
        else:
            narrow = math.ceil(math.log2(max(gap / (self.top / self.factor * RATE_RESOLUTION),
                                             1.0)))
        return grow + 2 * narrow + 1


def _nice(x: float, lo: float, hi: float) -> float:
    """A rate with as few significant digits as keep it strictly between lo and hi."""
    for digits in range(2, 9):
        v = float(f"{x:.{digits}g}")
        if lo < v < hi:
            return v
    return x


def _window_s(step: JudgedStep) -> float | None:
    """How long a judged step's hold window was (None: a step that does not say)."""
    a, b = getattr(step, "hold_start", None), getattr(step, "hold_end", None)
    return b - a if a is not None and b is not None else None


def _secs(s: float) -> str:
    return f"{s:g} s" if s < 120 else f"{s / 60:g} min"
