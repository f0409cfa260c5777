"""What a command writes into its run folder, and when: run.json from the first moment
("running"), at the end (complete or partial), or in place of a result (failed, interrupted),
and timeline.jsonl. The documents themselves are built by ``analysis.finish``; this module only
puts them on disk, atomically, and says in one line what could not be written."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from llmbench.results import lock
from llmbench.results.folder import clean_nan, is_write_error, write_error_line
from llmbench.results.schema import Run


def start(run_dir: Path | None, run: Run) -> None:
    """run.json from the first moment, status "running": a run killed with SIGKILL still leaves
    a folder that says what it was, and ``report`` rebuilds its summary from requests.jsonl."""
    lock.take(run_dir)          # a reader (report) never writes over the folder until dropped
    run.save(run_dir)


def release(run_dir: Path | None) -> None:
    """The folder unlocked: however the command ended, readers may write to it again."""
    lock.drop(run_dir)


def on_disk(run_dir: Path) -> Run | None:
    """The folder's run.json as it is now, or None (not there, not readable)."""
    try:
        return Run.load(run_dir) if (run_dir / "run.json").is_file() else None
    except (OSError, ValueError):         # RunFolderError is a ValueError
        return None


def mark(run_dir: Path, found: Run | None, fresh: Callable[[], Run], status: str,
         why: str) -> None:
    """run.json rewritten with ``status`` and ``why``: the one written when it started
    (``found``, a "running" run.json with no figures: it stays one with no figures), or
    ``fresh()`` (analysis.finish.unmeasured)."""
    if found is not None:
        found.state.status, found.state.error, found.state.pid = status, why, None
        found.measured = False
        found.save(run_dir)
    else:
        fresh().save(run_dir)


def final(run: Run, run_dir: Path | None, write_error: OSError | None) -> Run:
    """run.json at the end. When requests.jsonl could not be written the run is "failed" with
    that reason (the load was stopped then; the lines before are whole). When run.json itself
    cannot be written, the console says so and the Run is still returned."""
    from llmbench.load.harness import release_signals
    if write_error is not None:
        run.state.status = "failed"
        run.state.error = (f"{write_error_line(write_error)}; the load was stopped "
                     "there and the records before it are whole in requests.jsonl")
        print(f"error: {run.state.error}", file=sys.stderr)
    try:
        run.save(run_dir)
    except OSError as exc:
        if not is_write_error(exc):
            raise
        print(f"error: {write_error_line(exc)}; run.json was not written (the records are "
              "in requests.jsonl as far as they could be written)", file=sys.stderr)
    finally:
        release_signals()       # run.json is whole: a signal held since the load is raised
    run.path = run_dir
    return run


def whole(run: Run, run_dir: Path | None) -> None:
    """run.json at the end, as it is (the probe's), and then the signal held since the load."""
    from llmbench.load.harness import release_signals
    try:
        run.save(run_dir)
    finally:
        release_signals()       # run.json is whole: a signal held since the load is raised


def timeline(run_dir: Path | None, build: Callable[..., list[dict[str, Any]]],
             *args: Any) -> None:
    """timeline.jsonl: the run's per-second state (``build(*args)``: analysis.finish.timeline,
    made only when there is a folder to write it to)."""
    if run_dir is None:
        return
    built = build(*args)
    if not built:
        return
    try:
        with open(run_dir / "timeline.jsonl", "w", encoding="utf-8") as fh:
            for row in built:
                fh.write(json.dumps(clean_nan(row)) + "\n")
    except OSError as exc:
        if not is_write_error(exc):
            raise
        exc.filename = exc.filename or str(run_dir / "timeline.jsonl")
        print(f"error: {write_error_line(exc)}; the timeline was not written "
              f"(`llmbench report {run_dir}` rebuilds what it can)", file=sys.stderr)
