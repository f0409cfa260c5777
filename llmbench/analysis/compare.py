"""``llmbench compare``: runs side by side, and a regression gate that noise alone cannot trip.

The first run is the baseline. For every common step, each chosen metric's relative change gets
a 95% bootstrap interval from the per-request data of both runs; a regression is a change
whose whole interval lies beyond ``--max-regression`` in the worse direction.

Whatever metrics were chosen, every common step also compares the error rate and the count of
completed requests: a candidate whose requests fail is never "held: +0.0 %". A metric that can
be measured on the baseline but not on the candidate (no successful request) is a regression;
nothing is skipped without a line saying so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import math

import numpy as np

from llmbench.results.latencies import Latencies
from llmbench.analysis.recover import load_checked
from llmbench.analysis.telemetry import identity_diff, identity_line, identity_of
from llmbench.analysis.stats import Grouped, Rate, change_interval, rate_change, token_rate
from llmbench.results.schema import HIGHER_IS_BETTER, Run, Step, Summary, key as summary_key

# A latency change smaller than this is never called a regression, whatever its interval: the
# machine's scheduler moves token timestamps by about a millisecond between two runs.
TIMING_FLOOR_MS = 1.0


def timing_uncertainty_ms(*steps: Step) -> float:
    """How far the load generator's own timing could move a latency between two runs: the
    larger event-loop lag p99 and client send delay p99 of the steps compared (each run's
    monitor), at least TIMING_FLOOR_MS. A difference within it may be the machine running
    the generator, which a within-run interval cannot see (two A/A runs on a busy machine
    differ by a few ms of ITL p95 with tight intervals on both)."""
    worst = TIMING_FLOOR_MS
    for st in steps:
        mon = st.monitor
        for v in (mon.get("lag_p99_ms"), mon.get("send_delay_p99_ms"), st.summary.send_delay.p99):
            if isinstance(v, (int, float)) and math.isfinite(v):
                worst = max(worst, float(v))
    return worst


# metric -> (how to read it from a step summary, worse when it goes up?), from stats' table
_COMPARED = ("ttft.p50", "ttft.p95", "ttft.p99", "itl.p50", "itl.p95", "e2el.p50", "e2el.p95",
             "output_throughput", "held")


def _entry(name: str) -> tuple[str, bool]:
    metric, _, stat = name.partition(".")
    return summary_key(metric, stat or None), metric not in HIGHER_IS_BETTER


METRICS: dict[str, tuple[str, bool]] = {m: _entry(m) for m in _COMPARED}
DEFAULT_METRICS = ("held", "ttft.p95", "itl.p95", "output_throughput")


def _read(step: Step, name: str) -> Any:
    """A compared metric (``ttft.p95``, ``output_throughput``) of a step, as a threshold reads
    it: ``Summary.value``."""
    metric, _, stat = name.partition(".")
    return step.summary.value(metric, stat or None)


def _is_latency(name: str) -> bool:
    """A latency statistic (ms: ``ttft.p95``), not a rate or a count."""
    return bool(name.partition(".")[2])


def _within_timing(name: str, sb: Step, so: Step, vb: Any, vo: Any) -> float | None:
    """The load generator's timing uncertainty (``timing_uncertainty_ms``) when a latency
    statistic moved by no more than it, else None."""
    if not (_is_latency(name) and isinstance(vb, (int, float))
            and isinstance(vo, (int, float))):
        return None
    floor = timing_uncertainty_ms(sb, so)
    return floor if abs(vo - vb) <= floor else None


class CompareError(ValueError):
    pass


# A gate must be able to fail: NaN compares false with every change, inf and 1e308 % are never
# exceeded, 0 % fails on any point change at all. Above 1000 % (a latency eleven times the
# baseline's) no regression a user would accept is left to catch.
MAX_REGRESSION_LIMIT = 10.0


def parse_max_regression(text: str) -> float:
    """'10%' or '10' -> 0.10, '0.1' -> 0.1: a fraction in (0, MAX_REGRESSION_LIMIT], or one
    CompareError for the command line. A bare number above 1 is read as a percentage."""
    t = str(text).strip()
    percent = t.endswith("%")
    hint = "expected a percentage above 0% and at most 1000%, e.g. 10%"
    try:
        value = float(t.rstrip("%").strip())
    except ValueError:
        raise CompareError(f"--max-regression {text!r}: {hint}") from None
    if not math.isfinite(value):
        raise CompareError(f"--max-regression {text!r}: a gate at {text.strip()} can never "
                           f"fail; {hint}")
    limit = value / 100.0 if percent or value > 1 else value
    if not 0 < limit <= MAX_REGRESSION_LIMIT:
        raise CompareError(f"--max-regression {text!r}: {hint}")
    return limit


def loop_shape(run: Run) -> tuple[str, str]:
    """(closed | open, what its load counts) from run.json: a ramp's --by, a run's load."""
    if run.kind == "ramp":
        by = run.section("ramp").get("by", "users")
        return ("open", "requests per second") if by == "rate" else ("closed", "users")
    load = run.load_config
    if load.get("arrival") == "trace":
        return "open", "a trace's timestamps"
    if load.get("rate") is not None:
        return "open", "requests per second"
    return "closed", "users"


def _shape_warning(runs: Sequence["Loaded"]) -> str | None:
    """Closed and open loops side by side: their loads are on different scales (users against
    requests per second), so 'held' and every step pair numbers that measure different things."""
    shapes = {r.name: loop_shape(r.run) for r in runs}
    if len({s for s, _ in shapes.values()}) < 2:
        return None
    said = ", ".join(f"{name}: {s} loop (load = {unit})" for name, (s, unit) in shapes.items())
    return (f"the runs differ in load shape ({said}): their loads are on different scales, so "
            "'held' and the steps paired by load compare users with a rate, not one server with "
            "another; a closed loop also slows its sending when the server slows and an open "
            "loop does not. Compare runs of the same shape")


@dataclass
class Loaded:
    """One run folder read for a comparison: its name, path and Run."""
    name: str
    path: Path
    run: Run
    lat: Latencies

    @cached_property
    def steps(self) -> list[Step]:
        """A ramp's steps (a search's ladder: each load's counted step, by load); a run as
        one step (index -1) at its load level."""
        kind = self.run.kind
        if kind == "ramp":
            return self.run.ladder()
        if kind == "run":
            checks = self.run.findings.thresholds
            level = self.run.load_level or 0
            return [Step(index=-1, load=float(level),      # "inf" for --rate inf
                         summary=self.run.summary or Summary(), held=all(c.ok for c in checks),
                         checks=list(checks), monitor=self.run.findings.monitor or {})]
        raise CompareError(f"{self.path}: a {kind} run cannot be compared; compare run or ramp folders")

    @property
    def judged(self) -> bool:
        """Whether "held" means anything for this run: a ramp, or a run with thresholds (a
        run without any held nothing: it ran at its load)."""
        return self.run.kind != "run" or bool(self.run.findings.thresholds)

    @property
    def asked(self) -> int | None:
        """The requests a ``run`` was asked for (--requests; None: a duration, or a ramp)."""
        if self.run.kind != "run":
            return None
        n = self.run.section("load").get("requests")
        return int(n) if isinstance(n, (int, float)) else None

    def held_text(self) -> str:
        """What the run answered, as the comparison's first line says it: "A held 4" for a
        ramp, "A met its thresholds at 4" or "A ran at 4 (no thresholds)" for a run."""
        if self.run.kind != "run":
            return f"{self.name} held {self.held:g}"
        level = self.steps[0].load
        if not self.run.findings.thresholds:
            return f"{self.name} ran at {level:g} (no thresholds)"
        ok = self.steps[0].held
        return f"{self.name} {'met' if ok else 'failed'} its thresholds at {level:g}"

    @property
    def held(self) -> float:
        if self.run.search is not None:
            return float(self.run.held or 0.0)
        return max((s.load for s in self.steps if s.held), default=0.0)

    def window(self, step: Step) -> Latencies:
        if step.index == -1:
            return self.lat
        return self.lat.window(step.index, step.hold_start, step.hold_end)

    @cached_property
    def _tokens(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Arrival time and tokens carried of every token event of the run's successes."""
        lat = self.lat
        times, weights = [], []
        for st, ok, ttft, itl, n_out in zip(lat.start, lat.ok, lat.ttft_ms, lat.itl_ms,
                                            lat.out_tokens):
            if not ok:
                continue
            t = st + np.concatenate(([ttft], ttft + np.cumsum(itl))) / 1000.0
            times.append(t)
            # the server's token count spread over the events that carried it
            weights.append(np.full(len(t), (n_out or len(t)) / len(t)))
        if not times:
            return None
        return np.concatenate(times), np.concatenate(weights), float(lat.start[lat.ok].min())

    def rate(self, step: Step) -> Rate | None:
        """Output tok/s over the step's hold window (a run: its whole span) from the arrival
        times of every token of every request, whichever step sent it."""
        tok = self._tokens
        if tok is None:
            return None
        t_all, w_all, first = tok
        if step.index == -1 or step.hold_start is None or step.hold_end is None:
            start, end = first, float(t_all.max())
        else:
            start, end = step.hold_start, step.hold_end
        return token_rate(t_all, w_all, start, end)


def name_of(run: Run, path: Path) -> str:
    """A run's name in columns and headlines: its --label (the value of name=... or of a single
    label, else all of them), else its folder's name."""
    labels = run.state.labels or {}
    if "name" in labels:
        return str(labels["name"])
    if len(labels) == 1:
        return str(next(iter(labels.values())))
    if labels:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return path.name


def load_runs(paths: Sequence[str | Path]) -> list[Loaded]:
    if len(paths) < 2:
        raise CompareError("give at least two run folders to compare")
    out = []
    seen: dict[str, int] = {}
    for p in paths:
        run = Run.load(p)
        name = name_of(run, Path(p))
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:           # the same run twice (an A/A check): tell them apart
            name = f"{name} #{seen[name]}"
        out.append(Loaded(name, Path(p), run, run.latencies()))
    kinds = {r.run.kind for r in out}
    if len(kinds) > 1:
        raise CompareError(f"cannot compare different kinds of runs ({', '.join(sorted(map(str, kinds)))})")
    return out


def bootstrap_change(base: Loaded, other: Loaded, sb: Step, so: Step,
                     metric: str, seed: int = 0) -> tuple[float, float, float] | None:
    """(point, low, high) of the relative change other/base − 1, from per-request data:
    latency percentiles resample whole requests (stats.change_interval), throughput takes
    batch means (stats.token_rate); stats says why."""
    if metric == "output_throughput":
        rb, ro = base.rate(sb), other.rate(so)
        if rb is None or ro is None:
            return None
        return rate_change(rb, ro)
    wb, wo = base.window(sb), other.window(so)
    if metric.startswith("itl"):
        gb = [g for g, ok in zip(wb.itl_ms, wb.ok) if ok and len(g)]
        go = [g for g, ok in zip(wo.itl_ms, wo.ok) if ok and len(g)]
    elif metric.startswith("ttft"):
        gb, go = wb.ttft_ms[wb.ok][:, None], wo.ttft_ms[wo.ok][:, None]
    else:
        gb, go = wb.e2el_ms[wb.ok][:, None], wo.e2el_ms[wo.ok][:, None]
    stat = metric.partition(".")[2]             # p50, p95, p99
    q = float(stat[1:])
    res = change_interval(Grouped(gb), Grouped(go), q, seed=seed)
    return None if res is None else (res.point, res.low, res.high)


# 95% two-sided
_Z = 1.959964


def _wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + _Z * _Z / n
    mid = (p + _Z * _Z / (2 * n)) / den
    half = _Z * math.sqrt(p * (1 - p) / n + _Z * _Z / (4 * n * n)) / den
    return max(mid - half, 0.0), min(mid + half, 1.0)


def error_rate_change(kb: int, nb: int, ko: int, no: int) -> tuple[float, float, float]:
    """(difference, low, high) of the error rates other - base, in absolute terms, with
    Newcombe's 95% interval (hybrid Wilson score): sound with 0 failures and small counts,
    where a bootstrap of a step with no failure says nothing."""
    pb, po = kb / nb, ko / no
    lb, ub = _wilson(kb, nb)
    lo_, uo = _wilson(ko, no)
    d = po - pb
    return (d, d - math.sqrt((po - lo_) ** 2 + (ub - pb) ** 2),
            d + math.sqrt((uo - po) ** 2 + (pb - lb) ** 2))


def completed_change(cb: int, co: int) -> tuple[float, float, float] | None:
    """(point, low, high) relative change of completed requests other/base - 1, counts taken as
    Poisson (normal approximation on the log of the ratio). None when either side is 0."""
    if cb <= 0 or co <= 0:
        return None
    r = math.log(co / cb)
    se = math.sqrt(1 / cb + 1 / co)
    return math.exp(r) - 1, math.exp(r - _Z * se) - 1, math.exp(r + _Z * se) - 1


def _missing(summary: Summary) -> str | None:
    """Why a metric cannot be computed from a step, or None when it can."""
    # bootstrap_change needs two successful requests on each side, for every metric
    completed = summary.completed
    return None if completed >= 2 else f"{completed} successful request(s), need 2"


@dataclass
class Change:
    """One compared figure of a candidate against the baseline: at a common step's ``load``
    (None: the whole run, as ``held``), both values, the relative ``change`` (percentage
    points for an error rate: ``absolute``) with its 95 % interval, and the verdicts on it."""

    run: str
    metric: str
    load: float | None
    base: Any
    value: Any
    change: float | None
    ci: list[float] | None
    regression: bool
    note: str | None = None
    absolute: bool = False
    worse: bool = False
    better: bool = False
    improvement: bool = False


@dataclass
class Cell:
    """A run's step at one load of the side-by-side table."""

    held: bool
    p95_ttft_ms: float | None
    p95_itl_ms: float | None
    output_throughput: float | None


@dataclass
class Row:
    """One load level of a comparison: each run's cell at it (None: not run there)."""
    load: float
    runs: list[Cell | None]


@dataclass
class Compared:
    """A run of a comparison (``server``: its identity line; None: not recorded)."""

    name: str
    path: str
    held: float
    fingerprint: Any
    status: str
    server: str | None = None
    # what it answered, in words: "A held 4", or for a run "A ran at 4 (no thresholds)"
    answer: str | None = None


@dataclass
class Comparison:
    """What ``compare`` found: every change checked, and those beyond the noise apart."""

    runs: list[Compared]
    table: list[Row]
    checks: list[Change]
    regressions: list[Change]
    improvements: list[Change]
    worse: list[Change]
    warnings: list[str] = field(default_factory=list)
    # what differed between the runs' servers ({"run", "text"}), as far as they said
    server_differences: list[dict[str, Any]] = field(default_factory=list)
    max_regression: float | None = None
    unit: str = "users"


def _gate_checks(base: Loaded, other: Loaded, sb: Step, so: Step,
                 max_regression: float | None) -> list[Change]:
    """Error rate and completed requests of one common step, whatever --metric says."""
    out = []
    bs, os_ = sb.summary, so.summary
    nb, no = bs.requests, os_.requests
    kb, ko = bs.failed, os_.failed
    who, at = other.name, sb.load
    if nb and no:
        d, lo, hi = error_rate_change(kb, nb, ko, no)
        # more failures than chance explains (the whole interval above 0) is a regression at
        # any --max-regression: a limit on latency is not a licence to fail requests
        bad = max_regression is not None and lo > 0
        out.append(Change(who, "error_rate", at, kb / nb, ko / no, d, [lo, hi], bad,
                          f"{kb}/{nb} -> {ko}/{no} failed", absolute=True))
    else:
        out.append(Change(who, "error_rate", at, kb / nb if nb else None,
                          ko / no if no else None, None, None,
                          max_regression is not None and nb > 0 and not no,
                          f"no request on {'the candidate' if nb else 'the baseline'}"))
    cb, co = bs.completed, os_.completed
    ab, ao = base.asked, other.asked
    if ab is not None and ao is not None and ab != ao and nb and no:
        # runs asked for different numbers of requests: more completed is not better, so the
        # share of those asked that completed is compared (like for like), not the counts
        point = (co / no) / (cb / nb) - 1.0 if cb else None
        out.append(Change(who, "completed", at, cb / nb, co / no, point, None,
                          max_regression is not None and point is not None
                          and point < -max_regression,
                          f"{cb} of {nb} -> {co} of {no}; asked {ab} and {ao}: compared as "
                          "shares"))
        return out
    res = completed_change(cb, co)
    if res is not None:
        point, lo, hi = res
        out.append(Change(who, "completed", at, cb, co, point, [lo, hi],
                          max_regression is not None and hi < -max_regression))
    else:
        out.append(Change(who, "completed", at, cb, co, -1.0 if cb else None, None,
                          max_regression is not None and cb > 0,
                          "no request completed on the candidate" if cb else
                          "no request completed on the baseline: nothing to compare with"))
    return out


def _warnings(runs: Sequence[Loaded], fps: dict[str, Any]) -> list[str]:
    """What makes the runs less comparable: another load shape, other workloads, a partial
    run, a proxy that buffered the stream."""
    warnings = []
    shape = _shape_warning(runs)
    if shape:
        warnings.append(shape)
    if len(set(fps.values())) > 1:
        warnings.append("the runs used different workloads (fingerprints "
                        + ", ".join(f"{k}: {v}" for k, v in fps.items())
                        + "); differences may come from the prompts, not the server")
    for r in runs:
        if r.run.status == "partial":
            warnings.append(f"{r.name} is a partial run (interrupted); only its finished steps count")
        buffered = [s.load for s in r.steps if _buffered(s)]
        if buffered:
            warnings.append(f"{r.name}: a proxy buffered the stream (tokens arrived in bursts"
                            f" at {', '.join(f'{x:g}' for x in buffered)}): its TTFT, ITL and "
                            "E2EL there measure the buffer, not the model, and are not gated")
    return warnings


def _table(runs: Sequence[Loaded]) -> list[Row]:
    """Each load any run has, with each run's step there (None: no step at that load)."""
    table = []
    for load_v in sorted({s.load for r in runs for s in r.steps}):
        cells: list[Cell | None] = []
        for r in runs:
            st = next((s for s in r.steps if s.load == load_v), None)
            cells.append(None if st is None else Cell(
                st.held, st.summary.ttft.p95, st.summary.itl.p95, st.summary.output_throughput))
        table.append(Row(load_v, cells))
    return table


def _held_change(base: Loaded, other: Loaded, max_regression: float | None) -> list[Change]:
    """The users held, compared (nothing when a run had no thresholds: it held nothing)."""
    if not (base.judged and other.judged):
        return []
    change = (other.held / base.held - 1) if base.held else 0.0
    bad = max_regression is not None and change < -max_regression
    return [Change(other.name, "held", None, base.held, other.held, change, None, bad)]


def _unmeasurable(other: Loaded, sb: Step, so: Step, m: str,
                  max_regression: float | None) -> Change:
    """A metric with no interval at a step: why, and whether that is a regression (measurable
    on the baseline, not on the candidate)."""
    why_b, why_o = _missing(sb.summary), _missing(so.summary)
    bad = max_regression is not None and why_b is None and why_o is not None
    if why_b is None and why_o is None:
        note = ("a window shorter than 0.5 s has no throughput interval"
                if m == "output_throughput" else
                "cannot be computed on the baseline (its value is 0)")
    else:
        note = (f"cannot be computed on the candidate ({why_o})" if why_b is None
                else f"cannot be computed on the baseline ({why_b})")
    return Change(other.name, m, sb.load, _read(sb, m), _read(so, m), None, None, bad, note)


def _step_change(base: Loaded, other: Loaded, sb: Step, so: Step, m: str,
                 max_regression: float | None) -> Change:
    """One metric at one common step: its change with the bootstrap's interval, a regression
    when the interval is past the limit, unless the stream was buffered there or the change is
    within the load generator's own timing uncertainty."""
    res = bootstrap_change(base, other, sb, so, m, seed=int(sb.load * 10))
    if res is None:
        return _unmeasurable(other, sb, so, m, max_regression)
    worse_up = METRICS[m][1]
    point, lo, hi = res
    bad = False
    note = None
    if max_regression is not None:
        bad = lo > max_regression if worse_up else hi < -max_regression
    vb, vo = _read(sb, m), _read(so, m)
    if bad and _is_latency(m) and (_buffered(sb) or _buffered(so)):
        bad = False
        note = ("a proxy buffered the stream here: this latency measures the "
                "buffer, not the model; not gated")
    if bad and worse_up and (floor := _within_timing(m, sb, so, vb, vo)) is not None:
        bad = False
        note = (f"{vo - vb:+.1f} ms is within the load generator's own timing "
                f"uncertainty ({floor:.1f} ms: its loop lag or send delay "
                "p99): not attributed to the server")
    return Change(other.name, m, sb.load, vb, vo, point, [lo, hi], bad, note)


def _metric_changes(base: Loaded, other: Loaded, m: str,
                    max_regression: float | None) -> list[Change]:
    """One metric of a candidate against the baseline: the users held, or each common step."""
    if m == "held":
        return _held_change(base, other, max_regression)
    out = []
    for sb in base.steps:
        so = next((s for s in other.steps if s.load == sb.load), None)
        if so is not None:          # no step there: said once by the error-rate gate below
            out.append(_step_change(base, other, sb, so, m, max_regression))
    return out


def _gates(base: Loaded, other: Loaded, max_regression: float | None) -> list[Change]:
    """Each baseline step's gates (error rate, completion...) against the candidate's step at
    the same load; a load the candidate stopped before (it broke earlier) is a regression, a
    load it simply did not plan is said, not counted."""
    last_other = max((s.load for s in other.steps), default=0.0)
    other_broke = any(not s.held for s in other.steps)
    out: list[Change] = []
    for sb in base.steps:
        so = next((s for s in other.steps if s.load == sb.load), None)
        if so is None:
            stopped = other_broke and last_other < sb.load
            out.append(Change(other.name, "step", sb.load, None, None, None, None,
                              max_regression is not None and stopped and sb.held,
                              "the candidate stopped before this load" if stopped
                              else "the candidate has no step at this load"))
            continue
        out += _gate_checks(base, other, sb, so, max_regression)
    return out


def compare(runs: Sequence[Loaded], metrics: Sequence[str] = DEFAULT_METRICS,
            max_regression: float | None = None) -> Comparison:
    for m in metrics:
        if m not in METRICS:
            raise CompareError(f"--metric {m!r}: choose from {', '.join(METRICS)}")
    base = runs[0]
    fps = {r.name: (r.run.workload or {}).get("fingerprint") for r in runs}
    checks: list[Change] = []
    for other in runs[1:]:
        for m in metrics:
            checks += _metric_changes(base, other, m, max_regression)
        checks += _gates(base, other, max_regression)
    limit = max_regression or 0.0
    for c in checks:
        c.worse, c.better = _direction(c, limit)
        c.improvement = c.better and not c.regression
    return Comparison(
        runs=[Compared(r.name, str(r.path), r.held, fps[r.name], r.run.status,
                       identity_line(identity_of(r.run)), r.held_text()) for r in runs],
        server_differences=server_differences(runs),
        table=_table(runs), checks=checks, regressions=[c for c in checks if c.regression],
        improvements=[c for c in checks if c.improvement],
        worse=[c for c in checks if c.worse or c.regression],
        warnings=_warnings(runs, fps), max_regression=max_regression, unit="users")


def compare_folders(paths: Sequence[str | Path], metrics: Sequence[str] | None = None,
                    max_regression: str | None = None) -> tuple[Comparison, list[Loaded]]:
    """``llmbench compare``: the run folders (each read as ``recover.load_checked`` reads it:
    a failed or killed run is one line, or gets its summary rebuilt), the first the baseline,
    compared on ``metrics`` with the --max-regression gate; and the runs as loaded."""
    limit = None if max_regression is None else parse_max_regression(max_regression)
    for p in paths:
        load_checked(p, "compare")
    runs = load_runs(paths)
    return compare(runs, tuple(metrics or DEFAULT_METRICS), limit), runs


def server_differences(runs: Sequence["Loaded"]) -> list[dict[str, Any]]:
    """What differed between the baseline's server and each other run's, in
    ``telemetry.identity_diff``'s words; runs whose server is unknown are left out."""
    base = identity_of(runs[0].run)
    out = []
    for other in runs[1:]:
        two = len(runs) == 2
        names = ("the candidate", "the baseline") if two else (other.name, runs[0].name)
        text = identity_diff(identity_of(other.run), base, names)
        if text:
            out.append({"run": other.name, "text": (text[0].upper() + text[1:] if two else text)
                        + "."})
    return out


def _buffered(step: Step) -> bool:
    """A step whose stream a proxy buffered (metrics._bunching_store)."""
    return bool((step.summary.stream_bunching or {}).get("buffered"))


def _direction(c: Change, limit: float) -> tuple[bool, bool]:
    """(worse, better): the whole interval (no interval: the value) beyond ``limit`` on that
    side; error rates, in percentage points, beyond 0."""
    if c.change is None:
        return False, False
    m = c.metric
    worse_up = m == "error_rate" or (m in METRICS and METRICS[m][1])
    lim = 0.0 if c.absolute else limit
    lo, hi = c.ci if c.ci else (c.change, c.change)
    if worse_up:
        return lo > lim, hi < -lim
    return hi < -lim, lo > lim


def _short(c: Change, many: bool) -> str:
    where = "" if c.load is None else f" at {c.load:g}"
    who = f"{c.run}: " if many else ""
    if c.change is None:
        return f"{who}{c.metric}{where} ({c.note})"
    if c.absolute:
        return f"{who}{c.metric}{where} {c.change * 100:+.1f} pp"
    return f"{who}{c.metric}{where} {c.change * 100:+.1f}%"


def headline(result: Comparison) -> list[str]:
    """Regressions and improvements named apart: a candidate that got faster is never
    announced as "2 regression(s)"."""
    lim = result.max_regression
    many = len(result.runs) > 2
    regs, better = result.regressions, result.improvements
    beyond = f" beyond {lim * 100:g}%" if lim is not None else ""
    out = []
    if lim is not None:
        out.append(f"{len(regs)} regression{'s' if len(regs) != 1 else ''}{beyond}"
                   + (": " + "; ".join(_short(c, many) for c in regs) if regs else "."))
    else:
        worse = result.worse
        out.append("Worse (95% interval beyond 0): " + ("; ".join(_short(c, many) for c in worse)
                                                           if worse else "nothing."))
    out.append(f"{len(better)} improvement{'s' if len(better) != 1 else ''}{beyond}"
               + (": " + "; ".join(_short(c, many) for c in better) if better else "."))
    return out


# -- two settings at one load (sweep's tie-break) --------------------------------------------
# What a sweep compares settings on when they held as many users: the numbers of its table.
AT_LOAD_METRICS = ("ttft.p95", "itl.p50", "output_throughput")
# A change whose whole interval is not beyond this is no difference to name a winner on, however
# tight the interval: two settings 0.3 % apart are the same setting to a user (issue 31).
MIN_CHANGE = 0.02


@dataclass
class AtLoad:
    """One figure of two runs at a load both ran (sweep's tie-break): both values, the change
    other/base − 1 with its 95 % interval, and which side is better beyond the noise."""

    metric: str
    base: Any
    other: Any
    change: float | None = None
    ci: list[float] | None = None
    better: str | None = None           # "base", "other", or None
    note: str | None = None


def at_load(base: Loaded, other: Loaded, load: float,
            metrics: Sequence[str] = AT_LOAD_METRICS) -> dict[str, AtLoad]:
    """Each metric of two runs at one load both ran, its interval as ``compare``'s. Beyond the
    noise: the whole interval beyond ±``MIN_CHANGE`` and, for a latency, a difference over the
    load generator's own timing uncertainty (``timing_uncertainty_ms``), as compare's gate."""
    sb = next((s for s in base.steps if s.load == load), None)
    so = next((s for s in other.steps if s.load == load), None)
    out: dict[str, AtLoad] = {}
    if sb is None or so is None:
        return out
    for m in metrics:
        worse_up = METRICS[m][1]
        vb, vo = _read(sb, m), _read(so, m)
        entry = AtLoad(m, vb, vo)
        res = None
        if _missing(sb.summary) is None and _missing(so.summary) is None:
            res = bootstrap_change(base, other, sb, so, m, seed=int(load * 10))
        if res is None:
            entry.note = "too few requests or too short a window for an interval"
            out[m] = entry
            continue
        point, lo, hi = res
        entry.change, entry.ci = point, [lo, hi]
        other_better = hi < -MIN_CHANGE if worse_up else lo > MIN_CHANGE
        base_better = lo > MIN_CHANGE if worse_up else hi < -MIN_CHANGE
        if (other_better or base_better) and \
                (floor := _within_timing(m, sb, so, vb, vo)) is not None:
            other_better = base_better = False
            entry.note = (f"{vo - vb:+.2f} ms is within the load generator's own timing "
                          f"uncertainty ({floor:.1f} ms)")
        entry.better = "other" if other_better else "base" if base_better else None
        out[m] = entry
    return out
