"""A ramp's step: its threshold checks, its steady state, each traffic class's share, and
the rules that turn steps into a ramp's exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from llmbench.errors import (EXIT_EXPECTATION, EXIT_OK, EXIT_OVERLOADED, EXIT_NOT_JUDGED,
                             EXIT_THRESHOLD, EXIT_UNREACHABLE)
from llmbench.results.contract import JSONObject, Part, part
from llmbench.results.search import Search
from llmbench.results.sessions import Sessions
from llmbench.results.telemetry import Telemetry
from llmbench.results.summary import Summary

StepState = Literal["held", "over", "not enough data"]
HELD: StepState = "held"
OVER: StepState = "over"
NO_DATA: StepState = "not enough data"


@dataclass
class OutageSpan(Part):
    """A time the server refused connections (analysis.outages), in seconds after the run's
    (or the step's) start (``end_s`` None: still down at the end); a run's has its sentence."""

    start_s: float = 0.0
    end_s: float | None = None
    duration_s: float | None = None
    ongoing_at_end: bool = False
    attempts: int = 0
    backoff_s: float = 0.0
    text: str | None = part(None, omit="none")


@dataclass
class Check(Part):
    """One threshold against one summary (analysis.slo.check_all), or a check of the same shape
    a step fails on its own: no request in its hold window, an outage in it. ``ok`` is False
    also when the statistic is missing; ``reason`` says why, and ``insufficient`` whether that
    is for lack of requests (nothing failed: "not enough data") rather than failures."""

    threshold: str = ""
    ok: bool = False
    actual: float | None = None
    limit: float | None = None
    metric: str | None = None
    stat: str | None = None
    op: str | None = part(None, omit="none")
    reason: str | None = None
    insufficient: bool | None = part(None, omit="none")
    text: str | None = None
    # an outage (analysis.outages.step_check): the step measured a server that was not there
    outage: bool | None = part(None, omit="none")
    outages: list[OutageSpan] | None = part(None, omit="none")
    start_s: float | None = part(None, omit="none")
    # --scenario: the traffic class whose threshold this is (None: the whole step's own check)
    traffic_class: str | None = part(None, omit="none")


@dataclass
class Steady(Part):
    """Whether a step had settled: its hold window's first half against its second
    (analysis.stepstats.steady_state)."""

    in_flight: list[float] = field(default_factory=list)
    ttft_p50_ms: list[float | None] = field(default_factory=lambda: [None, None])
    ttft_p95_ms: list[float | None] = field(default_factory=lambda: [None, None])
    p_value: float | None = None
    drifting: bool = False
    why: str | None = None


@dataclass
class ClassStep(Part):
    """One traffic class (``--scenario``) at one ramp step: its own load (``unit``: users or
    req/s), checks, state and steady state, and the summary of its requests that started in
    the step's hold. A class broke the step when its state is ``over``."""

    load: float = 0.0
    unit: str = "users"
    held: bool = False
    state: StepState = HELD
    checks: list[Check] = field(default_factory=list)
    unfinished: int = 0
    steady: Steady | None = None
    summary: Summary = field(default_factory=Summary)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def as_step(self, parent: "Step") -> "Step":
        """This class's view of the step, a Step of its own (the verdict's machinery reads
        one): the parent's index, load, window and monitor; its own checks and summary."""
        return Step(index=parent.index, load=parent.load, ramp_start=parent.ramp_start,
                    hold_start=parent.hold_start, hold_end=parent.hold_end, held=self.held,
                    state=self.state, checks=list(self.checks), monitor=parent.monitor,
                    unfinished=self.unfinished, steady=self.steady, summary=self.summary)


@dataclass
class Step(Part):
    """One load level of a ramp: its load (users, a whole number, or requests/s for an
    open-loop ramp), whether it held its thresholds (``state``, ``checks``) and its summary of
    the requests that started in the hold. With ``--scenario``, ``classes`` holds each traffic
    class's own part of it, and the step held only if every class did."""

    index: int = 0
    load: float = 0.0
    ramp_start: float | None = None
    hold_start: float | None = None
    hold_end: float | None = None
    held: bool = False
    state: StepState = HELD
    checks: list[Check] = field(default_factory=list)
    monitor: JSONObject = field(default_factory=dict)
    unfinished: int = 0
    steady: Steady | None = None
    summary: Summary = field(default_factory=Summary)
    classes: dict[str, ClassStep] = part(default_factory=dict, omit="empty")
    # the server's machine over the hold window (None: not sampled; analysis.telemetry)
    telemetry: Telemetry | None = part(None, omit="none")
    # the agent sessions that started in the hold, with all their calls (None: no agents;
    # analysis.sessions.step_sessions)
    sessions: Sessions | None = part(None, omit="none")

    def __post_init__(self) -> None:
        if self.read_keys is not None and "state" not in self.read_keys:
            # a run saved before the state existed: it follows from held
            self.state = HELD if self.held else OVER

    def derived(self) -> frozenset[str]:
        return frozenset({"state"}) if "state" not in (self.read_keys or ()) else frozenset()

    @property
    def users(self) -> float:
        """The step's load under the name a closed-loop ramp gives it."""
        return self.load

    def _repr_html_(self) -> str | None:
        """In Jupyter: its thresholds and its summary (llmbench/report/notebook.py)."""
        from llmbench.results.display import html_of
        return html_of("step", self)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def drifting(self) -> bool:
        return bool(self.steady is not None and self.steady.drifting)


def last_held(steps: Sequence[Step]) -> Step | None:
    """The last step that held (its load is the ramp's answer)."""
    return next((s for s in reversed(steps) if s.held), None)


def deciding_step(steps: Sequence[Step]) -> Step | None:
    """The step the verdict explains and the exit code follows: the first step that broke
    after the last one that held (a step with too few requests broke nothing: it is that step
    only when no later one broke). None when nothing after the last held step broke or lacked
    data (every step held, or the ramp stopped there)."""
    steps = list(steps)
    top = last_held(steps)
    after = steps if top is None else steps[steps.index(top) + 1:]
    return (next((s for s in after if s.state == OVER), None)
            or next((s for s in after if s.state == NO_DATA), None))


def amount(load: float, unit: str = "users") -> str:
    """'1 user', '4 users', '2.5 req/s': a load with its unit, singular when it is one."""
    if unit == "users":
        return f"{load:g} user" + ("" if load == 1 else "s")
    return f"{load:g} {unit}"


def held_load(steps: Sequence[Step]) -> float:
    """The most users (or the highest rate) whose step held; 0 when none did."""
    return max((s.load for s in steps if s.held), default=0)


def ramp_code(steps: Sequence[Step], verdict_kind: str | None, expect: float | None = None,
              planned: int | None = None) -> int:
    """The exit code of a ramp that ran to its end, from its ``deciding_step``, as
    docs/exit-codes.md states it: a ramp is meant to break at some step (that is its answer,
    exit 0); it fails as a gate below --expect-users (1) or, without it, when no step held and
    one broke (99). A step with too few requests broke nothing: never a threshold failure."""
    steps = list(steps)
    deciding = deciding_step(steps)
    reached_top = bool(steps) and all(s.held for s in steps) and (
        planned is None or len(steps) == planned)
    if deciding is not None and verdict_kind in ("load_generator", "buffered"):
        return EXIT_OVERLOADED       # the break is not the server's to be judged by
    if deciding is not None and verdict_kind == "outage":
        return EXIT_UNREACHABLE      # the server went away: no capacity was measured there
    if steps and all(s.state == NO_DATA for s in steps):
        return EXIT_NOT_JUDGED       # no answer: each step had too few requests, even held longer
    if expect is not None:
        return EXIT_EXPECTATION if held_load(steps) < expect and not reached_top else EXIT_OK
    if deciding is not None and last_held(steps) is None and deciding.state == OVER:
        return EXIT_THRESHOLD
    return EXIT_OK


# -- --repeat: the ramp run again, users held over the repeats ---------------------------------

@dataclass
class HeldInterval(Part):
    """Users held over repeats: the median repeat's, the min-max range, every repeat's value,
    how the range is read (``method``) and the chance it holds the median ramp's."""

    median: float = 0.0
    low: float | None = None
    high: float | None = None
    values: list[float] = field(default_factory=list)
    method: str = ""
    coverage: float | None = None


@dataclass
class RepeatRun(Part):
    """One repeat of a ramp as run.json keeps it."""

    repeat: int = 0
    seed: int | None = None
    workload_seed: int | None = None
    status: str = "complete"
    held: float | None = None
    verdict: str | None = None
    verdict_kind: str | None = None
    steps: list[Step] = field(default_factory=list)
    search: Search | None = part(None, omit="none")


@dataclass
class RepeatOf(Part):
    """Which repeat a ramp's run.json is while ``--repeat`` runs (its index, of how many) and
    the users the repeats before it held."""

    index: int = 1
    of: int = 1
    held_so_far: list[float | None] = field(default_factory=list)


@dataclass
class Repeats(Part):
    """``--repeat``: how many repeats were planned and done, which one is the run's steps and
    verdict (``representative``, the median, 1-based), users held over them, every repeat."""

    planned: int = 0
    done: int = 0
    representative: int = 1
    held: HeldInterval | None = None
    note: str = ""
    runs: list[RepeatRun] = field(default_factory=list)


def _repeat_code(rep: RepeatRun, expect: float | None, planned: int | None) -> int:
    """One repeat's exit code from what run.json keeps of it (its steps, verdict, search)."""
    if rep.search is not None:
        return search_code(rep.search, ladder(rep.steps, rep.search), rep.verdict_kind, expect)
    return ramp_code(rep.steps, rep.verdict_kind, expect, planned)


def ladder(steps: Sequence[Any], search: Search | None) -> list[Any]:
    """``Run.ladder`` from a run's steps and its search."""
    if search is None:
        return list(steps)
    by_index = {s.index: s for s in steps if isinstance(s, Step)}
    at: dict[float, Any] = {}
    for t in search.trials:
        st = by_index.get(t.index) if t.index is not None else None
        if st is not None and t.counted:
            at[float(st.load)] = st
    return [at[k] for k in sorted(at)]


def search_code(search: Search, ladder_steps: Sequence[Step], verdict_kind: str | None,
                expect: float | None = None) -> int:
    """A search's exit code: as a ramp's (``ramp_code`` over its ladder), with the limit it
    found as the load held (a load that broke its sustain did not hold). The load generator
    breaking a step is exit 4 whatever else held."""
    if search.stopped == "load_generator":
        return EXIT_OVERLOADED
    if expect is not None:
        return EXIT_EXPECTATION if search.limit < expect and search.stopped != "ceiling" \
            else EXIT_OK
    return ramp_code(ladder_steps, verdict_kind)
