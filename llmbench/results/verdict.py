"""A ramp's verdict: its kind, its words, the knee, and what traffic classes and
``--isolate`` found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from llmbench.results.contract import JSONObject, Part, part
from llmbench.results.sessions import CacheBound
from llmbench.results.summary import Summary
from llmbench.results.step import Check, HELD, StepState, held_load

# every kind analysis.verdict.explain gives
VerdictKind = Literal["held", "none", "queuing", "saturation", "cache_bound", "errors", "outage",
                      "buffered", "not_enough_data", "load_generator", "network", "other"]


@dataclass
class Knee(Part):
    """Where between the last step that held and the first that broke the broken threshold is
    crossed (analysis.stepstats.knee): ``estimate`` and ``ci`` interpolated in load (a fraction,
    for the chart); for users, ``users`` and ``users_ci``, the whole users that hold. ``text``
    is what the verdict says (None: nothing beyond held and broke)."""

    threshold: str | None = None
    between: list[float] = field(default_factory=list)
    limit: float | None = part(None, omit="none")
    values: list[float | None] | None = part(None, omit="none")
    estimate: float | None = None
    ci: list[float] | None = None
    reason: str | None = None
    not_monotone_share: float | None = part(None, omit="none")
    users: int | None = part(None, omit="none")
    users_ci: list[int] | None = part(None, omit="none")
    text: str | None = None


def _analysed(v: "Verdict") -> bool:
    return v.kind != "none"


@dataclass
class ClassVerdict(Part):
    """One traffic class's own reading of the ramp: ``kind`` as a Verdict's (from its own
    requests: queuing, saturation...), ``text`` what became of it ("held at every step", "broke
    at 8 users: TTFT p95 was 2.55 s, over 2 s"), ``held_load`` its own load at the last step
    that held overall, ``broke`` whether it broke the deciding step."""

    kind: str = "held"
    text: str = ""
    broke: bool = False
    held_load: float | None = None
    unit: str = "users"
    evidence: list[str] = field(default_factory=list)


@dataclass
class Compared(Part):
    """One threshold's statistic of a class, in the broken step (``mixed``: with every class)
    and run alone at the same load (``alone``); ``added``: what the others added
    (mixed - alone, in the statistic's units: ms for latencies)."""

    threshold: str = ""
    metric: str | None = None
    stat: str | None = None
    mixed: float | None = None
    alone: float | None = None
    added: float | None = None
    limit: float | None = None
    ok_mixed: bool | None = None
    ok_alone: bool | None = None


@dataclass
class IsolatedClass(Part):
    """A traffic class run alone (``--isolate``) at the load it had in the broken step
    (``step``: its own step index in requests.jsonl); ``compared``: each threshold mixed
    against alone."""

    name: str = ""
    load: float = 0.0
    unit: str = "users"
    step: int = 0
    ramp_start: float | None = None
    hold_start: float | None = None
    hold_end: float | None = None
    held: bool = False
    state: StepState = HELD
    broke_mixed: bool = False
    checks: list[Check] = field(default_factory=list)
    compared: list[Compared] = field(default_factory=list)
    summary: Summary = field(default_factory=Summary)
    text: str = ""


@dataclass
class Isolation(Part):
    """``--isolate``: each traffic class run alone at its load in the first step that broke
    (``of_step``, at ``load`` in the ramp's unit), and what that says: ``cause`` the classes
    that break even alone (their own requests are the limit), ``victims`` those that broke
    only with the others present; ``text`` the sentences. ``note``: why it did not run."""

    of_step: int | None = None
    load: float | None = None
    classes: list[IsolatedClass] = field(default_factory=list)
    cause: list[str] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    note: str | None = part(None, omit="none")


@dataclass
class Verdict(Part):
    """Why a ramp stopped (or that every step held): ``kind``, ``text`` the sentence the console
    prints (run.json's "result"), ``evidence`` and ``advice`` the lines under it; the figures it
    stands on (``compared``: the steps; TTFT and ITL at each; Little's law; the server's own
    view) and the knee between the steps."""

    text: str = part("", key="result")
    kind: VerdictKind = "held"
    evidence: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    knee: Knee | None = part(None, when=_analysed)
    drifting: list[float] = part(default_factory=list, when=_analysed)
    steady_note: list[str | None] = part(default_factory=list, when=_analysed)
    compared: JSONObject | None = part(None, when=_analysed)
    ttft_p95_ms: list[float | None] = part(default_factory=list, when=_analysed)
    # the median gap at the two steps (folders before the one percentile rule: "itl_median_ms",
    # kept as read in ``extra``)
    itl_p50_ms: list[float | None] = part(default_factory=list, when=_analysed)
    itl_p95_ms: list[float | None] = part(default_factory=list, when=_analysed)
    itl_grew: bool = part(False, when=_analysed)
    ttft_grew: bool = part(False, when=_analysed)
    served_at_once: JSONObject | None = part(None, when=_analysed)
    server: JSONObject | None = part(None, when=_analysed)
    slots_estimate: int | None = part(None, omit="none")
    generator_cause: str | None = part(None, omit="none")
    # what the server's machine named as the cause (analysis.telemetry.verdict_part)
    cause: str | None = part(None, omit="none")
    # kind "saturation" whose slots were full too: the share of TTFT p95 spent waiting for a
    # slot (the console's "Why:" names both causes from it)
    slot_wait_share: float | None = part(None, omit="none")
    interrupted: bool | None = part(None, omit="none")
    incomplete: bool | None = part(None, omit="none")
    cache: CacheBound | None = part(None, omit="none")
    # --scenario: each traffic class's own reading, and the classes that broke the deciding
    # step (with --isolate: the classes that break even alone, analysis.classes)
    classes: dict[str, ClassVerdict] = part(default_factory=dict, omit="empty")
    blamed: list[str] = part(default_factory=list, omit="empty")

    @property
    def headline(self) -> str:
        """The one sentence the result states, said once (run.json's "result"): what every
        renderer prints as its answer. The knee between the steps is a clause of it, never a
        second number."""
        return self.text
