"""The statistics every consumer shares beyond a percentile (llmbench.analysis.percentile's):
rolling windows, bootstrap, Little's law, intervals that resample whole requests.

The live line, the timeline and the report read "TTFT p95 of the last 10 s" through
``recent_p95`` / ``RecentWindow``, so they cannot disagree for the same records
(tests/unit/analysis/test_percentile.py checks both against each other).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from llmbench.analysis import percentile

# the live line and the timeline's "TTFT p95 of the last N seconds"
RECENT_S = 10.0


def recent_p95(pairs: Iterable[tuple[float, float]], now: float,
               window_s: float = RECENT_S) -> float | None:
    """p95 of the values whose time lies in [now - window_s, now]: the live line's TTFT p95
    from (first token time, TTFT) pairs."""
    return percentile.percentile([v for t, v in pairs if now - window_s <= t <= now], 95.0)


class RecentWindow:
    """Sorted (time, value) pairs for many "p95 of the last N seconds" questions (timeline)."""

    def __init__(self, pairs: np.ndarray, window_s: float = RECENT_S) -> None:
        """``pairs``: time + 1j * value (complex128), given away: sorted where it is (by time,
        then value: which values fall in a window, and so its quantile, does not depend on
        the order of equal times), no index array, no sorted copies (a long run has a million
        pairs); the values are a view of it."""
        pairs.sort()
        self.times, self.values, self.window_s = pairs.real.copy(), pairs.imag, window_s

    def p95(self, now: float) -> float | None:
        lo = int(np.searchsorted(self.times, now - self.window_s, side="left"))
        hi = int(np.searchsorted(self.times, now, side="right"))
        return percentile.percentile(self.values[lo:hi], 95.0)


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
        times = r.token_times
        if not r.ok or not times:
            continue
        first, last = times[0], times[-1]           # the first and last token event
        queued = max(r.ttft - baseline_ttft_s, 0.0)
        s0, s1 = r.start + queued, last
        service += max(min(s1, end) - max(s0, start), 0.0)
        waiting += max(min(first, end) - max(r.start, start), 0.0)
        streaming += max(min(last, end) - max(first, start), 0.0)
    total = waiting + streaming
    return {"in_service": service / span, "waiting_share": waiting / total if total else 0.0,
            "streaming": streaming / span, "waiting": waiting / span}


# -- intervals that resample whole requests (compare, knee) ----------------------------------
# Why whole requests: the gaps between tokens of one request share its batch, its prompt and
# its moment of load, so they are correlated; resampling gaps one by one pretends there are
# as many independent values as gaps and gives an interval that is too narrow. A request is
# the unit that is (nearly) independent, so it is what a resample draws (a cluster bootstrap).
# A statistic with one value per request (TTFT, E2EL) is the same thing with groups of one.

LEVEL = 95.0
# resamples: start here, double until the interval's ends are known to MC_TOL, stop at the
# most; the precision, not a fixed count, decides (a fixed cap was too coarse for tight
# intervals and wasted time on wide ones)
N_BOOT_START = 2000
N_BOOT_MAX = 32000
# the ends of the interval known to 2 % of its width (+ 0.1 percentage point of change)
MC_TOL_WIDTH = 0.02
MC_TOL_ABS = 0.001
# BCa needs a jackknife (one statistic per request left out): above this many requests per
# sample it costs more than it brings (with that many requests BCa and percentile agree)
BCA_MAX_GROUPS = 3000
# values held in memory at once while resampling (rows x pooled values)
_CHUNK_VALUES = 2_000_000


# values closer than this (relative) share one bin while resampling: a percentile moves by at
# most half of it (0.1 %), and a resample costs (requests x bins), not (requests x values)
BIN_REL = 0.002


class Grouped:
    """Values pooled from groups (requests), for resampling whole groups.

    ``percentile_rows(counts, q)`` is numpy's linear percentile of the pooled values of a
    resample that takes group g ``counts[r, g]`` times, computed from each group's histogram
    over shared bins (values within BIN_REL of each other share a bin and its mean), without
    building the resample. ``percentile(q)`` is the exact one of the values as measured."""

    def __init__(self, groups: Sequence[Sequence[float] | np.ndarray]) -> None:
        from scipy import sparse
        sizes = np.array([len(g) for g in groups], dtype=int)
        self.n_groups = len(groups)
        vals = (np.concatenate([np.asarray(g, dtype=float) for g in groups])
                if len(groups) and sizes.sum() else np.array([]))
        owner = np.repeat(np.arange(self.n_groups), sizes)
        self.values = np.sort(vals)
        pos = vals > 0
        code = np.where(pos, np.round(np.log(np.where(pos, vals, 1.0)) / math.log1p(BIN_REL)),
                        -(2 ** 40)).astype(np.int64)
        keys, inv = np.unique(code, return_inverse=True)
        inv = inv.ravel()
        k = len(keys)
        sums = np.bincount(inv, weights=vals, minlength=k)
        self.bin_values = sums / np.maximum(np.bincount(inv, minlength=k), 1)
        # csr (bins x groups): a resample's bin counts are H @ counts.T
        self.hist = sparse.csr_matrix((np.ones(len(vals)), (inv, owner)),
                                      shape=(k, max(self.n_groups, 1)))

    def __len__(self) -> int:
        return len(self.values)

    def percentile(self, q: float) -> float:
        v = percentile.percentile(self.values, q)
        return float("nan") if v is None else v

    def percentile_rows(self, counts: np.ndarray, q: float) -> np.ndarray:
        counts = np.atleast_2d(counts)
        out = np.empty(len(counts))
        k = max(len(self.bin_values), 1)
        step = max(_CHUNK_VALUES // k, 1)
        for a in range(0, len(counts), step):
            w = np.asarray(self.hist @ counts[a:a + step].T.astype(float)).T
            cw = np.cumsum(w, axis=1)
            total = cw[:, -1] if cw.shape[1] else np.zeros(len(w))
            h = np.maximum(total - 1, 0) * q / 100.0
            lo = np.floor(h)
            # the value at sorted position j is in the first bin whose cumulative count
            # exceeds j (counts are whole numbers; 0.5 keeps float sums on the right side)
            i_lo = np.minimum((cw <= lo[:, None] + 0.5).sum(axis=1), k - 1)
            i_hi = np.minimum((cw <= lo[:, None] + 1.5).sum(axis=1), k - 1)
            bv = self.bin_values
            v = bv[i_lo] + (h - lo) * (bv[i_hi] - bv[i_lo])
            out[a:a + step] = np.where(total > 0, v, np.nan)
        return out


def _counts(idx: np.ndarray, n_groups: int) -> np.ndarray:
    """Row-wise bincount of resampled group indices: (..., k) -> (rows, n_groups)."""
    idx = np.asarray(idx, dtype=np.int64)
    rows = idx.reshape(-1, idx.shape[-1])
    flat = rows + (np.arange(len(rows))[:, None] * n_groups)
    return np.bincount(flat.ravel(), minlength=len(rows) * n_groups).reshape(len(rows), n_groups)


def slice_percentile_rows(g: Grouped, slice_of: np.ndarray, q: float, n_boot: int,
                          rng: np.random.Generator, cap: int = 4000) -> np.ndarray:
    """``n_boot`` resampled q-th percentiles of ``g``'s pooled values for a sample taken in
    separate stretches of time (the router probe's slices; ``slice_of[i]``: group i's slice):
    each resample draws the slices with replacement, then whole groups (requests) from the
    drawn slices (a two-stage bootstrap). A busy machine shifts a whole slice's latencies;
    resampling requests alone takes that shift for signal (an A/A probe on a shared 2-core box
    had slice medians 3 ms apart). Whole groups and not one slice at a time (``Grouped``): a
    probe has 2-3 slices per path, too few distinct resamples on their own. One slice: the
    plain cluster bootstrap."""
    out = np.empty(n_boot)
    batch = max(_CHUNK_VALUES // max(g.n_groups, 1), 1)
    for lo in range(0, n_boot, batch):
        rows = _two_stage(np.asarray(slice_of), min(batch, n_boot - lo), cap, rng)
        out[lo:lo + len(rows)] = g.percentile_rows(_counts(rows, g.n_groups), q)
    return out


def _two_stage(slice_of: np.ndarray, n_boot: int, cap: int,
               rng: np.random.Generator) -> np.ndarray:
    """(n_boot, min(n, cap)) resampled indices into ``slice_of``: per row, as many slices as
    there are drawn with replacement, then each index uniformly from the drawn slices' indices
    together (so a slice weighs by its size, as in the data)."""
    order = np.argsort(slice_of, kind="stable")
    _, start, size = np.unique(slice_of[order], return_index=True, return_counts=True)
    k, m = len(size), min(len(order), cap)
    drawn = rng.integers(0, k, size=(n_boot, k))
    cum = np.cumsum(size[drawn], axis=1)                  # (n_boot, k)
    u = rng.random((n_boot, m)) * cum[:, -1:]             # a position in the drawn slices
    slot = np.zeros((n_boot, m), dtype=np.intp)
    for j in range(k - 1):
        slot += u >= cum[:, j:j + 1]
    rows = np.arange(n_boot)[:, None]
    before = np.where(slot > 0, cum[rows, np.maximum(slot - 1, 0)], 0)
    drawn_slice = drawn[rows, slot]
    pos = start[drawn_slice] + np.minimum((u - before).astype(np.intp), size[drawn_slice] - 1)
    return order[pos]


def _mc_halfwidth(dist: np.ndarray, level: float) -> float:
    """How well B resamples pin the interval's ends: half the width of a 95% order-statistic
    interval around each end's rank (binomial), the larger of the two, in the statistic's units."""
    d = np.sort(dist[np.isfinite(dist)])
    b = len(d)
    if b < 100:
        return float("inf")
    worst = 0.0
    for a in ((100 - level) / 200, 1 - (100 - level) / 200):
        spread = 1.96 * math.sqrt(b * a * (1 - a))
        lo_i, hi_i = int(max(b * a - spread, 0)), int(min(b * a + spread, b - 1))
        worst = max(worst, (d[hi_i] - d[lo_i]) / 2)
    return worst


@dataclass
class ChangeInterval:
    """A relative change with its bootstrap confidence interval."""
    point: float            # relative change other/base - 1
    low: float
    high: float
    n_boot: int             # resamples used (chosen by precision)
    method: str             # "BCa" | "percentile" | "exact" (no spread to resample)


def change_interval(base: Grouped, other: Grouped, q: float, level: float = LEVEL,
                    seed: int = 0) -> ChangeInterval | None:
    """The relative change of the q-th percentile of pooled values, other/base - 1, with a
    ``level``% interval from resampling whole groups (requests) of each run independently.

    scipy's BCa bootstrap (bias-corrected and accelerated: a percentile of a skewed latency
    distribution is biased in small samples, and BCa corrects that) when each run has at most
    BCA_MAX_GROUPS requests, the percentile method above that."""
    if base.n_groups < 2 or other.n_groups < 2 or not len(base) or not len(other):
        return None
    pb, po = base.percentile(q), other.percentile(q)
    if not pb > 0:
        return None
    point = po / pb - 1

    def stat(ib: np.ndarray, io: np.ndarray, axis: int = -1) -> np.ndarray:
        shape = np.shape(ib)[:-1]
        vb = base.percentile_rows(_counts(ib, base.n_groups), q)
        vo = other.percentile_rows(_counts(io, other.n_groups), q)
        return (vo / np.where(vb > 0, vb, np.nan) - 1).reshape(shape)

    if np.ptp(base.values) == 0 and np.ptp(other.values) == 0:  # nothing varies
        return ChangeInterval(point, point, point, 0, "exact")
    from scipy import stats as sps         # imported here: `llmbench --help` stays instant
    method = "BCa" if max(base.n_groups, other.n_groups) <= BCA_MAX_GROUPS else "percentile"
    data = (np.arange(base.n_groups), np.arange(other.n_groups))
    batch = max(_CHUNK_VALUES // max(len(base.bin_values), len(other.bin_values),
                                     base.n_groups, other.n_groups), 1)
    rng = np.random.default_rng(seed)
    res = None
    n = N_BOOT_START
    total = 0
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # degenerate or NaN: handled below
            res = sps.bootstrap(data, stat, n_resamples=n, confidence_level=level / 100,
                                method=method, vectorized=True, paired=False, batch=batch,
                                random_state=rng, bootstrap_result=res)
        total += n
        dist = res.bootstrap_distribution
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (math.isfinite(lo) and math.isfinite(hi)) and method == "BCa":
            method = "percentile"     # BCa undefined (e.g. the jackknife has no spread)
            continue
        if not (math.isfinite(lo) and math.isfinite(hi)):
            lo, hi = percentile.interval(dist, level)
        tol = MC_TOL_WIDTH * (hi - lo) + MC_TOL_ABS
        if total >= N_BOOT_MAX or _mc_halfwidth(dist, level) <= tol:
            break
        n = total                  # double
    return ChangeInterval(point, lo, hi, total, method)


# -- throughput: per-second buckets, batch means ---------------------------------------------
# A step's output tok/s is one number per run; its noise is how the token flow varies over
# time. The window is cut into batches of about one second of token arrivals (2 to
# MAX_BATCHES of them, longer than a second when the window is longer than MAX_BATCHES s, so
# neighbouring batches are less correlated), and the spread of their rates gives the interval
# (Student t on the log of the ratio, Welch's degrees of freedom). Right for a closed loop,
# where how many requests finish is set by the service time (no Poisson count), and for an
# open loop alike; measured by scripts/bench_compare_power.py.
MAX_BATCHES = 10
MIN_RATE_WINDOW_S = 0.5


@dataclass
class Rate:
    """A token rate over a window with its batch-means standard error."""
    mean: float             # tokens per second over the window
    se: float               # standard error of that mean (batch means)
    batches: int


def token_rate(token_times: np.ndarray, weights: np.ndarray, start: float, end: float
               ) -> Rate | None:
    """Output tokens per second in [start, end) from token arrival times (seconds) and the
    tokens each arrival carried; None when the window is shorter than MIN_RATE_WINDOW_S."""
    span = end - start
    if not span >= MIN_RATE_WINDOW_S:
        return None
    k = int(min(MAX_BATCHES, max(2, math.floor(span + 1e-9))))
    per = span / k
    idx = np.floor((token_times - start) / per).astype(int)
    keep = (token_times >= start) & (idx >= 0) & (idx < k)
    sums = np.bincount(idx[keep], weights=weights[keep], minlength=k)[:k] / per
    return Rate(float(sums.mean()), float(sums.std(ddof=1) / math.sqrt(k)), k)


def rate_change(base: Rate, other: Rate, level: float = LEVEL) -> tuple[float, float, float] | None:
    """(point, low, high) relative change other/base - 1 of two rates (independent runs)."""
    if base.mean <= 0 or other.mean <= 0:
        return None
    from scipy import stats as sps
    r = math.log(other.mean / base.mean)
    vb, vo = (base.se / base.mean) ** 2, (other.se / other.mean) ** 2
    var = vb + vo
    if var == 0:
        return math.exp(r) - 1, math.exp(r) - 1, math.exp(r) - 1
    df = var ** 2 / ((vb ** 2 / (base.batches - 1)) + (vo ** 2 / (other.batches - 1)))
    t = float(sps.t.ppf(1 - (100 - level) / 200, df))
    half = t * math.sqrt(var)
    return math.exp(r) - 1, math.exp(r - half) - 1, math.exp(r + half) - 1
