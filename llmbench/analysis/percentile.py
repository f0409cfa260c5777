"""One definition of a percentile for the whole tool: numpy's linear interpolation, as vLLM
computes it (../shared/METRICS.md), whatever form the values come in.

The rule: of ``n`` values sorted ascending, the p-th percentile (0..100) lies at rank
``h = (n - 1) * p / 100``; with ``lo = floor(h)`` it is ``lerp(v[lo], v[lo + 1], h - lo)``,
numpy's lerp (``np.percentile``'s, which is written to be exact at both ends). Every routine
here applies that rule; only how the order statistics are found differs (the summary sorts its
own series in place, and reads ITL gaps at a million requests from a histogram: ``at_rank``).

``median`` is numpy's, the mean of the two middle values, which ``vllm bench serve`` writes as
``median_*`` (it can differ from ``percentile(v, 50)`` in the last bit; the summary's own series
take the median as p50 by the rule above, its small series, such as TTFO or a tool call's first
token, by numpy's median: both as before, bit for bit).

Tests: tests/unit/analysis/test_percentile.py (each routine against numpy, edge cases).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from llmbench.results.schema import pct_word

# the statistics every distribution of a summary has, in its order (the percentiles follow)
STATS = ("mean", "median", "std", "min", "max")


def stat_name(p: float) -> str:
    """A percentile's name in a summary's statistics: 95 -> 'p95', 99.9 -> 'p99.9' (vLLM's key
    spelling of the number: results.schema.pct_word)."""
    return f"p{pct_word(p)}"


def stat_names(percentiles: Iterable[float]) -> list[str]:
    """The names of a distribution's statistics: STATS, then each percentile's."""
    return [*STATS, *(stat_name(p) for p in percentiles)]


def empty_stats(percentiles: Iterable[float]) -> dict[str, float | None]:
    """The statistics of no value: every one None (never 0, which reads as "instant" and passes
    any latency limit), count 0."""
    return {**{k: None for k in stat_names(percentiles)}, "count": 0}


def rank(n: int, p: float) -> tuple[int, int, float]:
    """Where the p-th percentile of ``n`` sorted values lies: the two order statistics around
    it (0-based) and the fraction between them."""
    h = (n - 1) * p / 100.0
    lo = int(math.floor(h))
    return lo, min(lo + 1, n - 1), h - lo


def lerp(a: float, b: float, t: float) -> float:
    """np.percentile's lerp between two order statistics: from the nearer end, exact at both."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def at_rank(value_at: Callable[[int], float], n: int, p: float) -> float:
    """The p-th percentile of ``n`` values whose i-th smallest is ``value_at(i)``."""
    lo, hi, t = rank(n, p)
    return lerp(value_at(lo), value_at(hi), t)


def of_sorted(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The p-th percentile of values sorted ascending (not empty)."""
    return at_rank(lambda i: float(values[i]), len(values), p)


def percentile(values: Sequence[float] | np.ndarray, p: float) -> float | None:
    """The p-th percentile of values in any order; None when there is none."""
    return of_any(values, p) if len(values) else None


def of_any(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The p-th percentile of values in any order (not empty)."""
    return numpy_linear(np.asarray(values, dtype=float), (p,))[0]


def percentiles(values: Sequence[float] | np.ndarray, ps: Sequence[float] | np.ndarray
                ) -> list[float]:
    """Several percentiles of values in any order (not empty), in one partition."""
    return numpy_linear(np.asarray(values, dtype=float), ps)


def numpy_linear(arr: np.ndarray, ps: Sequence[float] | np.ndarray) -> list[float]:
    """``np.percentile(arr, ps)`` of a 1-d float array (not empty), operation for operation as
    numpy's default 'linear' method does it (q = p / 100, rank (n - 1) * q, a rank past the
    last value reads the last value, NaN anywhere gives NaN, then its lerp), in float64, so to
    the bit (tests/unit/analysis/test_percentile.py). Not np.percentile itself: it imports
    numpy.ma (np.unique's masked-array check), ~6 ms of every run's start-up (issue 50 §2)."""
    n = len(arr)
    spots = []
    for p in ps:
        # np.percentile refuses these; the options' checks (options.py) never let one through
        assert 0 <= p <= 100, f"percentile {p} outside 0..100"
        h = (n - 1) * (float(p) / 100)
        lo = hi = n - 1 if h >= n - 1 else 0 if h < 0 else math.floor(h)
        if h < n - 1 and h >= 0:
            hi = lo + 1
        # numpy takes the fraction from its clipped index (-1 for the last value)
        spots.append((lo, hi, h - (-1 if h >= n - 1 else lo)))
    kth = sorted({i for lo, hi, _ in spots for i in (lo, hi)} | {0, n - 1})
    part = np.partition(arr, kth)           # a copy, as np.percentile's; the last: NaN if any
    if math.isnan(part[n - 1]):
        return [math.nan] * len(spots)
    return [lerp(float(part[lo]), float(part[hi]), t) for lo, hi, t in spots]


def median(values: Sequence[float] | np.ndarray) -> float:
    """numpy's median (vLLM's ``median_*``), of values in any order (not empty)."""
    return float(np.median(np.asarray(values, dtype=float)))


def censored(sorted_values: np.ndarray, n_failed: int, p: float) -> float | None:
    """The p-th percentile where each of ``n_failed`` failed requests counts as +inf (it never
    got its answer: a censored observation), of the successes' values sorted ascending. None
    when there is no request at all; +inf when the rank falls among the failures."""
    n = len(sorted_values) + n_failed
    if n == 0:
        return None

    def v(i: int) -> float:
        return float(sorted_values[i]) if i < len(sorted_values) else float("inf")
    lo, hi, t = rank(n, p)
    if t == 0 or v(hi) == v(lo):
        return v(lo)
    if v(hi) == float("inf"):
        return float("inf")
    return v(lo) + t * (v(hi) - v(lo))


def interval(samples: np.ndarray, level: float = 95.0) -> tuple[float, float]:
    """The central ``level``% interval of resampled statistics (NaN ignored)."""
    lo, hi = np.nanpercentile(samples, [(100 - level) / 2, 100 - (100 - level) / 2])
    return float(lo), float(hi)


def stats(values: Sequence[float] | np.ndarray, ps: Iterable[float],
          scale: float = 1.0) -> dict[str, Any]:
    """A distribution's statistics (``stat_names`` and ``count``) of values in any order,
    times ``scale``: numpy's mean, median, population std (ddof 0), min, max and linear
    percentiles. Empty: ``empty_stats``."""
    ps = tuple(ps)
    if not len(values):
        return empty_stats(ps)
    arr = np.asarray(values, dtype=float) * scale
    out: dict[str, Any] = {
        "mean": float(np.mean(arr)), "median": float(np.median(arr)),
        "std": float(np.std(arr)), "min": float(np.min(arr)), "max": float(np.max(arr)),
        "count": len(values)}
    for p, v in zip(ps, numpy_linear(arr, ps)):
        out[stat_name(p)] = v
    return out
