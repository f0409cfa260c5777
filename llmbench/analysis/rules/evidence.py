"""What a verdict stands on, read once (``gather``), and what a rule answers (``Finding``).

A rule is ``Rule(name, fire, notes)``: ``fire(ev)`` returns a Finding or None; ``notes(ev)``
what it has to say whether or not it fires (the verdict keeps the notes of every rule it asked,
in order, before the finding's own evidence). Rules are tested on a hand-built Evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from llmbench.analysis.cachebound import Reprefill, ramp_finding, reprefill
from llmbench.analysis.rules.words import (ITL_GROWTH, ITL_MIN_GROWTH_MS, TTFT_GROWTH,
                                           baseline_step, crowded_out, server_view, _num)
from llmbench.analysis.stats import served_at_once
from llmbench.analysis.stepstats import knee
from llmbench.records.record import Record
from llmbench.results.network import NetworkFloor
from llmbench.results.sessions import CacheBound
from llmbench.results.schema import Knee, Step, Summary, deciding_step
from llmbench.results.search import Search


@dataclass
class Circumstances:
    """What happened to the ramp besides its steps. ``lost``: a lost worker's sentence;
    ``release``: that of a server that kept decoding for users who gave up; ``network``: the
    round trip measured apart from the server (client/floor.py)."""

    planned: int | None = None
    search: Search | None = None
    interrupted: bool = False
    lost: str | None = None
    release: str | None = None
    going_on: bool = False
    network: NetworkFloor | None = None


@dataclass
class Evidence:
    """What a verdict stands on: the step the answer turns on (``broke``; ``subject`` the one
    explained: it, or the last), the lighter step it is compared with (``first``) and what
    moved between them; ``little`` and ``server`` are over the subject's hold window."""

    steps: list[Step]
    unit: str = "users"
    broke: Step | None = None
    subject: Step | None = None
    first: Step | None = None
    ttft_p95_ms: tuple[float | None, float | None] = (None, None)
    itl_p50_ms: tuple[float | None, float | None] = (None, None)
    itl_p95_ms: tuple[float | None, float | None] = (None, None)
    itl_grew: bool = False
    ttft_grew: bool = False
    # the gaps grew, but only from other processes on the server's machine (one slot)
    crowded: str | None = None
    little: dict[str, Any] = field(default_factory=lambda: {"in_service": 0.0,
                                                            "waiting_share": 0.0})
    server: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    cache: CacheBound | None = None
    # later turns that prefilled their whole history again, where the lighter step kept it
    reprefill: Reprefill | None = None
    knee: Knee | None = None
    server_kind: str | None = None
    # a traffic class's reading (its own requests only): its name
    scope: str | None = None
    c: Circumstances = field(default_factory=Circumstances)

    @property
    def s1(self) -> Summary:
        return (self.subject or Step()).summary

    @property
    def s0(self) -> Summary | None:
        return self.first.summary if self.first is not None else None

    @property
    def saturated(self) -> bool:
        """The gaps grew from this load, not only from other processes (``crowded``: see
        words.crowded_out)."""
        return self.itl_grew and not self.crowded

    @property
    def itl_growth(self) -> float | None:
        a, b = self.itl_p50_ms
        return b / a if a and b is not None else None


@dataclass
class Finding:
    """A rule's answer: the kind of limit (run.json's verdict "kind"), its evidence and what to
    change, and the figures some kinds carry."""

    kind: str
    evidence: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    generator_cause: str | None = None
    slots_estimate: int | None = None
    cause: str | None = None
    # saturation with full slots: the share of TTFT p95 that was the wait for a slot
    slot_wait_share: float | None = None


@dataclass(frozen=True)
class Rule:
    """One rule of the verdict: what it finds in the evidence, and the notes it adds."""
    name: str
    fire: Callable[[Evidence], Finding | None]
    notes: Callable[[Evidence], list[str]] = lambda ev: []


def _grew(a: float | None, b: float | None, factor: float, at_least: float = 0.0) -> bool:
    """Growth needs a number on both sides: a missing statistic grows nothing."""
    return a is not None and b is not None and a > 0 and b >= factor * a and b - a >= at_least


def gather(steps: Sequence[Step], records: Sequence[Record], unit: str = "users",
           server_samples: Sequence[dict[str, Any]] = (), telemetry: dict[str, Any] | None = None,
           c: Circumstances | None = None, server_kind: str | None = None,
           knee_: Knee | None = None, scope: str | None = None) -> Evidence:
    """The evidence of a ramp: read once, for every rule (``knee_``: the knee when the
    caller already has it)."""
    steps = list(steps)
    if not steps:
        return Evidence(steps=[], unit=unit, c=c or Circumstances())
    broke = deciding_step(steps)
    subject = broke or steps[-1]
    first = baseline_step(steps, broke)
    s1, s0 = subject.summary, first.summary if first is not None else None
    ttft = (_num(s0.ttft.p95) if s0 else None, _num(s1.ttft.p95))
    itl = (_num(s0.itl.median) if s0 else None, _num(s1.itl.median))
    itl_grew = _grew(*itl, ITL_GROWTH, ITL_MIN_GROWTH_MS)
    ttft_grew = _grew(*ttft, TTFT_GROWTH)
    if not ttft_grew and s0 is not None and any(s.sessions is not None for s in steps):
        # agents: a session's first call prefills its whole task whatever the server does, and
        # those calls are the p95; the median is its later calls, which queue or re-prefill
        ttft_grew = _grew(_num(s0.ttft.median), _num(s1.ttft.median), TTFT_GROWTH)
    base_ttft_s = ((_num(s0.ttft.median) or 0.0) if s0 is not None else 0.0) / 1000.0
    h0, h1 = subject.hold_start or 0.0, subject.hold_end or 0.0
    win = [r for r in records if r.start < h1 and r.done > h0]
    server = server_view(server_samples, h0, h1)
    crowded = (crowded_out(first or subject, subject, unit, itl[1] / itl[0], server, telemetry)
               if itl_grew and ttft_grew and itl[0] and itl[1] is not None else None)
    cache = (ramp_finding(steps, records, broke, server_samples, unit)
             if ttft_grew and broke is not None else None)
    return Evidence(steps=steps, unit=unit, broke=broke, subject=subject, first=first,
                    ttft_p95_ms=ttft, itl_p50_ms=itl,
                    itl_p95_ms=(_num(s0.itl.p95) if s0 else None, _num(s1.itl.p95)),
                    itl_grew=itl_grew, ttft_grew=ttft_grew, crowded=crowded or None,
                    little=served_at_once(win, h0, h1, base_ttft_s), server=server,
                    telemetry=telemetry, cache=cache,
                    # re-prefilled histories make the first token later: asked only then
                    reprefill=reprefill(records, subject, first) if ttft_grew else None, knee=knee_ or knee(steps, records, unit),
                    server_kind=server_kind, scope=scope, c=c or Circumstances())
