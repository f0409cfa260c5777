"""What a ramp runs next: a pacer hands the one ramp engine (``ramp.Ramp.drive``) each step's
plan, and is told how each judged step came out.

Like vegeta's Pacer, a different load is a different value handed to the same engine: the
fixed list of steps (``FixedSteps``: ``--users 2,4,8`` or ``--start/--step/--up-to``) and the
search for the limit (``search.SearchPacer``: ``--find``) drive the same steps, with the same
ramp-in, hold window, judge and steady-state test. A pacer decides; it never sleeps, sends or
judges, so its decisions are pure and tested without a network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

# why a step runs (what the console and the search's result say about it)
STEP = "step"          # the next of a fixed list
GROW = "grow"          # the search grows the load geometrically until a step breaks
AIM = "aim"            # where the measured statistic says the limit is crossed
BISECT = "bisect"      # halfway between the last that held and the first that broke
LONGER = "longer"      # the same step held longer: it had too few requests to judge
REPEAT = "repeat"      # the same load again: the step had not settled (still drifting)
CONFIRM = "confirm"    # the found limit held for --sustain
WHYS = (STEP, GROW, AIM, BISECT, LONGER, REPEAT, CONFIRM)


@dataclass(frozen=True)
class StepPlan:
    """One step to run: its load (users, whole, or requests/s), how long to bring it in and
    to hold it, and why. ``extend``: no new step, the step just judged holds ``hold_s`` more
    and is judged again over its whole, longer window (same index)."""

    load: float
    hold_s: float
    ramp_in_s: float
    why: str = STEP
    extend: bool = False


class JudgedStep(Protocol):
    """What a pacer reads of a judged step (the command's ``results.schema.Step``)."""

    load: float
    held: bool
    state: str                  # held | over | not enough data

    @property
    def drifting(self) -> bool: ...


class Pacer(Protocol):
    def first(self) -> StepPlan | None:
        """The first step (None: nothing to run)."""
        ...

    def after(self, step: JudgedStep, spent_s: float) -> StepPlan | None:
        """The next step, given how the last one was judged and the seconds spent since the
        first step began; None: the ramp is over."""
        ...

    def peak(self) -> float:
        """The most load it may ask for (connections to keep, worker processes)."""
        ...

    def planned(self) -> int | None:
        """How many steps it will run, when that is known before (a fixed list)."""
        ...


NO_DATA = "not enough data"
# the most holds a step with too few requests to judge gets before it is "not enough data"
MAX_HOLD_FACTOR = 4.0


@dataclass
class FixedSteps:
    """The steps as listed, in order; the first that does not hold ends the ramp (unless
    ``keep_going``). A step of users with too few requests to judge is held longer first (its
    users chat on, its window grows), doubling, up to ``max_hold_factor`` holds in all: a short
    --hold at few users then still answers, as --find does."""

    loads: Sequence[float]
    ramp_in_s: float
    hold_s: float
    keep_going: bool = False
    extend: bool = True              # False: a rate's arrivals stop with its window: no longer
    max_hold_factor: float = MAX_HOLD_FACTOR
    _next: int = 0
    _held_s: float = 0.0             # the step's hold so far, its extensions included

    def first(self) -> StepPlan | None:
        self._next = 0
        return self._plan()

    def _plan(self) -> StepPlan | None:
        if self._next >= len(self.loads):
            return None
        load = self.loads[self._next]
        self._next += 1
        self._held_s = self.hold_s
        return StepPlan(load, self.hold_s, self.ramp_in_s, STEP)

    def after(self, step: JudgedStep, spent_s: float) -> StepPlan | None:
        cap = self.max_hold_factor * self.hold_s
        if self.extend and step.state == NO_DATA and self._held_s < cap - 1e-9:
            extra = min(self._held_s, cap - self._held_s)
            self._held_s += extra
            return StepPlan(step.load, extra, 0.0, LONGER, extend=True)
        if not step.held and not self.keep_going:
            return None
        return self._plan()

    def peak(self) -> float:
        return max(self.loads, default=0.0)

    def planned(self) -> int | None:
        return len(self.loads)
