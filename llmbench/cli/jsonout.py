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
    base["status"] = run.get("status")
    if kind == "run":
        out = {**base, "summary": run.get("summary"), "thresholds": run.get("thresholds") or []}
    else:
        steps = run.get("steps") or []
        held = [s["load"] for s in steps if s.get("held")]
        out = {**base, "unit": ((run.get("config") or {}).get("ramp") or {}).get("by", "users"),
               "held": max(held) if held else None,
               "steps": [{"load": s.get("load"), "held": s.get("held"),
                          "summary": s.get("summary"), "checks": s.get("checks")}
                         for s in steps],
               "verdict": run.get("verdict")}
        if run.get("repeats"):
            out["repeats"] = run["repeats"].get("held")
    return clean_nan(out)
