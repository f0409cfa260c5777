"""The one percentile module (llmbench/analysis/percentile.py): every routine applies numpy's
linear rule (vLLM's), whatever form the values come in, and the summary, the live line and the
timeline read their percentiles through it."""

import math

import numpy as np
import pytest

from llmbench.analysis import metrics, percentile, stats
from llmbench.records.record import Record

PS = (0.0, 1.0, 5.0, 25.0, 33.3, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0)


def samples():
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 5, 7, 10, 24, 25, 99, 100, 101, 1000):
        yield rng.lognormal(3.0, 1.0, n)
    yield np.array([5.0, 5.0, 5.0, 5.0])               # ties
    yield np.array([0.0, 1e-9, 1e9])                    # far apart
    yield rng.integers(0, 50, 200).astype(float)        # many ties


def test_by_hand():
    v = [1.0, 2.0, 3.0, 4.0]
    assert percentile.percentile(v, 50) == 2.5
    assert percentile.percentile(v, 90) == pytest.approx(3.7)
    assert percentile.of_sorted(v, 0) == 1.0 and percentile.of_sorted(v, 100) == 4.0
    assert percentile.rank(4, 90) == (2, 3, pytest.approx(0.7))
    assert percentile.rank(1, 99) == (0, 0, pytest.approx(0.0))
    # the lerp is exact at both ends, as numpy's (a + (b - a) * 1 need not be b)
    a, b = 0.1, 0.7
    assert percentile.lerp(a, b, 0.0) == a and percentile.lerp(a, b, 1.0) == b


def test_every_form_agrees_with_numpy():
    """Sorted, read by rank (partitioned or a histogram), in any order: numpy's linear
    percentile, to the last bits (the summary computes the rank as (n - 1) * p / 100, numpy
    as n * q + (1 - q) - 1: the float rounding can differ by a few units in the last place)."""
    for v in samples():
        s = np.sort(v)
        uniq, counts = np.unique(v, return_counts=True)
        cum = np.cumsum(counts)

        def from_hist(i):
            return float(uniq[int(np.searchsorted(cum, i, side="right"))])
        for p in PS:
            want = float(np.percentile(v, p))
            assert percentile.percentile(v, p) == want          # numpy itself, any order
            assert percentile.of_any(list(v), p) == want
            for got in (percentile.of_sorted(s, p), percentile.at_rank(from_hist, len(v), p)):
                assert math.isclose(got, want, rel_tol=1e-13, abs_tol=1e-300), (len(v), p)
            assert percentile.of_sorted(s, p) == percentile.at_rank(from_hist, len(v), p)
        assert percentile.percentiles(v, PS) == [percentile.percentile(v, p) for p in PS]
        assert percentile.median(v) == float(np.median(v))


def test_no_value_is_none_never_zero():
    assert percentile.percentile([], 95) is None
    assert percentile.censored(np.array([]), 0, 50) is None
    e = percentile.empty_stats((50.0, 99.9))
    assert e == {"mean": None, "median": None, "std": None, "min": None, "max": None,
                 "p50": None, "p99.9": None, "count": 0}
    assert percentile.stats([], (95.0,))["p95"] is None


def test_censored_counts_failures_as_never_answered():
    v = np.sort(np.array([10.0, 20.0, 30.0, 40.0]))
    for p in PS:            # no failure: the plain percentile
        assert math.isclose(percentile.censored(v, 0, p), float(np.percentile(v, p)),
                            rel_tol=1e-13)
    # 4 answers and 4 failures: the median lies between 40 and +inf -> +inf, p25 among answers
    assert percentile.censored(v, 4, 50) == math.inf
    assert percentile.censored(v, 4, 25) == pytest.approx(27.5)
    assert percentile.censored(np.array([]), 3, 10) == math.inf
    # the rank exactly on the last answer: that answer, not inf
    assert percentile.censored(v, 1, 75) == 40.0


def test_stats_and_names():
    v = [0.001, 0.002, 0.003, 0.004]
    st = percentile.stats(v, (50.0, 90.0, 99.9), scale=1000.0)
    assert list(st) == ["mean", "median", "std", "min", "max", "count", "p50", "p90", "p99.9"]
    assert st["median"] == pytest.approx(2.5) and st["p90"] == pytest.approx(3.7)
    assert st["std"] == pytest.approx(float(np.std(np.array(v) * 1000.0)))   # population
    assert st["count"] == 4 and st["min"] == 1.0 and st["max"] == 4.0
    assert percentile.stat_name(99.9) == "p99.9" and percentile.stat_name(95.0) == "p95"


def test_interval():
    lo, hi = percentile.interval(np.array([*range(101), np.nan], dtype=float), 90.0)
    assert (lo, hi) == (5.0, 95.0)


def test_live_line_and_timeline_read_the_same_p95():
    """recent_p95 (the live line) and RecentWindow (the timeline) over the same pairs."""
    rng = np.random.default_rng(1)
    pairs = [(float(t), float(v)) for t, v in zip(np.sort(rng.uniform(0, 60, 500)),
                                                    rng.lognormal(-2, 1, 500))]
    w = stats.RecentWindow(np.array([t + 1j * v for t, v in pairs]))
    for now in (5.0, 10.0, 30.5, 59.9, 100.0):
        assert w.p95(now) == stats.recent_p95(pairs, now)
    assert w.p95(-1.0) is None


def test_the_summary_percentiles_are_the_rule_on_the_measured_values():
    """The summary's TTFT and E2EL percentiles (sorted in place) and ITL's (integer µs read by
    rank) are this module's rule on the per-request values."""
    rng = np.random.default_rng(2)
    recs = []
    for i in range(57):
        start = 100.0 + i * 0.1
        times = list(np.cumsum(rng.uniform(0.001, 0.03, 6)) + start + rng.uniform(0.01, 0.2))
        recs.append(Record(f"r{i}", scheduled=start, start=start, token_times=times, ok=True,
                           first_token=times[0], end=times[-1], done=times[-1],
                           output_tokens=6))
    ps = (50.0, 90.0, 99.0, 99.9)
    s = metrics.summarize(recs, percentiles=ps)
    back = list(metrics.RecordStore.of(recs))                 # token times as stored (µs)
    ttft = np.sort([r.ttft * 1000.0 for r in back])
    e2el = np.sort([r.e2el * 1000.0 for r in back])
    for p in ps:
        w = percentile.stat_name(p)
        assert s.ttft.percentiles[p] == percentile.of_sorted(ttft, p)
        assert s.value("ttft", w) == percentile.of_sorted(ttft, p)
        assert s.e2el.percentiles[p] == percentile.of_sorted(e2el, p)
        itl = np.sort([g * 1000.0 for r in back for g in r.itls])
        assert math.isclose(s.itl.percentiles[p], percentile.of_sorted(itl, p), rel_tol=1e-9)
    assert s.ttft.median == percentile.of_sorted(ttft, 50.0)
