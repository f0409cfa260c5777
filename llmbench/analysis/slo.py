"""Thresholds checked against a summary: each ``Threshold`` (the --threshold grammar,
llmbench/specs/thresholds.py) against a step's or run's summary and its agent sessions. An
unknown metric or statistic never gets here (the grammar refuses it); a statistic with no data,
or too little to mean anything (``metrics.min_samples``), fails its threshold and says why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from llmbench.analysis.metrics import min_samples
from llmbench.results.schema import HELD, NO_DATA, OVER, Check as CheckResult, StepState, Summary, key
from llmbench.specs.thresholds import (  # noqa: F401  (re-exported: tests and scripts)
    DEFAULT_THRESHOLDS, OPS, Threshold, ThresholdError, parse_threshold)

NO_REASONING_AS = {"ttfo": "ttft", "output_itl": "itl"}


@dataclass(frozen=True)
class Check:
    """One threshold against one summary, before it is worded: ``ok``, ``reason`` and
    ``insufficient`` as ``results.schema.Check`` defines them."""

    ok: bool
    actual: float | None
    reason: str | None = None
    insufficient: bool = False


def _too_few(n: int, stat: str, what: str, failed: str | None, actual: Any) -> Check | None:
    """The check of a statistic on ``n`` values (``what``: of what) when that is fewer than it
    needs (``metrics.min_samples``): not enough data, or a breach when ``failed`` says that
    requests (sessions) failed, since failures are why it is short of data; else None."""
    need = min_samples(stat)
    if n >= need:
        return None
    reason = (f"no {what} to measure" if n == 0 else
              f"{n} {what}{'s' if n != 1 else ''}, {stat} needs at least {need}")
    if failed:
        return Check(False, actual, f"{reason} ({failed})")
    return Check(False, actual, "not enough data: " + reason, insufficient=True)


def _evaluate_sessions(t: Threshold, sessions: Any) -> Check:
    """A session metric against the window's sessions (results.sessions.Sessions), over those
    that completed (too few of them: ``_too_few``, as for requests)."""
    if sessions is None:
        return Check(False, None, "not enough data: no agent session started in the window",
                     insufficient=True)
    if t.stat is not None and (few := _too_few(
            sessions.count(t.metric), t.stat,
            "completed session" if t.metric != "step_ttft" else "session call",
            f"{sessions.failed} of {sessions.started} sessions failed" if sessions.failed
            else None, actual=None)):
        return few
    actual = sessions.value(t.metric, t.stat)
    if actual is None:
        return Check(False, None, f"{t.key} was not measured (no session said)",
                     insufficient=not sessions.failed)
    return Check(bool(OPS[t.op](float(actual), t.value)), float(actual))


def evaluate(t: Threshold, s: Summary, sessions: Any = None) -> Check:
    """The threshold against the summary, read through the results contract: exactly what
    the summary (analysis.metrics) computed for METRIC.STAT."""
    if t.on_sessions:
        return _evaluate_sessions(t, sessions)
    base = NO_REASONING_AS.get(t.metric)
    if base and t.stat is not None and not s.has(t.metric, t.stat):
        # a run where nothing reasoned has no TTFO keys: its first answer token is its
        # first token, and its answer's ITL is its ITL
        return evaluate(replace(t, metric=base, key=key(base, t.stat)), s)
    actual: Any = (s.within_share(t.metric, t.within_ms) if t.within_ms is not None
                   else s.value(t.metric, t.stat))
    if isinstance(actual, str):          # "inf" as stored in run.json
        actual = float(actual)
    failed = s.failed
    requests = s.requests
    n_metric = t.metric + "_all" if (t.stat or "").endswith("_all") else t.metric
    if t.stat is not None and t.within_ms is None and s.has(n_metric, "n"):
        # (summaries saved before the counts existed skip this and fail only when missing)
        few = _too_few(int(s.value(n_metric, "n") or 0), t.stat,
                       "request" if t.stat.endswith("_all") else "successful request",
                       f"{failed} of {requests} failed" if failed else None, actual)
        if few:
            return few
    elif t.within_ms is not None and not requests:
        return Check(False, None, "not enough data: no request to measure", insufficient=True)
    if actual is None:
        if not requests:
            return Check(False, None, "not enough data: no request finished",
                         insufficient=True)
        return Check(False, None, f"{t.key} is not in the summary")
    actual = float(actual)
    return Check(bool(OPS[t.op](actual, t.value)), actual)


def within_requests(thresholds: list[Threshold]) -> list[tuple[str, float]]:
    """The (metric, limit_ms) shares a summary must compute for these thresholds."""
    return [(t.metric, t.within_ms) for t in thresholds if t.within_ms is not None]


def check_all(thresholds: list[Threshold], s: Summary, sessions: Any = None) -> list[CheckResult]:
    """Each threshold against the summary, as run.json keeps it (``results.schema.Check``);
    the session metrics against the window's agent sessions (results.sessions.Sessions, None
    when it had none)."""
    out = []
    for t in thresholds:
        c = evaluate(t, s, sessions)
        out.append(CheckResult(threshold=t.text, ok=c.ok, actual=c.actual, limit=t.value,
                               metric=t.metric, stat=t.stat, op=t.op, reason=c.reason,
                               insufficient=c.insufficient, text=describe_check(t, c)))
    return out


def describe_check(t: Threshold, c: Check) -> str:
    """'ttft.p95<=2s: 812 ms' or 'ttft.p95<=2s: no successful request to measure (18 of 18
    failed)': what the check saw, in words."""
    if c.reason:
        return f"{t.text}: {c.reason}"
    return f"{t.text}: {t.describe_value(c.actual)}"


def verdict_of(checks: Sequence[CheckResult]) -> StepState:
    """A step or run against its thresholds: held, over (a threshold broke, or requests failed
    so a statistic could not be measured), or not enough data (nothing failed, but too few
    requests to tell: never "held")."""
    failed = [c for c in checks if not c.ok]
    if not failed:
        return HELD
    if all(c.insufficient for c in failed):
        return NO_DATA
    return OVER
