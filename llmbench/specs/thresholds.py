"""The --threshold grammar: expressions such as ``ttft.p95<=2s`` parsed into a ``Threshold``
(plain data, below analysis: analysis/slo.py checks one against a summary), and the default
gates and percentiles a command asks for when the user names none.

Grammar: METRIC[.STAT] OP VALUE[UNIT] (``GRAMMAR``, which an error message quotes, names
every metric and statistic; docs/thresholds.md defines them). STAT defaults to p95, a
latency's UNIT to ms (or s), a share's is % or a fraction. Latency statistics count successes
only, as vLLM's do; the ``_all`` ones and within(T) count every request (a failure as +inf).
An unknown metric or statistic is an error, never a silent pass. A statistic with no data, or
too little to mean anything (see ``metrics.min_samples``), fails its threshold and says why
(analysis/slo.py).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from llmbench.results.schema import (AGENTS, CENSORED, COUNTS, EXTRA_LATENCY, LATENCY, REASONING,
                                     SCALARS, SHARES, key, within_key)
from llmbench.results.sessions import DISTS as SESSION_DISTS, SCALARS as SESSION_SCALARS, SHARES as SESSION_SHARES

# the per-request latencies a threshold may name (analysis.metrics summarises the same);
# CENSORED's also have failure-aware ("_all") figures
ALL_LATENCY_METRICS = LATENCY + EXTRA_LATENCY + REASONING + AGENTS
# the percentiles every summary has (a run's --metric-percentiles adds its own)
DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)

GRAMMAR = ("METRIC[.STAT] OP VALUE[UNIT], e.g. 'ttft.p95<=2s', 'ttft.p95_all<=2s', "
           "'ttft.within(2s)>=95%', 'itl.p95<=200ms', 'errors==0', "
           "'error_rate<=1%', 'output_throughput>=100'; METRIC is one of "
           + ", ".join(ALL_LATENCY_METRICS) + ", errors, error_rate, requests, completed, "
           "completed_share, stalls, output_throughput, request_throughput, "
           "total_token_throughput, request_goodput, reasoning_tokens, tool_call_share, "
           "valid_output_share, embeddings_throughput (emb_s), input_throughput; agent sessions: "
           "session, session_model, session_tool, step_ttft, session_steps (with a STAT), "
           "sessions_completed, sessions_per_min, text_reply_share, session_cached_share; STAT is mean, median, p50, p90, p95, p99, "
           "max, min or std, and for " + ", ".join(CENSORED) + " also median_all, "
           "p50_all, p90_all, p95_all, p99_all or within(T); OP is <=, <, >=, >, == or !=")

STATS = ("mean", "median", "p50", "p90", "p95", "p99", "max", "min", "std")
ALL_STATS = ("median_all", "p50_all", "p90_all", "p95_all", "p99_all")
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
       "==": operator.eq, "!=": operator.ne}
_RE = re.compile(r"^\s*([a-z_0-9]+)(?:\.([a-z0-9_]+)(?:\(\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*\))?)?"
                 r"\s*(<=|>=|==|!=|<|>)\s*"
                 r"([-+]?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z%]*)\s*$", re.I)

# ttft.p95_all rather than vLLM's successes-only ttft.p95: a step where more than 5 % of the
# requests failed or timed out has no p95 "incl. failures" under any limit, so it fails even
# for a user who drops errors==0.
DEFAULT_THRESHOLDS = ("ttft.p95_all<=2s", "itl.p95<=200ms", "errors==0")
# embeddings have no first token and no token gaps: a request's latency is what a user waits
DEFAULT_EMBEDDING_THRESHOLDS = ("e2el.p95_all<=2s", "errors==0")
# agents: each call prefills a long context (a system + tools prompt, the history), so a first
# token in 2 s is not what they are held to; a step's first token within 5 s, as the issue's
# example gate (``step_ttft.p95<=5s``), failures counted
DEFAULT_AGENT_THRESHOLDS = ("ttft.p95_all<=5s", "itl.p95<=200ms", "errors==0")


class ThresholdError(ValueError):
    pass


@dataclass(frozen=True)
class Threshold:
    """One check, e.g. ttft.p95 < 2s: the metric it reads and the bound."""
    text: str
    metric: str
    stat: str | None
    op: str
    value: float           # in the summary's units: ms for latency, fraction for rates
    key: str               # the summary key it reads (run.json's name, for messages)
    within_ms: float | None = None     # for METRIC.within(T)
    on_sessions: bool = False          # an agent-session metric (results.sessions), not a request's

    @classmethod
    def parse(cls, text: str) -> "Threshold":
        """``Threshold.parse("ttft.p95<=2s")``: the --threshold grammar (parse_threshold)."""
        return parse_threshold(text)

    def describe_value(self, v: float | None) -> str:
        if v is None:
            return "–"
        if self.within_ms is not None or self.metric in SHARES or self.metric in SESSION_SHARES:
            return f"{v * 100:.1f}%"
        if self.metric in ("session_steps", "sessions_completed"):
            return f"{v:g}"
        if self.metric == "sessions_per_min":
            return f"{v:.2f}/min"
        if self.metric in COUNTS:
            return f"{v:g}" if float(v).is_integer() else f"{v:.1f}"
        if self.stat is not None:
            if math.isinf(v):
                return "∞"
            return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms"
        return f"{v:g}" if float(v).is_integer() else f"{v:.2f}"


def _latency_ms(num: float, unit: str, text: str) -> float:
    if unit in ("", "ms"):
        return num
    if unit == "s":
        return num * 1000.0
    raise ThresholdError(f"threshold {text!r}: unit {unit!r} for a latency; use ms or s")


def parse_threshold(text: str) -> Threshold:
    m = _RE.match(text)
    if not m:
        raise ThresholdError(f"threshold {text!r} does not parse; grammar: {GRAMMAR}")
    metric, stat, arg, arg_unit, op, num, unit = (
        m.group(1).lower(), m.group(2), m.group(3), (m.group(4) or "").lower(), m.group(5),
        float(m.group(6)), m.group(7).lower())
    if not math.isfinite(num):
        raise ThresholdError(f"threshold {text!r}: the limit must be a finite number")
    if metric in SESSION_DISTS or metric in SESSION_SCALARS:
        return _session_threshold(text, metric, stat, arg, op, num, unit)
    if metric in ALL_LATENCY_METRICS:
        stat = (stat or "p95").lower()
        if stat == "within" or arg is not None:
            if stat != "within" or arg is None:
                raise ThresholdError(f"threshold {text!r}: only within(T) takes an argument, "
                                     "e.g. 'ttft.within(2s)>=95%'")
            if metric not in CENSORED:
                raise ThresholdError(f"threshold {text!r}: within(T) is for "
                                     + ", ".join(CENSORED))
            limit_ms = _latency_ms(float(arg), arg_unit, text)
            if unit == "%":
                num /= 100.0
            elif unit:
                raise ThresholdError(f"threshold {text!r}: within(T) compares with a share, "
                                     "e.g. >=95% or >=0.95")
            return Threshold(text, metric, "within", op, num, within_key(metric, limit_ms),
                             within_ms=limit_ms)
        if stat in ALL_STATS:
            if metric not in CENSORED:
                raise ThresholdError(f"threshold {text!r}: {stat} (failures as +inf) is for "
                                     + ", ".join(CENSORED))
        elif stat not in STATS:
            raise ThresholdError(f"threshold {text!r}: unknown statistic {stat!r}; use one of "
                                 + ", ".join(STATS + ALL_STATS) + " or within(T)")
        return Threshold(text, metric, stat, op, _latency_ms(num, unit, text), key(metric, stat))
    if metric in COUNTS:
        stat = (stat or "p95").lower()
        if stat not in STATS:
            raise ThresholdError(f"threshold {text!r}: unknown statistic {stat!r} for a count; "
                                 "use one of " + ", ".join(STATS))
        if unit:
            raise ThresholdError(f"threshold {text!r}: {metric} is a count of tokens, no unit")
        return Threshold(text, metric, stat, op, num, key(metric, stat))
    if metric in SCALARS:
        return Threshold(text, metric, None, op, _scalar(text, metric, stat, num, unit, SHARES),
                         key(metric))
    raise ThresholdError(f"threshold {text!r}: unknown metric {metric!r}; grammar: {GRAMMAR}")


def _session_threshold(text: str, metric: str, stat: str | None, arg: str | None, op: str,
                       num: float, unit: str) -> Threshold:
    """An agent-session threshold (``GRAMMAR`` names them)."""
    if arg is not None:
        raise ThresholdError(f"threshold {text!r}: within(T) is for request metrics")
    if metric in SESSION_DISTS:
        stat = (stat or "p95").lower()
        if stat not in STATS:
            raise ThresholdError(f"threshold {text!r}: unknown statistic {stat!r}; use one of "
                                 + ", ".join(STATS))
        value = num if metric == "session_steps" else _latency_ms(num, unit, text)
        if metric == "session_steps" and unit:
            raise ThresholdError(f"threshold {text!r}: session_steps is a count of calls, no unit")
        return Threshold(text, metric, stat, op, value, f"sessions.{metric}.{stat}",
                         on_sessions=True)
    return Threshold(text, metric, None, op, _scalar(text, metric, stat, num, unit,
                                                     SESSION_SHARES),
                     f"sessions.{metric}", on_sessions=True)


def _scalar(text: str, metric: str, stat: str | None, num: float, unit: str,
            shares: tuple[str, ...]) -> float:
    """A scalar's limit: no statistic; a % only for one of ``shares`` (as a fraction)."""
    if stat:
        raise ThresholdError(f"threshold {text!r}: {metric} takes no statistic")
    if unit == "%":
        if metric not in shares:
            raise ThresholdError(f"threshold {text!r}: % only fits " + " and ".join(shares))
        return num / 100.0
    if unit:
        raise ThresholdError(f"threshold {text!r}: unexpected unit {unit!r}")
    return num
