"""Reading run folders that did not end cleanly, for ``report``, ``compare`` and ``runs``.

A run writes run.json with status "running" when it starts and replaces it when it ends. If the
process was killed (SIGKILL, OOM, power), run.json still says "running" and has no summary, but
every finished request is in requests.jsonl: the summary is rebuilt from there, marked partial,
and written back so every later command sees the same numbers.
"""

from __future__ import annotations

import time
from pathlib import Path

from llmbench.results import lock
from llmbench.results.jsonfile import RunFolderError
from llmbench.results.schema import Run

REBUILT_NOTE = ("rebuilt from requests.jsonl: the run stopped without writing its summary "
                "(killed?); the numbers cover the requests that finished")


def _failed_message(path: Path, run: Run, what: str) -> str:
    why = str(run.state.error or "no reason recorded")[:160]
    return (f"{path}: this {run.kind} {'was interrupted' if run.status == 'interrupted' else 'failed'} "
            f"before measuring anything ({why}); nothing to {what}")


def load_checked(path: str | Path, what: str = "report") -> Run:
    """The run in a folder (``Run.load``), with a summary for a run and one per step for a
    ramp, or one clear error (a RunFolderError). ``what`` names the command in the message
    ("report", "compare")."""
    path = Path(path)
    run = Run.load(path)
    if run.kind not in ("run", "ramp", "probe"):
        raise RunFolderError(f"{path}: run.json has kind {run.kind!r}; give a folder made by "
                             "llmbench run, ramp or probe")
    if run.status in ("failed", "interrupted") and not run.measured_anything:
        raise RunFolderError(_failed_message(path, run, what))
    if run.kind == "run" and run.summary is None:
        run = rebuild_run(path, run)
    if run.kind == "ramp":
        if not run.steps and run.status == "running":
            raise RunFolderError(f"{path}: this ramp stopped before its first step ended "
                                 "(killed?); its requests are in requests.jsonl, but no step "
                                 f"finished, so there is nothing to {what}")
        live = lock.writer(path)
        if live is not None:
            run.state.live_writer = lock.writer_text(path, live)
        elif run.status == "running":
            run.state.status = "partial"
    return run


def load_noted(path: str | Path) -> tuple[Run, list[str]]:
    """``load_checked`` for ``llmbench report``, with what to tell its reader: that the run is
    in progress, was rebuilt, or is partial."""
    run = load_checked(path)
    if run.state.live_writer:
        return run, [f"note: {path} is in progress ({run.state.live_writer}): reporting what has "
                     "finished so far; run.json is left to it"]
    if run.state.note == REBUILT_NOTE:
        return run, [f"note: {path}: summary {REBUILT_NOTE}"]
    if run.status == "partial":
        return run, [f"note: {path} is a partial run (interrupted); reporting what finished"]
    return run, []


def rebuild_run(path: Path, run: Run) -> Run:
    """The summary of a ``run`` from its requests.jsonl, written back marked partial; when the
    run is still in progress (a live writer holds the folder's lock), the summary so far, not
    written: a reader never writes over a live run (``live_writer`` says who)."""
    from llmbench.analysis import metrics
    from llmbench.records.record import load_records
    log = path / "requests.jsonl"
    records = load_records(log) if log.is_file() else []
    measured = [r for r in records if r.measured]
    live = lock.writer(path)
    if not measured:
        if live is not None:
            raise RunFolderError(f"{path}: this run is in progress ({lock.writer_text(path, live)}) "
                                 "and no request has finished yet; try again later")
        raise RunFolderError(f"{path}: the run stopped (status {run.status!r}) before any "
                             "request finished; there is nothing to rebuild a summary from")
    run.summary = metrics.summarize(records)
    from llmbench.analysis.sessions import summarize_sessions
    # agent sessions, rebuilt the same way (None: no request belonged to one)
    run.findings.sessions = summarize_sessions(records, window_s=run.summary.duration or None)
    if live is not None:
        run.state.live_writer = lock.writer_text(path, live)
        return run
    run.state.status = "partial"
    run.state.note = REBUILT_NOTE
    if not run.state.started_at:
        run.state.started_at = (path / "run.json").stat().st_mtime
    run.state.rebuilt_at = time.time()
    run.save(path)
    return run
