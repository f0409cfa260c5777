"""``llmbench compare``: runs side by side, and a regression gate that noise alone cannot trip.

The first run is the baseline. For every common step, each chosen metric's relative change gets
a 95% bootstrap interval from the per-request data of both runs; a regression is a change
whose whole interval lies beyond ``--max-regression`` in the worse direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .report.data import Latencies, load

# metric -> (how to read it from a step summary, worse when it goes up?)
METRICS: dict[str, tuple[str, bool]] = {
    "ttft.p50": ("median_ttft_ms", True), "ttft.p95": ("p95_ttft_ms", True),
    "ttft.p99": ("p99_ttft_ms", True), "itl.p50": ("median_itl_ms", True),
    "itl.p95": ("p95_itl_ms", True), "e2el.p50": ("median_e2el_ms", True),
    "e2el.p95": ("p95_e2el_ms", True), "output_throughput": ("output_throughput", False),
    "held": ("held", False),
}
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
            return [{"index": -1, "load": load_cfg.get("concurrency") or load_cfg.get("rate") or 0,
                     "summary": s, "held": True, "hold_start": None, "hold_end": None}]
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


def _stat(values: np.ndarray, key: str) -> float:
    if key.startswith("median"):
        return float(np.percentile(values, 50))
    return float(np.percentile(values, float(key[1:key.index("_")])))


def bootstrap_change(base: Loaded, other: Loaded, sb: dict[str, Any], so: dict[str, Any],
                     metric: str, n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float] | None:
    """(point, low, high) of the relative change other/base − 1, from per-request data."""
    key, _ = METRICS[metric]
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
        q = 50.0 if key.startswith("median") else float(key[1:key.index("_")])
        cap = 4000
        bb = np.percentile(vb[rng.integers(0, len(vb), (n_boot, min(len(vb), cap)))], q, axis=1)
        bo = np.percentile(vo[rng.integers(0, len(vo), (n_boot, min(len(vo), cap)))], q, axis=1)
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
                               "regression": bad})
                if bad:
                    regressions.append(checks[-1])
                continue
            for sb in base.steps:
                so = next((s for s in other.steps if s["load"] == sb["load"]), None)
                if so is None:
                    continue
                res = bootstrap_change(base, other, sb, so, m, seed=int(sb["load"] * 10))
                if res is None:
                    continue
                point, lo, hi = res
                bad = False
                if max_regression is not None:
                    bad = lo > max_regression if worse_up else hi < -max_regression
                checks.append({"run": other.name, "metric": m, "load": sb["load"],
                               "base": sb["summary"].get(key), "value": so["summary"].get(key),
                               "change": point, "ci": [lo, hi], "regression": bad})
                if bad:
                    regressions.append(checks[-1])
    return {"runs": [{"name": r.name, "path": str(r.path), "held": r.held,
                      "fingerprint": fps[r.name], "status": r.run.get("status")} for r in runs],
            "table": table, "checks": checks, "regressions": regressions, "warnings": warnings,
            "max_regression": max_regression, "unit": "users"}
