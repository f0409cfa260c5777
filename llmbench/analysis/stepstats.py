"""What a ramp's steps say beyond held / over: where between two steps the threshold is crossed
(the knee, with an interval), and whether a step had settled (steady state).

Pure: from steps (``results.schema.Step``) and records. The verdict reads both; the judge
stores a step's steady state with the step.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from llmbench.analysis import percentile
from llmbench.analysis.metrics import per_request
from llmbench.records import definitions
from llmbench.records.record import Record
from llmbench.analysis.slo import ThresholdError, parse_threshold
from llmbench.analysis.stats import Grouped
from llmbench.results.schema import OVER, Check, Knee, Steady, Step, amount, last_held

# -- knee ------------------------------------------------------------------------------------
KNEE_BOOT = 2000
KNEE_LEVEL = 95.0
# the interval covers this share of the gap between the steps: the steps are too coarse
COARSE_SHARE = 0.8
# in more than this share of resamples the next step was not worse than the one that held:
# the statistic is not clearly monotone between the steps, so interpolating says nothing
NOT_MONOTONE_SHARE = 0.05

_PCT = {"median": 50.0, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
_GROUPED = ("itl", "itl_per_token", "output_itl")
_SCALAR = ("ttft", "e2el", "tpot", "client_queue", "e2el_from_schedule", "max_gap", "ttfo")
_ATTR = {"itl": "itls", "itl_per_token": "itl_per_token", "output_itl": "output_itls"}
_BIG = 1e15          # a failed request in a failure-aware percentile (+inf), kept finite


def _window(records: Sequence[Record], step: Step) -> list[Record]:
    if not records:
        return []
    return definitions.window(records, step.index, step.hold_start or 0.0, step.hold_end or 0.0)


def _groups(recs: Sequence[Record], metric: str, stat: str, within_ms: float | None
            ) -> list[list[float]] | None:
    """Per-request values (ms) the statistic pools, one group per request it counts."""
    out: list[list[float]] = []
    all_ = stat.endswith("_all") or within_ms is not None
    for r in recs:
        if not r.ok or not r.token_times:
            if all_:
                out.append([_BIG])
            continue
        p = per_request(r)
        if metric in _GROUPED:
            v = getattr(p, _ATTR[metric]) or []
            if v:
                out.append([g * 1000.0 for g in v])
        elif metric in _SCALAR:
            v = getattr(p, metric)
            if v is not None:
                out.append([v * 1000.0])
        else:
            return None
    if within_ms is not None:           # the share of requests within T: a mean of 0/1
        out = [[1.0 if g[0] <= within_ms else 0.0] for g in out]
    return out


def _point(groups: list[list[float]], stat: str) -> float:
    vals = np.concatenate([np.asarray(x, dtype=float) for x in groups])
    base = stat.removesuffix("_all")
    return percentile.of_any(vals, _PCT[base]) if base in _PCT else float(vals.mean())


def knee(steps: Sequence[Step], records: Sequence[Record], unit: str = "users",
         seed: int = 0) -> Knee | None:
    """Where between the last step that held and the first that broke the broken threshold is
    crossed: the failing statistic interpolated linearly in load between the two steps, with
    a 95 % interval from resampling whole requests of each step (the two steps independently).

    None when no step broke after one that held; ``estimate`` is None (and ``reason`` says
    why) when the data cannot say more than "between the steps"."""
    held = last_held(steps)
    after = [] if held is None else list(steps)[list(steps).index(held) + 1:]
    # the first step that broke after the last that held (one with too few requests broke
    # nothing, so it is passed over)
    broke = next((s for s in after if s.state == OVER), None)
    if held is None or broke is None:
        return None
    x0, x1 = float(held.load), float(broke.load)
    found = []
    for c in broke.checks:
        if c.ok or c.insufficient:
            continue
        found.append(_knee_for(c, held, broke, records, x0, x1, unit, seed))
    got = [f for f in found if f is not None]
    if not got:
        return Knee(between=[x0, x1], estimate=None, ci=None, threshold=None,
                    reason="the broken threshold is not a latency statistic that can be "
                           "interpolated",
                    text=f"Held {amount(x0, unit)}, "
                         f"broke at {x1:g}.")
    # the threshold crossed first binds
    with_est = [f for f in got if f.estimate is not None]
    return min(with_est, key=lambda f: f.estimate) if with_est else got[0]


def _knee_for(c: Check, held: Step, broke: Step, records: Sequence[Record], x0: float,
              x1: float, unit: str, seed: int) -> Knee | None:
    try:
        t = parse_threshold(c.threshold)
    except ThresholdError:
        return None
    if t.stat is None or (t.within_ms is None
                          and t.stat.removesuffix("_all") not in (*_PCT, "mean")):
        return None
    stat = "mean" if t.within_ms is not None else t.stat
    g0 = _groups(_window(records, held), t.metric, stat, t.within_ms)
    g1 = _groups(_window(records, broke), t.metric, stat, t.within_ms)
    if not g0 or not g1 or len(g0) < 2 or len(g1) < 2:
        return None
    limit = t.value
    up = t.op in ("<=", "<")            # the statistic grows worse upward
    v0, v1 = _point(g0, stat), _point(g1, stat)
    out = Knee(threshold=t.text, between=[x0, x1], limit=limit,
               values=[_finite(v0), _finite(v1)], estimate=None, ci=None, reason=None)
    span = f"between {x0:g} and {x1:g} {unit}"
    if v1 >= _BIG / 10 or not (v0 <= limit < v1 if up else v0 >= limit > v1):
        out.reason = ("requests failed at the next step" if v1 >= _BIG / 10 else
                      "the statistic did not cross the limit between these steps")
        out.text = f"Holds {span} at {t.text} (no interpolation: {out.reason})."
        return out
    rng = np.random.default_rng(seed)
    b0, b1 = _boot(g0, stat, rng), _boot(g1, stat, rng)
    est = x0 + (limit - v0) / (v1 - v0) * (x1 - x0)
    worse = (b1 > b0) if up else (b1 < b0)
    frac = np.where(worse, (limit - b0) / np.where(b1 != b0, b1 - b0, np.nan), np.nan)
    # a resample already over the limit at the held step crosses at or below it; one still
    # under at the broken step, at or beyond it: clip to the gap
    frac = np.clip(frac, 0.0, 1.0)
    over0 = (b0 > limit) if up else (b0 < limit)
    under1 = (b1 <= limit) if up else (b1 >= limit)
    frac = np.where(over0, 0.0, np.where(under1, 1.0, frac))
    xs = x0 + frac * (x1 - x0)
    not_mono = float(np.mean(~worse))
    lo, hi = percentile.interval(xs, KNEE_LEVEL)
    # a percentile interval can miss its own point estimate when the resampled statistic is
    # nearly constant (one slot, the same TTFT for every request: CI saw 3.7787 outside
    # [.., 3.7781]); an interval that says "about 3.78" must hold 3.78, so widen it to it
    lo, hi = min(lo, est), max(hi, est)
    out.estimate, out.ci, out.not_monotone_share = est, [lo, hi], not_mono
    what = f"{t.text}"
    if not_mono > NOT_MONOTONE_SHARE:
        out.reason = (f"the statistic is not clearly monotone between the steps (the next "
                      f"step was no worse in {not_mono * 100:.0f}% of resamples)")
    elif hi - lo >= COARSE_SHARE * (x1 - x0):
        out.reason = "the interval covers almost the whole gap: the steps are too coarse"
    if out.reason:
        out.text = f"Holds {span} at {what}; the steps are too coarse to say more ({out.reason})."
    elif unit == "users":
        # users come in whole: the most under the limit (the crossing, rounded down), and the
        # same of the interval's ends; never as many as the step measured to break
        top = math.ceil(x1) - 1
        out.users = min(math.floor(est + 1e-9), top)
        out.users_ci = [min(math.floor(lo + 1e-9), top), min(math.floor(hi + 1e-9), top)]
        out.text = _users_text(out, x0, x1, what)
    elif f"{lo:.1f}" == f"{hi:.1f}":
        # every resample crossed at the same rate: a zero-width interval is no interval
        out.text = (f"Holds about {est:.1f} {unit} at {what} (interpolated between {x0:g} "
                    f"and {x1:g} {unit}; every resample crossed there).")
    else:
        out.text = f"Holds about {est:.1f} {unit} [{lo:.1f}, {hi:.1f}] at {what}."
    return out


def _users_text(k: Knee, x0: float, x1: float, what: str) -> str | None:
    """'Holds about 6 users [5, 7] at ttft.p95<=2s (...)'; None when no count of users lies
    between the steps (3 held, 4 broke: the knee adds nothing to that)."""
    assert k.users is not None and k.users_ci is not None
    n, (n_lo, n_hi) = k.users, k.users_ci
    if math.ceil(x1) - 1 <= x0:
        return None
    how = f"interpolated between {x0:g} and {x1:g} users, 95 % interval"
    if n_lo == n_hi:
        return (f"Holds {n} user{'s' if n != 1 else ''} at {what} ({how}: the limit is crossed "
                f"between {n} and {n + 1}).")
    return f"Holds about {n} user{'s' if n != 1 else ''} [{n_lo}, {n_hi}] at {what} ({how})."


def _finite(v: float) -> float | None:
    return None if v >= _BIG / 10 else v


def _boot(groups: list[list[float]], stat: str, rng: np.random.Generator) -> np.ndarray:
    n = len(groups)
    counts = np.zeros((KNEE_BOOT, n))
    idx = rng.integers(0, n, size=(KNEE_BOOT, n))
    np.add.at(counts, (np.repeat(np.arange(KNEE_BOOT), n), idx.ravel()), 1)
    base = stat.removesuffix("_all")
    if base in _PCT:
        return Grouped(groups).percentile_rows(counts, _PCT[base])
    sums = np.array([float(np.sum(x)) for x in groups])
    sizes = np.array([float(len(x)) for x in groups])
    return (counts @ sums) / np.maximum(counts @ sizes, 1)


# -- steady state ----------------------------------------------------------------------------
# A step whose queue is still growing has percentiles that depend on how long it was held: a
# longer hold would have measured worse. Its hold window is cut in halves and compared:
# - TTFT of the requests that started in each half, with a one-sided Mann-Whitney U test
#   (second half later?). Rank-based: latencies are skewed with long tails, and a handful of
#   slow requests cannot make a trend; no normality assumed; fine with a few requests. Halves
#   of one window are not fully independent, so a drift must also be large enough to matter:
#   the median up by DRIFT_GROWTH and DRIFT_MIN_MS.
# - Requests in flight (time-averaged over each half, from the records): a queue that grows
#   shows as more requests in flight; up by DRIFT_GROWTH and DRIFT_MIN_IN_FLIGHT.
DRIFT_P = 0.01
DRIFT_GROWTH = 1.25
DRIFT_MIN_MS = 20.0
DRIFT_MIN_IN_FLIGHT = 1.0
DRIFT_MIN_REQUESTS = 4            # per half, for the TTFT test


def _in_flight(records: Sequence[Record], a: float, b: float) -> float:
    span = max(b - a, 1e-9)
    total = 0.0
    for r in records:
        if r.warmup or not r.start:
            continue
        end = r.done or r.end or b
        total += max(min(end, b) - max(r.start, a), 0.0)
    return total / span


def steady_state(records: Sequence[Record], index: int, hold_start: float, hold_end: float
                 ) -> Steady:
    """First half against second half of a step's hold window (see above)."""
    mid = (hold_start + hold_end) / 2
    mine = [r for r in definitions.window(records, index, hold_start, hold_end)
            if r.ok and r.token_times]
    first = [r.ttft * 1000 for r in mine if definitions.started_in(r.start, hold_start, mid)]
    second = [r.ttft * 1000 for r in mine if definitions.started_in(r.start, mid, hold_end)]
    inf0 = _in_flight(records, hold_start, mid)
    inf1 = _in_flight(records, mid, hold_end)
    out = Steady(in_flight=[inf0, inf1], ttft_p50_ms=[None, None], ttft_p95_ms=[None, None],
                 p_value=None, drifting=False, why=None)
    ttft_drift = False
    if first and second:
        m0, m1 = percentile.median(first), percentile.median(second)
        out.ttft_p50_ms = [m0, m1]
        out.ttft_p95_ms = [percentile.of_any(first, 95), percentile.of_any(second, 95)]
        if len(first) >= DRIFT_MIN_REQUESTS and len(second) >= DRIFT_MIN_REQUESTS:
            p = mann_whitney_greater(second, first)
            out.p_value = p
            ttft_drift = (p < DRIFT_P and m1 >= DRIFT_GROWTH * m0 and m1 - m0 >= DRIFT_MIN_MS)
    queue_drift = inf1 >= DRIFT_GROWTH * inf0 and inf1 - inf0 >= DRIFT_MIN_IN_FLIGHT
    if ttft_drift or queue_drift:
        out.drifting = True
        parts = []
        a, b = out.ttft_p50_ms
        if a is not None and b is not None:
            parts.append(f"TTFT p50 {_ms(a)} -> {_ms(b)}")
        parts.append(f"in flight {inf0:.1f} -> {inf1:.1f}")
        out.why = ", ".join(parts) + " from the first to the second half of the hold"
    return out


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p-value that x tends to be larger than y: Mann-Whitney U, normal
    approximation with tie correction and continuity correction (scipy's "asymptotic").
    In numpy: the judge runs between steps on the event loop, where importing scipy would
    stall the users still chatting."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = len(x), len(y)
    both = np.concatenate([x, y])
    _, inv, counts = np.unique(both, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2.0)[inv.ravel()]      # average ranks of ties
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    sd = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - (counts ** 3 - counts).sum() / (n * (n - 1))))
    if sd == 0:
        return 1.0
    z = (u - n1 * n2 / 2.0 - 0.5) / sd
    return 0.5 * math.erfc(z / math.sqrt(2))


def _ms(v: float) -> str:
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms"


def drift_sentence(step: Step, unit: str) -> str | None:
    st = step.steady
    if st is None or not st.drifting:
        return None
    return (f"At {amount(step.load, unit)} the step had not settled ({st.why}): a queue was "
            "still growing, so its percentiles depend on the hold length (a longer hold would "
            "measure worse).")


# -- where to look next (ramp --find) ----------------------------------------------------------
# Response times of a closed loop: once the server is saturated it completes a fixed number of
# requests per second (lambda), and each more user adds 1/lambda seconds to every user's cycle
# (Little's law: users = lambda x (response time + think time)), so the time to a first token
# grows by 1000/lambda ms per user from the broken step down. That slope, measured at the broken
# step, places the crossing exactly for a queue; between two steps where one is not saturated
# (below the slots) a straight line would not.
_RESPONSE = ("ttft", "e2el", "e2el_from_schedule", "client_queue", "ttfo")


def aim(held: Step, broke: Step, closed_loop: bool = True) -> float | None:
    """Where between ``held`` and ``broke`` the broken threshold is crossed, from the two
    steps' summaries: a closed loop's response time walked back at its cost per user (above),
    else interpolated linearly. The threshold crossed first binds. None (the search then goes
    halfway) when no broken threshold has a number on both sides: errors==0, failures as
    infinity, no data. The next step checks the aim either way."""
    x0, x1 = float(held.load), float(broke.load)
    found: list[float] = []
    for c in broke.checks:
        if c.ok or c.insufficient or c.outage or c.actual is None or c.limit is None:
            continue
        v1, limit = float(c.actual), float(c.limit)
        if not math.isfinite(v1):
            continue
        up = (c.op or "<=") in ("<=", "<")
        if c.metric in _RESPONSE and c.stat not in (None, "within") and closed_loop and up:
            rate = broke.summary.request_throughput
            if rate and rate > 0:
                found.append(x1 - (v1 - limit) / (1000.0 / rate))
                continue
        v0 = _held_value(held, c)
        if v0 is None or not math.isfinite(v0) or v1 == v0:
            continue
        if (up and not v0 <= limit < v1) or (not up and not v0 >= limit > v1):
            continue
        found.append(x0 + (limit - v0) / (v1 - v0) * (x1 - x0))
    return min(found) if found else None


def _held_value(held: Step, c: Check) -> float | None:
    """The held step's value of the statistic a broken check judged."""
    match = next((h for h in held.checks if h.threshold == c.threshold), None)
    if match is not None and match.actual is not None:
        return float(match.actual)
    return None
