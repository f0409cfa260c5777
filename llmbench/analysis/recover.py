"""Reading run folders that did not end cleanly, for ``report``, ``compare`` and ``runs``.

A run writes run.json with status "running" when it starts and replaces it when it ends. If the
process was killed (SIGKILL, OOM, power), run.json still says "running" and has no summary, but
every finished request is in requests.jsonl: the summary is rebuilt from there, marked partial,
and written back so every later command sees the same numbers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from llmbench.results.folder import RunDoc, RunFolderError, load_run

REBUILT_NOTE = ("rebuilt from requests.jsonl: the run stopped without writing its summary "
                "(killed?); the numbers cover the requests that finished")


def _failed_message(path: Path, run: dict[str, Any], what: str) -> str:
    why = str(run.get("error") or "no reason recorded")[:160]
    status = run.get("status")
    return (f"{path}: this {run.get('kind')} {'was interrupted' if status == 'interrupted' else 'failed'} "
            f"before measuring anything ({why}); nothing to {what}")


def load_checked(path: str | Path, what: str = "report") -> dict[str, Any]:
    """run.json, with a summary for a run and one per step for a ramp, or one clear error.

    ``what`` names the command in the message ("report", "compare")."""
    path = Path(path)
    run = load_run(path)
    kind, status = run.get("kind"), run.get("status")
    if kind not in ("run", "ramp", "probe"):
        raise RunFolderError(f"{path}: run.json has kind {kind!r}; give a folder made by "
                             "llmbench run, ramp or probe")
    if status in ("failed", "interrupted") and not run.get("summary") and not run.get("steps"):
        raise RunFolderError(_failed_message(path, run, what))
    if kind == "run" and not isinstance(run.get("summary"), dict):
        run = rebuild_run(path, run)
    if kind == "ramp":
        steps = run.get("steps")
        if steps is None and status == "running":
            raise RunFolderError(f"{path}: this ramp stopped before its first step ended "
                                 "(killed?); its requests are in requests.jsonl, but no step "
                                 f"finished, so there is nothing to {what}")
        if not isinstance(steps, list):
            raise RunFolderError(f"{path}: run.json has no list of steps; it was cut short or "
                                 "edited by hand")
        for i, st in enumerate(steps):
            if not isinstance(st, dict) or not isinstance(st.get("summary"), dict):
                raise RunFolderError(f"{path}: step {i + 1} in run.json has no summary; it was "
                                     "cut short or edited by hand")
        if status == "running":
            run["status"] = "partial"
    return run


def rebuild_run(path: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The summary of a ``run`` from its requests.jsonl, written back marked partial."""
    from llmbench.analysis import metrics
    from llmbench.records.record import load_records
    log = path / "requests.jsonl"
    records = load_records(log) if log.is_file() else []
    measured = [r for r in records if r.measured]
    if not measured:
        raise RunFolderError(f"{path}: the run stopped (status {run.get('status')!r}) before any "
                             "request finished; there is nothing to rebuild a summary from")
    run = dict(run)
    run["summary"] = metrics.summarize(records)
    from llmbench.analysis.sessions import summarize_sessions
    sessions = summarize_sessions(records, window_s=run["summary"].get("duration") or None)
    if sessions is not None:                # agent sessions, rebuilt the same way
        run["sessions"] = sessions.to_dict()
    run["status"] = "partial"
    run["note"] = REBUILT_NOTE
    run.setdefault("started_at", (path / "run.json").stat().st_mtime)
    run["rebuilt_at"] = time.time()
    return RunDoc.from_json(run).write(path)
