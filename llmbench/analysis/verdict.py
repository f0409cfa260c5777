"""Why a step broke: queuing, compute saturation, errors/limits, or the load generator itself.

Pure: from the ramp's steps (``results.schema.Step``) and records (and server samples when
probed); the result is a ``results.schema.Verdict``. It explains the step the ramp's answer
turns on (``deciding_step``: the first that broke after the last that held) against the
lightest step that had data, the closest thing to an unloaded server the ramp saw. The
judgement is an ordered list of rules (``analysis.rules.ramp.RULES``) over one ``Evidence``;
``explain`` asks them in order, and says the answer once (``headline``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from llmbench.analysis.rules.evidence import Circumstances, Evidence, Finding, gather
from llmbench.analysis.rules.ramp import RULES, context, starved
from llmbench.analysis.rules.words import (  # noqa: F401  (the verdict's words, used elsewhere)
    NAMES, _fmt_ms, _num, busy_banner, busy_warning, describe_check, freeze_sentence,
    generator_cause, generator_sentence, lag_explains, server_sentence, server_view)
from llmbench.records.record import Record
from llmbench.analysis.stepstats import drift_sentence
from llmbench.results.schema import (NO_DATA, HeldInterval, Knee, Step, Verdict, amount,
                                     deciding_step)


def result_line(steps: Sequence[Step], unit: str = "users", planned: int | None = None) -> str:
    """'Held 6 users. At 8 users, TTFT p95 was 2.55 s, over 2 s.'

    ``planned`` is how many steps the plan had: a ramp that stopped early (interrupted) did
    not have "every step" hold. The step named after the answer is ``deciding_step``."""
    held = [s for s in steps if s.held]
    broke = deciding_step(steps)
    best = max((s.load for s in held), default=0)
    head = f"Held {amount(best, unit)}."
    if broke is None:
        if not steps:
            return head + " No step finished."
        if len(held) < len(steps):
            return head + " No step above it broke."
        if planned is not None and len(steps) < planned:
            return head + f" Stopped after {len(steps)} of {planned} steps, all held."
        return head + " Every step held."
    failed = broke.failed_checks
    if broke.state == NO_DATA:
        head = head if held else "No step could be judged."
        return (head + f" At {amount(broke.load, unit)}, not enough data to decide: "
                + "; ".join(describe_check(c) for c in failed[:2]) + ".")
    # an outage first (it explains the rest), then a breach, then what could not be measured
    failed.sort(key=lambda c: (not c.outage, bool(c.reason)))
    parts = [describe_check(c, broke.summary.failed) for c in failed[:2]]
    return head + f" At {amount(broke.load, unit)}, " + "; ".join(parts) + "."


def knee_clause(k: Knee | None, unit: str) -> str:
    """Where the broken threshold is crossed between the step that held and the one that
    broke, as a clause of the headline ("; by interpolation the limit lies between 6 and 7
    users"); "" when the knee adds nothing to the steps (adjacent users, no estimate)."""
    if k is None or k.estimate is None or k.reason or not k.between:
        return ""
    x0, x1 = k.between
    if unit == "users":
        if k.users is None or not k.users_ci or math.ceil(x1) - 1 <= x0:
            return ""
        n_lo, n_hi = k.users_ci
        if n_lo == n_hi:
            return f"; by interpolation the limit lies between {n_lo} and {n_lo + 1} users"
        return f"; by interpolation the limit lies at {n_lo} to {n_hi} users (95 % interval)"
    lo, hi = k.ci or (k.estimate, k.estimate)
    return f"; by interpolation the limit lies at {lo:.1f} to {hi:.1f} {unit} (95 % interval)"


def headline(ev: Evidence, base: str | None = None) -> str:
    """The one sentence a result states, said once, that every renderer prints: the steps'
    answer (``base``: a scenario's names its classes), or --find's, with the knee as a clause,
    and what happened to the ramp."""
    c, steps, unit = ev.c, ev.steps, ev.unit
    if c.search is not None:
        text = c.search.text
    elif c.going_on and steps and all(s.held for s in steps):
        # the verdict so far: not "stopped after k of n steps", the ramp goes on
        best = max(s.load for s in steps)
        text = (f"Held {amount(best, unit)} so far ({len(steps)} of {c.planned or len(steps)} "
                "steps); the ramp goes on.")
    elif c.interrupted and all(s.held for s in steps):
        # nothing broke because the ramp was stopped, not because every step held
        best = max((s.load for s in steps), default=0)
        text = (f"Held {amount(best, unit)} before the ramp was interrupted. Stopped after "
                f"{len(steps)} of {c.planned or len(steps)} steps, all held." if steps
                else "Interrupted before the first step finished.")
    else:
        text = base if base is not None else result_line(steps, unit, c.planned)
        clause = knee_clause(ev.knee, unit)
        if clause:
            text = text.rstrip(".") + clause + "."
    if starved(ev):
        text += (" That is the server's limit on a machine busy with other processes, not its "
                 "capacity.")
    if c.lost is not None:
        # the steps after the loss ran without that worker's users: not the planned load
        text = (f"{text} INCOMPLETE: {c.lost} during the ramp; its users stopped there, so "
                "the figures are incomplete and not a result.").strip()
    return text


def aftermath(c: Circumstances) -> tuple[list[str], list[str]]:
    """The evidence and advice of what happened after the users left: a server that kept
    decoding for closed connections (what users who stay get)."""
    if not c.release:
        return [], []
    return [c.release], ["The server keeps working on requests whose users left: check that it "
                         "cancels a request when its connection closes (a proxy in front may "
                         "keep the upstream connection open)."]


def decide(ev: Evidence) -> tuple[Finding, list[str]]:
    """The first rule that fires, and the notes of every rule asked up to it."""
    notes: list[str] = context(ev)
    for rule in RULES:
        notes += rule.notes(ev)
        found = rule.fire(ev)
        if found is not None:
            return found, notes
    raise AssertionError("the last rule always fires")


def explain(steps: Sequence[Step], records: Sequence[Record], unit: str = "users",
            server_samples: Sequence[dict[str, Any]] = (), planned: int | None = None,
            telemetry: dict[str, Any] | None = None, circumstances: Circumstances | None = None,
            server_kind: str | None = None, base: str | None = None,
            knee: Knee | None = None, scope: str | None = None) -> Verdict:
    """The verdict: what kind of limit, the evidence, and what to change.

    ``telemetry``: the server's identity and where its machine was sampled ({"identity",
    "meta"}); each step's own figures are its ``telemetry``. ``base``: the steps' answer when
    the caller words it (a scenario's names its classes); ``scope``: the traffic class whose
    requests alone these are."""
    c = circumstances or Circumstances(planned=planned)
    ev = gather(steps, records, unit, server_samples, telemetry, c, server_kind, knee, scope)
    text = headline(ev, base)
    interrupted = True if c.interrupted and (c.search is not None or all(
        s.held for s in ev.steps)) else None
    incomplete = True if c.lost is not None else None
    if not ev.steps:
        return Verdict(text=text, kind="none", interrupted=interrupted, incomplete=incomplete)
    found, notes = decide(ev)
    release, keep = aftermath(c)
    drifting = [s for s in ev.steps if s.drifting]
    assert ev.subject is not None
    return Verdict(
        text=text, kind=found.kind,  # type: ignore[arg-type]
        evidence=notes + found.evidence + release, advice=found.advice + keep,
        knee=ev.knee, drifting=[s.load for s in drifting],
        steady_note=[drift_sentence(s, unit) for s in drifting],
        compared={"first_step": None if ev.first is None else ev.first.load,
                  "step": ev.subject.load},
        ttft_p95_ms=list(ev.ttft_p95_ms), itl_p50_ms=list(ev.itl_p50_ms),
        itl_p95_ms=list(ev.itl_p95_ms), itl_grew=ev.itl_grew, ttft_grew=ev.ttft_grew,
        served_at_once=ev.little, server=ev.server, slots_estimate=found.slots_estimate,
        generator_cause=found.generator_cause, cause=found.cause,
        slot_wait_share=found.slot_wait_share,
        cache=ev.cache if found.kind == "cache_bound" else None,
        interrupted=interrupted, incomplete=incomplete)


def over_repeats(v: Verdict | None, helds: Sequence[float], iv: HeldInterval,
                 unit: str) -> Verdict | None:
    """The verdict of a ramp's median repeat as the verdict of all of them (``--repeat``): its
    headline with the users each repeat held, their median and range."""
    if v is None:
        return None
    line = (f"Over {len(helds)} repeats it held {', '.join(f'{h:g}' for h in helds)} {unit}: "
            f"{iv.median:g} [{iv.low:g}, {iv.high:g}] (median [min, max]).")
    return replace(v, text=f"{v.text} {line}".strip())
