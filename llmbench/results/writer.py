"""A run folder's life, in one object (``RunFolder``), and a sweep's folder (``SweepFolder``:
sweep.json beside each setting's ramp folder). ``analysis.finish`` builds the documents; this
module puts them on disk, atomically, and says in one line what could not be written."""

from __future__ import annotations

import json
import os
import signal as signal_mod
import sys
import time
from pathlib import Path
from typing import Any, Callable

from llmbench.load.harness import STOP_SIGNALS, release_signals
from llmbench.results import lock
from llmbench.results.folder import (clean_nan, environment, is_write_error, new_run_dir,
                                     write_error_line)
from llmbench.results.run import RunState
from llmbench.results.schema import Run, Sweep, SweepSetting


class RunFolder:
    """The folder of one command's run, planned with the plan (nothing on disk until it is
    entered) and used as ``with plan.folder as folder:``. Entering makes it (``out`` None: no
    folder, ``path`` None), locks it and writes run.json "running" (a run killed with SIGKILL
    still leaves a folder that says what it was; ``report`` rebuilds its summary from
    requests.jsonl) and config.toml (``replay``: its text, replaying the command). Leaving
    unlocks it and releases the held stop signals; a signal outside the load (Ctrl-C, SIGTERM,
    SIGHUP: KeyboardInterrupt) is taken there (``stopped``: the run.json it left and the
    error line it printed), and a bug leaves with its traceback but never with run.json
    "running"."""

    def __init__(self, out: Path | None, kind: str, target: Any, config: dict[str, Any],
                 labels: dict[str, str], replay: str | None = None) -> None:
        self.out, self.kind, self.target, self.labels = out, kind, target, labels
        self.config, self.replay = config, replay
        self.path: Path | None = None
        self.stopped: tuple[Run | None, str] | None = None
        self.runs: list[Run] = []       # the runs ``final`` wrote here (a ramp's repeats)

    def __enter__(self) -> RunFolder:
        self.stopped, self.runs = None, []
        # the folder's suffix: the 'name' label, else all labels
        label = self.labels.get("name") or "_".join(f"{k}={v}" for k, v in self.labels.items())
        self.path = new_run_dir(self.out, self.kind, label or None) if self.out else None
        lock.take(self.path)    # a reader (report) never writes over the folder until dropped
        try:
            Run(RunState(kind=self.kind, status="running", started_at=time.time(),
                         labels=self.labels, pid=os.getpid(), measured=False),
                config={"target": self.target.describe(), **self.config},
                environment=environment()).save(self.path)
        except BaseException:
            lock.drop(self.path)
            raise
        if self.path is not None and self.replay is not None:
            try:        # best effort: run.json and requests.jsonl say what happened
                (self.path / "config.toml").write_text(self.replay, encoding="utf-8")
            except OSError:
                pass
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            if isinstance(exc, KeyboardInterrupt):
                self.stopped = self._stopped(exc)
                print(f"error: {self.stopped[1]}", file=sys.stderr, flush=True)
                return True
            if isinstance(exc, Exception):
                self._crashed(exc)
            return False
        finally:
            release_signals(raise_held=False)
            lock.drop(self.path)    # however it ended, readers may write to it again

    def unmeasured(self, status: str, why: str) -> Run:
        """The run.json of a command that measured nothing: failed, interrupted, partial."""
        return Run(RunState(kind=self.kind, status=status, started_at=time.time(), error=why,
                            measured=False),
                   config={"target": self.target.describe()}, environment=environment())

    def failed(self, message: str, status: str) -> None:
        """run.json in place of a result the preflight refused, and the signal held since."""
        self.unmeasured(status, message).save(self.path)
        release_signals()           # a signal held since the load ended is raised now

    def final(self, run: Run, write_error: OSError | None,
              build: Callable[..., list[dict[str, Any]]] | None = None, *args: Any) -> Run:
        """run.json at the end, then timeline.jsonl (``build(*args)``: analysis.finish.timeline,
        made only when there is a folder to write it to). When requests.jsonl could not be
        written the run is "failed" with that reason (the load was stopped then; the lines
        before are whole). When run.json itself cannot be written, the console says so and
        the Run is still returned."""
        if write_error is not None:
            run.state.status = "failed"
            run.state.error = (f"{write_error_line(write_error)}; the load was stopped "
                               "there and the records before it are whole in requests.jsonl")
            print(f"error: {run.state.error}", file=sys.stderr)
        try:
            run.save(self.path)
        except OSError as exc:
            if not is_write_error(exc):
                raise
            print(f"error: {write_error_line(exc)}; run.json was not written (the records "
                  "are in requests.jsonl as far as they could be written)", file=sys.stderr)
        finally:
            release_signals()   # run.json is whole: a signal held since the load is raised
        run.path = self.path
        if build is not None and self.path is not None:
            self._timeline(build(*args))
        self.runs.append(run)
        return run

    def combined(self, run: Run, chosen: int) -> Run:
        """One run.json for all repeats (``run``: analysis.finish.repeats'), and the timeline
        of the repeat ``chosen`` (0-based: the median one) as timeline.jsonl."""
        if self.path is not None:
            run.save(self.path)
            timeline = self.path / f"timeline-repeat{chosen + 1}.jsonl"
            if timeline.exists():
                (self.path / "timeline.jsonl").write_bytes(timeline.read_bytes())
        return run

    def whole(self, run: Run) -> None:
        """run.json at the end, as it is (the probe's), and then the signal held since."""
        try:
            run.save(self.path)
        finally:
            release_signals()   # run.json is whole: a signal held since the load is raised

    def _timeline(self, rows: list[dict[str, Any]]) -> None:
        """timeline.jsonl: the run's per-second state."""
        if not rows or self.path is None:
            return
        try:
            with open(self.path / "timeline.jsonl", "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(clean_nan(row)) + "\n")
        except OSError as exc:
            if not is_write_error(exc):
                raise
            exc.filename = exc.filename or str(self.path / "timeline.jsonl")
            print(f"error: {write_error_line(exc)}; the timeline was not written "
                  f"(`llmbench report {self.path}` rebuilds what it can)", file=sys.stderr)

    def _on_disk(self) -> Run | None:
        """The folder's run.json as it is now, or None (not there, not readable)."""
        assert self.path is not None
        try:
            return Run.load(self.path) if (self.path / "run.json").is_file() else None
        except (OSError, ValueError):         # RunFolderError is a ValueError
            return None

    def _mark(self, found: Run | None, status: str, why: str) -> None:
        """run.json rewritten with ``status`` and ``why``: the one written when it started
        (``found``, a "running" run.json with no figures: it stays one with no figures), or
        a fresh one (``unmeasured``)."""
        if found is not None:
            found.state.status, found.state.error, found.state.pid = status, why, None
            found.state.measured = False
            found.save(self.path)
        else:
            self.unmeasured(status, why).save(self.path)

    def _stopped(self, exc: BaseException) -> tuple[Run | None, str]:
        """A signal outside the load: a run.json that is not "running" (nothing measured:
        interrupted; records on disk but no final run.json: partial, its summary rebuilt by
        ``llmbench report``), and the line that says what it skipped."""
        previous = {}
        for sig in STOP_SIGNALS:            # a second signal must not cut this short
            try:
                previous[sig] = signal_mod.signal(sig, signal_mod.SIG_IGN)
            except (ValueError, OSError):
                pass
        name = getattr(exc, "signal", "Ctrl-C")
        name = "Ctrl-C" if name == "SIGINT" else name
        try:
            return self._stopped_doc(name)
        finally:
            for sig, handler in previous.items():
                try:
                    signal_mod.signal(sig, handler)
                except (ValueError, TypeError, OSError):
                    pass

    def _stopped_doc(self, name: str) -> tuple[Run | None, str]:
        run_dir = self.path
        if run_dir is None:
            return None, f"interrupted ({name}): nothing was written (no run folder)"
        found = self._on_disk()
        if found is not None and found.status != "running":
            # the result was written whole: what came after it was skipped
            skipped = ("the rest of the output and report.html"
                       if not (run_dir / "report.html").exists() else "the rest of the output")
            found.path = run_dir
            return found, (f"interrupted ({name}) after run.json was written "
                           f"({found.status}); skipped {skipped}: `llmbench report "
                           f"{run_dir}` writes the report")
        log = run_dir / "requests.jsonl"
        if log.is_file() and log.stat().st_size > 0:
            why = (f"interrupted ({name}) before its result was written; the finished requests "
                   f"are in requests.jsonl: `llmbench report {run_dir}` rebuilds the summary "
                   "and report")
            self._mark(found, "partial", why)
            return None, why
        why = f"interrupted ({name}) before the load started: nothing was measured"
        self._mark(found, "interrupted", why)
        return None, why

    def _crashed(self, exc: Exception) -> None:
        """run.json "failed" (with what llmbench itself raised) when it still says "running"."""
        if self.path is None:
            return
        found = self._on_disk()
        if found is not None and found.status != "running":
            return
        why = (f"llmbench stopped on an error of its own ({type(exc).__name__}: "
               f"{str(exc)[:160]}); the finished requests are in requests.jsonl")
        try:
            self._mark(found, "failed", why)
        except Exception:           # noqa: BLE001 - the first error is the one to show
            pass


class SweepFolder:
    """A sweep's folder (``path``) and its document (``doc``, sweep.json): made new under
    ``out``, or read back to be taken up again (--resume)."""

    def __init__(self, path: Path, doc: Sweep) -> None:
        self.path, self.doc = path, doc

    @classmethod
    def new(cls, out: Path, label: str, doc: Sweep) -> SweepFolder:
        return cls(new_run_dir(out, "sweep", label), doc)

    @classmethod
    def read(cls, path: Path) -> SweepFolder:
        """The folder as it was left (RunFolderError, a ValueError, when sweep.json is not
        a sweep's)."""
        return cls(path, Sweep.load(path))

    def by_point(self, points: list[dict[str, str]]) -> dict[int, SweepSetting]:
        """The settings' results in the document, by their point of the grid ``points``."""
        index = {tuple(sorted(p.items())): i for i, p in enumerate(points)}
        out: dict[int, SweepSetting] = {}
        for r in self.doc.results:
            i = index.get(tuple(sorted(r.setting.items())))
            if i is not None:
                out[i] = r
        return out

    def save(self) -> dict[str, Any]:
        """sweep.json as the document is now (what was written)."""
        return self.doc.save(self.path)
