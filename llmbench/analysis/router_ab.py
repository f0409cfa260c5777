"""The router A/B probe's statistics (pure): router minus direct per step, with bootstrap
intervals, both throughputs, and the step where the router became the bottleneck.

The load itself is ``shapes.router.RouterAB``; this module only judges what it measured.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Callable, Sequence

import numpy as np

from llmbench.analysis.metrics import per_request, summarize
from llmbench.records.record import Record
from llmbench.analysis.percentile import interval
from llmbench.analysis.stats import Grouped, slice_percentile_rows
from llmbench.results.schema import Overhead, ProbeStep, RouterBound

OVERHEAD_METRICS = ("ttft_p50", "ttft_p95", "e2el_p50", "itl_p50")
MIN_OVERHEAD_MS = 1.0
MIN_OVERHEAD_FRACTION = 0.02


def _values(records: Sequence[Record], metric: str,
            slice_of: Callable[[Record], int]) -> tuple[list[list[float]], np.ndarray]:
    """The metric's values in ms, one list per request that has any, and each request's
    slice."""
    groups: list[list[float]] = []
    slices: list[int] = []
    for r in records:
        if not r.ok:
            continue
        p = per_request(r)
        if metric.startswith("ttft"):
            got = [p.ttft] if p.ttft is not None else []
        elif metric.startswith("e2el"):
            got = [p.e2el] if p.e2el is not None else []
        else:
            got = list(p.itls)
        if got:
            groups.append([v * 1000 for v in got])
            slices.append(slice_of(r))
    return groups, np.array(slices, dtype=np.intp)


def slice_finder(slices: Sequence[tuple[str, float, float]] | None) -> Callable[[Record], int]:
    """Which slice a record ran in: the one (path, start, end) whose time holds its schedule
    (slices of one path never overlap: the other path runs in between). No slices known: 0."""
    if not slices:
        return lambda r: 0
    starts = [s[1] for s in slices]

    def find(r: Record) -> int:
        return max(bisect_right(starts, r.scheduled) - 1, 0)
    return find


def overhead(router: Sequence[Record], direct: Sequence[Record], metric: str, n_boot: int = 1000,
             seed: int = 0, slices: Sequence[tuple[str, float, float]] | None = None
             ) -> Overhead:
    """router − direct for one statistic, with a 95% bootstrap interval (pure).

    ``slices`` (path, start, end), as the probe ran them: the interval resamples whole slices
    and then whole requests within them (``stats.slice_percentile_rows``), so a machine that
    was busier during one slice than another widens the interval instead of looking like
    overhead, and one request's correlated token gaps stay together."""
    q = 95.0 if metric.endswith("p95") else 50.0
    find = slice_finder(slices)
    ga, sa = _values(router, metric, find)
    gb, sb = _values(direct, metric, find)
    a, b = Grouped(ga), Grouped(gb)
    if len(a) < 2 or len(b) < 2:
        return Overhead(router_ms=None, direct_ms=None, overhead_ms=None, ci_ms=None,
                        significant=False)
    rng = np.random.default_rng(seed)
    ra = slice_percentile_rows(a, sa, q, n_boot, rng)
    rb = slice_percentile_rows(b, sb, q, n_boot, rng)
    lo, hi = interval(ra - rb)
    point = a.percentile(q) - b.percentile(q)
    direct_v = b.percentile(q)
    # significant: the interval excludes zero (not noise) and the difference is big enough to
    # matter (at least 1 ms or 2%): an A/A probe on loopback shows a few tenths of a ms
    # from connection order alone
    matters = abs(point) >= max(MIN_OVERHEAD_MS, MIN_OVERHEAD_FRACTION * direct_v)
    return Overhead(router_ms=a.percentile(q), direct_ms=direct_v, overhead_ms=point,
                    ci_ms=[lo, hi], significant=bool((lo > 0 or hi < 0) and matters))


def evaluate_step(index: int, users: int, records: Sequence[Record],
                  active_s: dict[str, float] | None = None, n_boot: int = 1000,
                  seed: int = 0, slices: Sequence[tuple[str, float, float]] | None = None
                  ) -> ProbeStep:
    """``active_s``: seconds each path was driven in this step (its slices, not the gaps
    between them): the duration of its summary, so its throughputs are the summary's own
    (one formula, one denominator, as in run and ramp). ``slices``: (path, start, end) of
    each slice, for the intervals (``overhead``)."""
    recs = [r for r in records if r.step == index and not r.warmup]
    by_path = {name: [r for r in recs if r.path == name] for name in ("router", "direct")}
    summaries = {}
    for name, rs in by_path.items():
        seconds = (active_s or {}).get(name)
        if seconds:
            t0 = min((r.scheduled for r in rs), default=0.0)
            summaries[name] = summarize(rs, t0=t0, t_end=t0 + seconds).slim(SLIM,
                                                                             active_s=seconds)
        else:
            summaries[name] = summarize(rs).slim(SLIM)
    over = {m: overhead(by_path["router"], by_path["direct"], m, n_boot, seed + index, slices)
            for m in OVERHEAD_METRICS}
    return ProbeStep(index=index, users=users, router=summaries["router"],
                     direct=summaries["direct"], **over)


# what a probe keeps of each path's summary
SLIM = ("completed", "failed", "requests", "output_throughput", "request_throughput",
        "median_ttft_ms", "p95_ttft_ms", "median_itl_ms", "median_e2el_ms", "errors",
        "error_samples", "served_by", "backends", "cached_prompt_share", "cached_reported")


def router_bound(steps: Sequence[ProbeStep]) -> RouterBound | None:
    """The first step where the router's TTFT overhead grew beyond the first step's interval
    while the direct path stayed flat (pure)."""
    if len(steps) < 2 or steps[0].ttft_p50.ci_ms is None:
        return None
    base = steps[0].ttft_p50
    assert base.ci_ms is not None and base.overhead_ms is not None
    base_hi = base.ci_ms[1]
    base_direct = steps[0].direct.ttft.median or 0.0
    for s in steps[1:]:
        o = s.ttft_p50
        if o.ci_ms is None or o.overhead_ms is None:
            continue
        grew = o.ci_ms[0] > base_hi and o.overhead_ms - base.overhead_ms > \
            max(2.0, 0.5 * abs(base.overhead_ms))
        direct_ttft = s.direct.ttft.median
        direct_flat = (direct_ttft or 0.0) <= 1.25 * base_direct + 5.0
        if grew and direct_flat:
            return RouterBound(users=s.users, overhead_ms=o.overhead_ms,
                               first_overhead_ms=base.overhead_ms,
                               direct_ttft_p50_ms=direct_ttft)
    return None
