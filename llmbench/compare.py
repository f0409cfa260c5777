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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import math

import numpy as np

from .rundata import Latencies, load
from .stats import HIGHER_IS_BETTER, bootstrap, key as summary_key, percentile_rows

# metric -> (how to read it from a step summary, worse when it goes up?), from stats' table
_COMPARED = ("ttft.p50", "ttft.p95", "ttft.p99", "itl.p50", "itl.p95", "e2el.p50", "e2el.p95",
             "output_throughput", "held")


def _entry(name: str) -> tuple[str, bool]:
    metric, _, stat = name.partition(".")
    return summary_key(metric, stat or None), metric not in HIGHER_IS_BETTER


METRICS: dict[str, tuple[str, bool]] = {m: _entry(m) for m in _COMPARED}
DEFAULT_METRICS = ("held", "ttft.p95", "itl.p95", "output_throughput")


class CompareError(ValueError):
    pass


@dataclass
class Loaded:
    name: str
    path: Path
    run: dict[str, Any]
    lat: Latencies

    @property
    def steps(self) -> list[dict[str, Any]]:
        kind = self.run.get("kind")
        if kind == "ramp":
            return self.run.get("steps") or []
        if kind == "run":
            load_cfg = self.run.get("config", {}).get("load", {})
            s = self.run.get("summary") or {}
            checks = self.run.get("thresholds") or []
            level = load_cfg.get("concurrency") or load_cfg.get("rate") or 0
            return [{"index": -1, "load": float(level),      # "inf" for --rate inf
                     "summary": s, "held": all(c["ok"] for c in checks), "checks": checks,
                     "hold_start": None, "hold_end": None}]
        raise CompareError(f"{self.path}: a {kind} run cannot be compared; compare run or ramp folders")

    @property
    def held(self) -> float:
        return max((s["load"] for s in self.steps if s["held"]), default=0.0)

    def window(self, step: dict[str, Any]) -> Latencies:
        if step["index"] == -1:
            return self.lat
        return self.lat.window(step["index"], step["hold_start"], step["hold_end"])


def name_of(run: dict[str, Any], path: Path) -> str:
    labels = run.get("labels") or {}
    if labels:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return path.name


def load_runs(paths: Sequence[str | Path]) -> list[Loaded]:
    if len(paths) < 2:
        raise CompareError("give at least two run folders to compare")
    out = []
    for p in paths:
        run, lat = load(p)
        out.append(Loaded(name_of(run, Path(p)), Path(p), run, lat))
    kinds = {r.run.get("kind") for r in out}
    if len(kinds) > 1:
        raise CompareError(f"cannot compare different kinds of runs ({', '.join(sorted(map(str, kinds)))})")
    return out


def bootstrap_change(base: Loaded, other: Loaded, sb: dict[str, Any], so: dict[str, Any],
                     metric: str, n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float] | None:
    """(point, low, high) of the relative change other/base − 1, from per-request data."""
    skey, _ = METRICS[metric]
    wb, wo = base.window(sb), other.window(so)
    rng = np.random.default_rng(seed)
    if metric == "output_throughput":
        db = _duration(sb, base)
        do = _duration(so, other)
        tb, to = wb.out_tokens[wb.ok], wo.out_tokens[wo.ok]
        if len(tb) < 2 or len(to) < 2 or not db or not do:
            return None
        # how many requests finished in the window is itself noisy (Poisson), and when every
        # reply has the same length it is the only noise there is
        bb = tb[rng.integers(0, len(tb), (n_boot, len(tb)))].mean(axis=1) \
            * rng.poisson(len(tb), n_boot) / db
        bo = to[rng.integers(0, len(to), (n_boot, len(to)))].mean(axis=1) \
            * rng.poisson(len(to), n_boot) / do
        point = (to.sum() / do) / (tb.sum() / db) - 1
    else:
        if metric.startswith("itl"):
            vb, vo = wb.itls(), wo.itls()
        elif metric.startswith("ttft"):
            vb, vo = wb.ttft_ms[wb.ok], wo.ttft_ms[wo.ok]
        else:
            vb, vo = wb.e2el_ms[wb.ok], wo.e2el_ms[wo.ok]
        if len(vb) < 2 or len(vo) < 2:
            return None
        q = 50.0 if skey.startswith("median") else float(skey[1:skey.index("_")])
        bb, bo = bootstrap(vb, vo, percentile_rows(q), n_boot, seed)
        base_v = float(np.percentile(vb, q))
        if base_v <= 0:
            return None
        point = float(np.percentile(vo, q)) / base_v - 1
    ratio = bo / np.where(bb > 0, bb, np.nan) - 1
    lo, hi = np.nanpercentile(ratio, [2.5, 97.5])
    return float(point), float(lo), float(hi)


def _duration(step: dict[str, Any], run: Loaded) -> float | None:
    if step["index"] == -1:
        return (run.run.get("summary") or {}).get("duration")
    return step["hold_end"] - step["hold_start"]


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


def _missing(summary: dict[str, Any], metric: str) -> str | None:
    """Why a metric cannot be computed from a step, or None when it can."""
    # bootstrap_change needs two successful requests on each side, for every metric
    completed = int(summary.get("completed") or 0)
    return None if completed >= 2 else f"{completed} successful request(s), need 2"


def _gate_checks(base: Loaded, other: Loaded, sb: dict[str, Any], so: dict[str, Any],
                 max_regression: float | None) -> list[dict[str, Any]]:
    """Error rate and completed requests of one common step, whatever --metric says."""
    out = []
    bs, os_ = sb["summary"], so["summary"]
    nb, no = int(bs.get("requests") or 0), int(os_.get("requests") or 0)
    kb, ko = int(bs.get("failed") or 0), int(os_.get("failed") or 0)
    row = {"run": other.name, "load": sb["load"]}
    if nb and no:
        d, lo, hi = error_rate_change(kb, nb, ko, no)
        # more failures than chance explains (the whole interval above 0) is a regression at
        # any --max-regression: a limit on latency is not a licence to fail requests
        bad = max_regression is not None and lo > 0
        out.append({**row, "metric": "error_rate", "base": kb / nb, "value": ko / no,
                    "change": d, "ci": [lo, hi], "regression": bad, "absolute": True,
                    "note": f"{kb}/{nb} -> {ko}/{no} failed"})
    else:
        out.append({**row, "metric": "error_rate", "base": kb / nb if nb else None,
                    "value": ko / no if no else None, "change": None, "ci": None,
                    "regression": max_regression is not None and nb > 0 and not no,
                    "note": f"no request on {'the candidate' if nb else 'the baseline'}"})
    cb, co = int(bs.get("completed") or 0), int(os_.get("completed") or 0)
    res = completed_change(cb, co)
    if res is not None:
        point, lo, hi = res
        out.append({**row, "metric": "completed", "base": cb, "value": co, "change": point,
                    "ci": [lo, hi], "regression": max_regression is not None
                    and hi < -max_regression, "note": None})
    else:
        out.append({**row, "metric": "completed", "base": cb, "value": co,
                    "change": -1.0 if cb else None, "ci": None,
                    "regression": max_regression is not None and cb > 0,
                    "note": "no request completed on the candidate" if cb else
                            "no request completed on the baseline: nothing to compare with"})
    return out


def compare(runs: Sequence[Loaded], metrics: Sequence[str] = DEFAULT_METRICS,
            max_regression: float | None = None) -> dict[str, Any]:
    for m in metrics:
        if m not in METRICS:
            raise CompareError(f"--metric {m!r}: choose from {', '.join(METRICS)}")
    base = runs[0]
    warnings = []
    fps = {r.name: (r.run.get("workload") or {}).get("fingerprint") for r in runs}
    if len(set(fps.values())) > 1:
        warnings.append("the runs used different workloads (fingerprints "
                        + ", ".join(f"{k}: {v}" for k, v in fps.items())
                        + "); differences may come from the prompts, not the server")
    for r in runs:
        if r.run.get("status") == "partial":
            warnings.append(f"{r.name} is a partial run (interrupted); only its finished steps count")
    loads = sorted({s["load"] for r in runs for s in r.steps})
    table = []
    for load_v in loads:
        row: dict[str, Any] = {"load": load_v, "runs": []}
        for r in runs:
            st = next((s for s in r.steps if s["load"] == load_v), None)
            row["runs"].append(None if st is None else {
                "held": st["held"], "p95_ttft_ms": st["summary"].get("p95_ttft_ms"),
                "p95_itl_ms": st["summary"].get("p95_itl_ms"),
                "output_throughput": st["summary"].get("output_throughput")})
        table.append(row)
    checks = []
    regressions = []
    for other in runs[1:]:
        for m in metrics:
            key, worse_up = METRICS[m]
            if m == "held":
                change = (other.held / base.held - 1) if base.held else 0.0
                bad = max_regression is not None and change < -max_regression
                checks.append({"run": other.name, "metric": m, "load": None, "base": base.held,
                               "value": other.held, "change": change, "ci": None,
                               "regression": bad, "note": None})
                if bad:
                    regressions.append(checks[-1])
                continue
            for sb in base.steps:
                so = next((s for s in other.steps if s["load"] == sb["load"]), None)
                if so is None:
                    continue          # reported once per step by the error-rate gate below
                res = bootstrap_change(base, other, sb, so, m, seed=int(sb["load"] * 10))
                if res is None:
                    why_b, why_o = _missing(sb["summary"], m), _missing(so["summary"], m)
                    if why_b is None and why_o is None:
                        why_b = "the baseline's value is 0"
                    # measurable on the baseline, not on the candidate: that is a regression
                    bad = max_regression is not None and why_b is None
                    note = (f"cannot be computed on the candidate ({why_o})" if why_b is None
                            else f"cannot be computed on the baseline ({why_b})")
                    checks.append({"run": other.name, "metric": m, "load": sb["load"],
                                   "base": sb["summary"].get(key),
                                   "value": so["summary"].get(key), "change": None, "ci": None,
                                   "regression": bad, "note": note})
                    if bad:
                        regressions.append(checks[-1])
                    continue
                point, lo, hi = res
                bad = False
                if max_regression is not None:
                    bad = lo > max_regression if worse_up else hi < -max_regression
                checks.append({"run": other.name, "metric": m, "load": sb["load"],
                               "base": sb["summary"].get(key), "value": so["summary"].get(key),
                               "change": point, "ci": [lo, hi], "regression": bad, "note": None})
                if bad:
                    regressions.append(checks[-1])
        last_other = max((s["load"] for s in other.steps), default=0.0)
        other_broke = any(not s["held"] for s in other.steps)
        for sb in base.steps:
            so = next((s for s in other.steps if s["load"] == sb["load"]), None)
            if so is None:
                # the candidate stopped before this load (it broke earlier): a regression;
                # a load it simply did not plan is said, not counted
                stopped = other_broke and last_other < sb["load"]
                checks.append({"run": other.name, "metric": "step", "load": sb["load"],
                               "base": None, "value": None, "change": None, "ci": None,
                               "regression": max_regression is not None and stopped
                               and sb["held"],
                               "note": "the candidate stopped before this load" if stopped
                                       else "the candidate has no step at this load"})
                if checks[-1]["regression"]:
                    regressions.append(checks[-1])
                continue
            for c in _gate_checks(base, other, sb, so, max_regression):
                checks.append(c)
                if c["regression"]:
                    regressions.append(c)
    return {"runs": [{"name": r.name, "path": str(r.path), "held": r.held,
                      "fingerprint": fps[r.name], "status": r.run.get("status")} for r in runs],
            "table": table, "checks": checks, "regressions": regressions, "warnings": warnings,
            "max_regression": max_regression, "unit": "users"}
