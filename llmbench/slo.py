"""Threshold expressions such as ``ttft.p95<=2s``, checked against a summary.

Grammar:  METRIC[.STAT] OP VALUE[UNIT]
  METRIC  latency: ttft tpot itl e2el client_queue e2el_from_schedule itl_per_token max_gap
          counts and rates: errors error_rate requests completed stalls
          throughput: output_throughput (tok_s) request_throughput (req_s)
                      total_token_throughput request_goodput
  STAT    latency only: mean median p50 p90 p95 p99 max min std   (default p95)
  OP      <= < >= > == !=
  UNIT    latency: ms s (default ms); rates: % or a fraction; others: a plain number
An unknown metric or statistic is an error, never a silent pass.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

from .metrics import ALL_LATENCY_METRICS

GRAMMAR = ("METRIC[.STAT] OP VALUE[UNIT], e.g. 'ttft.p95<=2s', 'itl.p95<=200ms', 'errors==0', "
           "'error_rate<=1%', 'output_throughput>=100'; METRIC is one of "
           + ", ".join(ALL_LATENCY_METRICS) + ", errors, error_rate, requests, completed, stalls, "
           "output_throughput, request_throughput, total_token_throughput, request_goodput; STAT is "
           "mean, median, p50, p90, p95, p99, max, min or std; OP is <=, <, >=, >, == or !=")

STATS = ("mean", "median", "p50", "p90", "p95", "p99", "max", "min", "std")
SCALARS = {
    "errors": "failed", "failed": "failed", "error_rate": "error_rate", "requests": "requests",
    "completed": "completed", "stalls": "stalls",
    "output_throughput": "output_throughput", "tok_s": "output_throughput",
    "request_throughput": "request_throughput", "req_s": "request_throughput",
    "total_token_throughput": "total_token_throughput", "request_goodput": "request_goodput",
}
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
       "==": operator.eq, "!=": operator.ne}
_RE = re.compile(r"^\s*([a-z_0-9]+)(?:\.([a-z0-9]+))?\s*(<=|>=|==|!=|<|>)\s*"
                 r"([-+]?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z%]*)\s*$", re.I)

DEFAULT_THRESHOLDS = ("ttft.p95<=2s", "itl.p95<=200ms", "errors==0")


class ThresholdError(ValueError):
    pass


@dataclass(frozen=True)
class Threshold:
    text: str
    metric: str
    stat: str | None
    op: str
    value: float           # in the summary's units: ms for latency, fraction for rates
    key: str               # the summary key it reads

    def check(self, summary: dict[str, Any]) -> tuple[bool, float | None]:
        actual = summary.get(self.key)
        if actual is None:
            return False, None
        return OPS[self.op](actual, self.value), float(actual)

    def describe_value(self, v: float | None) -> str:
        if v is None:
            return "n/a"
        if self.stat is not None:
            return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms"
        if self.metric == "error_rate":
            return f"{v * 100:.1f}%"
        return f"{v:g}" if float(v).is_integer() else f"{v:.2f}"

    @property
    def limit_text(self) -> str:
        return self.describe_value(self.value)


def parse_threshold(text: str) -> Threshold:
    m = _RE.match(text)
    if not m:
        raise ThresholdError(f"threshold {text!r} does not parse; grammar: {GRAMMAR}")
    metric, stat, op, num, unit = m.group(1).lower(), m.group(2), m.group(3), float(m.group(4)), \
        m.group(5).lower()
    if metric in ALL_LATENCY_METRICS:
        stat = (stat or "p95").lower()
        if stat not in STATS:
            raise ThresholdError(f"threshold {text!r}: unknown statistic {stat!r}; use one of "
                                 + ", ".join(STATS))
        if unit in ("", "ms"):
            value = num
        elif unit == "s":
            value = num * 1000.0
        else:
            raise ThresholdError(f"threshold {text!r}: unit {unit!r} for a latency; use ms or s")
        return Threshold(text, metric, stat, op, value, f"{stat}_{metric}_ms")
    if metric in SCALARS:
        if stat:
            raise ThresholdError(f"threshold {text!r}: {metric} takes no statistic")
        if unit == "%":
            if metric != "error_rate":
                raise ThresholdError(f"threshold {text!r}: % only fits error_rate")
            num /= 100.0
        elif unit:
            raise ThresholdError(f"threshold {text!r}: unexpected unit {unit!r}")
        return Threshold(text, metric, None, op, num, SCALARS[metric])
    raise ThresholdError(f"threshold {text!r}: unknown metric {metric!r}; grammar: {GRAMMAR}")


def check_all(thresholds: list[Threshold], summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for t in thresholds:
        ok, actual = t.check(summary)
        out.append({"threshold": t.text, "ok": ok, "actual": actual, "limit": t.value,
                    "metric": t.metric, "stat": t.stat})
    return out
