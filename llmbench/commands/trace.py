"""What ``run --trace`` adds to a run: how late dispatch was against the trace."""

from __future__ import annotations

from typing import Any, Sequence

from llmbench.analysis.stats import quantile
from llmbench.records import definitions

# beyond this p99 the replay did not keep up: the server saw a gentler load than the trace's.
# The same 10 ms the loop monitor judges the generator by (DESIGN.md, scale).
BEHIND_P99_MS = 10.0


def dispatch_lag(records: Sequence[Any]) -> dict[str, Any]:
    """start - scheduled of every request (its client queue, records/definitions.py), in ms
    (scheduled: its time in the trace)."""
    lags = [definitions.client_queue(r.scheduled, r.start) * 1000.0 for r in records
            if not r.warmup and r.start]
    if not lags:
        return {"requests": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "behind": False}
    p50, p99 = quantile(lags, 50), quantile(lags, 99)
    return {"requests": len(lags), "p50_ms": round(p50 or 0.0, 3),
            "p99_ms": round(p99 or 0.0, 3), "max_ms": round(max(lags), 3),
            "behind": bool(p99 is not None and p99 > BEHIND_P99_MS),
            "behind_threshold_ms": BEHIND_P99_MS}


def console_lines(trace: dict[str, Any], lag: dict[str, Any], speed: float) -> list[str]:
    lines = [f"Trace replay: {trace['format']} {trace['path']}, {trace['requests']} requests "
             f"over {trace['span_s'] / speed:.1f} s (speed {speed:g}x)"]
    if lag["requests"]:
        lines.append(f"Dispatch lag vs trace: p50 {lag['p50_ms']:.2f} ms, "
                     f"p99 {lag['p99_ms']:.2f} ms, max {lag['max_ms']:.2f} ms")
    if lag["behind"]:
        lines.append(f"warning: the replay could not keep up with the trace (dispatch lag p99 "
                     f"{lag['p99_ms']:.1f} ms > {BEHIND_P99_MS:g} ms): the server saw a gentler "
                     "load than the trace's; lower --trace-speed or use a faster machine")
    return lines
