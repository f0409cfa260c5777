"""The statistics every consumer shares: one quantile definition, rolling windows, bootstrap.

One definition of a percentile for the whole tool: numpy's linear interpolation, as vLLM
computes it. The live line, the timeline and the report read "TTFT p95" through here, so they
cannot disagree for the same records (tests/test_stats.py).
"""

from __future__ import annotations

import bisect
from typing import Callable, Iterable, Sequence

import numpy as np

# the live line and the timeline's "TTFT p95 of the last N seconds"
RECENT_S = 10.0


def quantile(values: Sequence[float] | np.ndarray, p: float) -> float | None:
    """The p-th percentile (0..100), linear interpolation (numpy's default, vLLM's); None
    when there is no value."""
    if not len(values):
        return None
    return float(np.percentile(np.asarray(values, dtype=float), p))


def recent_p95(pairs: Iterable[tuple[float, float]], now: float,
               window_s: float = RECENT_S) -> float | None:
    """p95 of the values whose time lies in (now - window_s, now]: the live line's TTFT p95
    from (first token time, TTFT) pairs. The timeline's column is the same function."""
    return quantile([v for t, v in pairs if now - window_s <= t <= now], 95.0)


class RecentWindow:
    """Sorted (time, value) pairs for many "p95 of the last N seconds" questions (timeline)."""

    def __init__(self, pairs: Iterable[tuple[float, float]], window_s: float = RECENT_S) -> None:
        pairs = list(pairs)
        self._set(np.array([p[0] for p in pairs], dtype=float),
                  np.array([p[1] for p in pairs], dtype=float), window_s)

    @classmethod
    def of_arrays(cls, times: np.ndarray, values: np.ndarray,
                  window_s: float = RECENT_S) -> "RecentWindow":
        w = cls.__new__(cls)
        w._set(np.asarray(times, dtype=float), np.asarray(values, dtype=float), window_s)
        return w

    def _set(self, times: np.ndarray, values: np.ndarray, window_s: float) -> None:
        # two float arrays, not a list of tuples: a long run has a million pairs
        order = np.lexsort((values, times))
        self.times, self.values = times[order], values[order]
        self.window_s = window_s

    def p95(self, now: float) -> float | None:
        lo = int(np.searchsorted(self.times, now - self.window_s, side="left"))
        hi = int(np.searchsorted(self.times, now, side="right"))
        return quantile(self.values[lo:hi], 95.0)


def bootstrap(a: np.ndarray, b: np.ndarray, stat: Callable[[np.ndarray], np.ndarray],
              n_boot: int = 1000, seed: int = 0, cap: int = 4000
              ) -> tuple[np.ndarray, np.ndarray]:
    """Resampled statistics of two samples: ``stat`` gets an (n_boot, n) array and returns
    one value per row. Resamples are capped at ``cap`` values so long runs stay fast (the
    percentiles stay unbiased). One generator, a then b, so results are reproducible."""
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), size=(n_boot, min(len(a), cap)))
    ib = rng.integers(0, len(b), size=(n_boot, min(len(b), cap)))
    return stat(a[ia]), stat(b[ib])


def percentile_rows(q: float) -> Callable[[np.ndarray], np.ndarray]:
    """Row-wise linear percentile, for ``bootstrap``."""
    return lambda m: np.percentile(m, q, axis=1)


def interval(samples: np.ndarray, level: float = 95.0) -> tuple[float, float]:
    """The central ``level``% interval of bootstrap samples (NaN ignored)."""
    lo, hi = np.nanpercentile(samples, [(100 - level) / 2, 100 - (100 - level) / 2])
    return float(lo), float(hi)


# -- the metric table ------------------------------------------------------------------------
# One table of what a summary holds, read by thresholds (slo), compare and the reports. A
# summary stays the flat dict of schema 1 (vLLM's key names, so run.json files keep loading);
# ``key`` is the one place that spells those names.

LATENCY = ("ttft", "tpot", "itl", "e2el")                       # vLLM's four
EXTRA_LATENCY = ("client_queue", "e2el_from_schedule", "itl_per_token", "max_gap")
CENSORED = ("ttft", "e2el", "e2el_from_schedule")               # also with failures as +inf
# reasoning models: time to first output (answer) token, reasoning time, the answer's own ITL
REASONING = ("ttfo", "reasoning_time", "output_itl")
COUNTS = ("reasoning_tokens",)         # statistics of a count: keys without "_ms"


def pct_word(p: float) -> str:
    """vLLM's key spelling: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(p)) if int(p) == p else str(p)


def key(metric: str, stat: str | None = None) -> str:
    """The summary key of METRIC.STAT: ('ttft', 'p95') -> 'p95_ttft_ms', ('ttft', 'p50') and
    ('ttft', 'median') -> 'median_ttft_ms', ('ttft', 'p95_all') -> 'p95_all_ttft_ms',
    ('ttft', 'n') -> 'n_ttft'; a scalar (no stat) is its own key ('output_throughput')."""
    if stat is None:
        return SCALARS.get(metric, metric)
    if stat == "n":
        return f"n_{metric}"
    all_ = stat.endswith("_all")
    base = stat.removesuffix("_all")
    if base == "p50":
        base = "median"
    if metric in COUNTS:
        return f"{base}_{metric}"
    return f"{base}{'_all' if all_ else ''}_{metric}_ms"


# threshold and compare names of the summary's scalars -> their keys
SCALARS = {
    "errors": "failed", "failed": "failed", "error_rate": "error_rate", "requests": "requests",
    "completed": "completed", "completed_share": "completed_share", "stalls": "stalls",
    "output_throughput": "output_throughput", "tok_s": "output_throughput",
    "request_throughput": "request_throughput", "req_s": "request_throughput",
    "total_token_throughput": "total_token_throughput", "request_goodput": "request_goodput",
    "requests_with_reasoning": "requests_with_reasoning",
    "total_reasoning_tokens": "total_reasoning_tokens",
}
SHARES = ("error_rate", "completed_share")
# which direction is worse (compare's gate)
HIGHER_IS_BETTER = ("output_throughput", "request_throughput", "total_token_throughput",
                    "request_goodput", "completed", "completed_share", "held")

VLLM_SCALARS = ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_throughput", "request_goodput", "output_throughput",
                "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests")


def value(summary: dict, metric: str, stat: str | None = None):
    """METRIC.STAT read from a summary (None when absent)."""
    return summary.get(key(metric, stat))


def to_vllm(summary: dict, percentile_metrics: Sequence[str],
            metric_percentiles: Sequence[float]) -> dict:
    """The part of a summary ``vllm bench serve --save-result`` writes, with its keys."""
    out = {k: summary.get(k) for k in VLLM_SCALARS}
    for m in percentile_metrics:
        for stat in ("mean", "median", "std"):
            out[key(m, stat)] = summary.get(key(m, stat))
        for p in metric_percentiles:
            k = f"p{pct_word(p)}_{m}_ms"        # vLLM writes p50 as p50, not median
            out[k] = summary.get(k)
    return out


# -- Little's law ----------------------------------------------------------------------------
def served_at_once(records: Sequence, start: float, end: float,
                   baseline_ttft_s: float) -> dict[str, float]:
    """Little's law on a window: mean requests in service = time in service / window length.

    Time in service excludes the part of TTFT above the unloaded baseline (time spent queued);
    intervals are clipped to the window, so requests that overlap its edges count pro rata."""
    span = max(end - start, 1e-9)
    service = 0.0
    waiting = 0.0
    streaming = 0.0
    for r in records:
        if not r.ok or r.end is None or r.first_token is None:
            continue
        queued = max((r.first_token - r.start) - baseline_ttft_s, 0.0)
        s0, s1 = r.start + queued, r.end
        service += max(min(s1, end) - max(s0, start), 0.0)
        waiting += max(min(r.first_token, end) - max(r.start, start), 0.0)
        streaming += max(min(r.end, end) - max(r.first_token, start), 0.0)
    total = waiting + streaming
    return {"in_service": service / span, "waiting_share": waiting / total if total else 0.0,
            "streaming": streaming / span, "waiting": waiting / span}
