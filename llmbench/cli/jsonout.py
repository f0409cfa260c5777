"""--json on run and ramp: what the command measured, as one JSON document on stdout."""

from __future__ import annotations

from typing import Any


def document(kind: str, done: Any) -> dict[str, Any]:
    """run: the summary (and the threshold checks); ramp: the steps, users held and the verdict.
    Nothing measured: the error line. NaN and infinities are null, as in run.json."""
    from llmbench.results.folder import clean_nan
    run = done.run
    base = {"kind": kind, "exit_code": done.code,
            "path": str(done.run_dir) if done.run_dir is not None else None}
    if run is None:
        return {**base, "status": "failed", "error": done.error}
    base["status"] = run.status
    if kind == "run":
        out = {**base, "summary": run.summary.to_dict() if run.summary is not None else None,
               "thresholds": [c.to_dict() for c in run.findings.thresholds]}
    else:
        out = {**base, "unit": "users" if run.load_unit == "users" else "rate",
               "held": run.held,
               "steps": [{"load": s.load, "held": s.held, "summary": s.summary.to_dict(),
                          "checks": [c.to_dict() for c in s.checks]} for s in run.steps],
               "verdict": run.verdict.to_dict() if run.verdict is not None else None}
        if run.findings.repeats:
            out["repeats"] = run.held_interval
    return clean_nan(out)
