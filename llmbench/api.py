"""llmbench as a library: run, ramp, sweep and probe a server from Python, report and compare
run folders, read any run folder back, and start the built-in mock; no Typer here, the command
line is one client of the same specs (llmbench/commands/).

Each command takes its spec, a typed dataclass (``llmbench.run(llmbench.RunSpec(url=...,
concurrency=8, duration=60.0))``), or the spec's fields as keywords (``llmbench.run(url=...,
concurrency=8)``): the same names, types and defaults, checked by a type checker (the package
ships ``py.typed``). Every field is the command line option's name in snake_case; the command
line's other spellings work too (``max_tokens`` is ``output_tokens``, ``no_stream=True`` is
``stream=False``). Values are Python values (seconds as ``float`` or ``timedelta``, ``users=[1,
2, 4]``, ``rate=4.0``, thresholds as ``Threshold`` objects or texts, ``label={"name": "a"}``),
or the command line's texts (``duration="2m"``). A bad value raises ``UsageError`` with the line
the command line prints; a server that cannot be used raises ``ServerUnreachable`` (or
``ServerRefused``); a run that started but did not end as a result raises ``RunFailed``, which
carries what was measured (``exc.run``). Nothing is printed unless ``progress=True`` (then
everything the command prints, tables and the live line), or ``progress=None`` (the tables,
and the live line on a terminal).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import io
import os
import sys
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, ParamSpec, TypeVar, overload

from llmbench.commands.report import Comparison, Report, perform_compare, perform_report
from llmbench.specs.probe import ProbeSpec
from llmbench.specs.ramp import RampSpec
from llmbench.specs.report import CompareSpec, ReportSpec
from llmbench.specs.run import RunSpec
from llmbench.specs.sweep import SweepSpec
from llmbench.errors import (EXIT_INTERRUPTED, EXIT_OVERLOADED, EXIT_UNREACHABLE, EXIT_WRITE,
                             CommandFailed, LlmbenchError, RunFailed, UsageError, failure)
from llmbench.results.schema import Run, RunResult, Sweep
import llmbench.report.notebook  # noqa: F401,E402  (a Run and a Step draw themselves in Jupyter)

__all__ = ["run", "ramp", "sweep", "probe", "report", "compare", "load_run", "mock",
           "RunSpec", "RampSpec", "SweepSpec", "ProbeSpec", "ReportSpec", "CompareSpec",
           "Report", "Comparison"]

P = ParamSpec("P")
S = TypeVar("S")
R = TypeVar("R")


@contextlib.contextmanager
def _output(progress: bool | None) -> Iterator[None]:
    """progress=False: nothing reaches the caller's stdout or stderr (it is kept for errors)."""
    if progress is not False:
        yield
        return
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


@contextlib.contextmanager
def _typed_errors() -> Iterator[None]:
    """An input error (a bad dataset, threshold, URL...) leaves as its LlmbenchError (a
    UsageError with the CLI's one line); anything else is a bug and leaves as it is."""
    from llmbench.specs.errors import translate
    try:
        yield
    except LlmbenchError:
        raise
    except Exception as exc:
        err = translate(exc)
        if err is None:
            raise
        raise err from exc


class Command(Generic[S, P, R]):
    """One command of the API: ``command(spec)`` with its spec (a typed dataclass), or
    ``command(**fields)`` with the spec's fields as keywords (typed the same: a misspelt
    keyword fails the type check, and at run time is a UsageError with "did you mean").
    Returns what the command made (a ``Run``, a ``Report``, a ``Comparison``)."""

    def __init__(self, spec: Callable[P, S], perform: Callable[[S], R], doc: str) -> None:
        self.spec = spec
        self._perform = perform
        self.__doc__ = doc
        self.__name__ = self.__qualname__ = getattr(spec, "command", "command")
        self.__signature__ = _signature(spec)

    @overload
    def __call__(self, spec: S, /) -> R: ...

    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        cls: Any = self.spec
        what = f"llmbench.{cls.command}()"
        # progress asked for (a spec given whole: anything but its default, False)
        given = "progress" in kwargs or "no_progress" in kwargs
        with _typed_errors():
            if len(args) == 1 and not kwargs and isinstance(args[0], cls):
                spec = args[0]
                given = getattr(spec, "progress", False) is not False
            else:
                positional = [f.name for f in dataclasses.fields(cls) if not f.kw_only]
                if len(args) > len(positional):
                    raise UsageError(f"{what}: give the options as keywords "
                                     f"(or one {cls.__name__})")
                spec = cls.from_options({**dict(zip(positional, args)), **kwargs}, what)
            spec, cell = _in_cell(spec, given)
            return _perform(spec, self._perform, cell)

    def __repr__(self) -> str:
        return f"<llmbench.{self.__name__}: {self.spec.__name__}(...) or its fields as keywords>"  # type: ignore[attr-defined]


def _in_cell(spec: Any, given: bool) -> tuple[Any, bool]:
    """progress="notebook", or no progress asked for in a Jupyter kernel: the live view in the
    cell (and nothing on the console); "notebook" outside a kernel: the console's, with a note."""
    if not hasattr(spec, "progress"):
        return spec, False
    from llmbench.report import notebook
    if spec.progress == "notebook":
        if notebook.in_notebook():
            return dataclasses.replace(spec, progress=False), True
        print("note: progress='notebook' needs a Jupyter kernel (IPython's display), and this "
              "is not one: showing the console's live view instead", file=sys.stderr)
        return dataclasses.replace(spec, progress=True), False
    return spec, not given and notebook.in_notebook()


def _perform(spec: Any, perform: Callable[[Any], Any], in_cell: bool) -> Any:
    """The command, its --dashboard opened first (before the output is silenced, so its URL
    reaches the caller) and its live view in the notebook's cell when asked."""
    board = None
    if getattr(spec, "dashboard", None) is not None:
        from llmbench.report.dashboard import handle
        board = handle.shared(spec.dashboard_at())
    cell = None
    if in_cell:
        from llmbench.report import notebook
        from llmbench.report.dashboard import handle
        cell = notebook.cell_view()
        handle.set_cell_view(cell)
    try:
        with _output(getattr(spec, "progress", False)):
            return _own_loop(lambda: perform(spec))
    finally:
        if cell is not None:
            handle.set_cell_view(None)
            cell.close()
        if board is not None:
            # left up for the next run (and until the interpreter exits), unless a linger
            # was given: then kept that long and closed
            from llmbench.report.dashboard import handle
            handle.end_of_command(cli=False)


def _signature(spec: Any) -> inspect.Signature:
    """The keywords a command takes, for help() and editors: the spec's fields (not the other
    spellings), with the command line's defaults as the spec has them."""
    params = [inspect.Parameter("spec", inspect.Parameter.POSITIONAL_ONLY, default=None,
                                annotation=spec.__name__)]
    for f in dataclasses.fields(spec):
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=f.type))
    return inspect.Signature(params)


def _own_loop(fn: Callable[[], Any]) -> Any:
    """``fn()``, where it can run its own event loops. Called inside a running event loop (a
    Jupyter cell, a coroutine calling llmbench.run), it runs on a thread of its own and this
    one waits: a KeyboardInterrupt (Jupyter's interrupt) is delivered to the run as Ctrl-C is
    (finish in-flight requests; twice: stop now). In any other thread it runs right there (its
    signal handlers are the main thread's: a run off the main thread is not interrupted)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()                     # no loop running in this thread: as the command line
    import threading
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:    # noqa: BLE001 - handed back to the caller's thread
            box["error"] = exc
    from llmbench.load.harness import interrupt_runs
    t = threading.Thread(target=main, name="llmbench-run", daemon=True)
    previous = None
    if threading.current_thread() is threading.main_thread():
        # asyncio.run's own SIGINT handler would only cancel the task that is blocked here:
        # while the run lasts, Ctrl-C is the run's, as on the command line
        import signal
        previous = signal.signal(signal.SIGINT, lambda *_: interrupt_runs())
    t.start()
    interrupts = 0
    try:
        while t.is_alive():
            try:
                t.join(0.25)
            except KeyboardInterrupt:
                interrupts += 1
                if not interrupt_runs() or interrupts > 2:
                    raise
    finally:
        if previous is not None:
            import signal
            signal.signal(signal.SIGINT, previous)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _perform_spec(kind: str, spec: Any) -> Any:
    """The command's wiring (llmbench/commands/<kind>.py ``perform_spec``): spec -> plan ->
    harness -> Run, a Done."""
    import importlib
    return importlib.import_module(f"llmbench.commands.{kind}").perform_spec(spec)


T = TypeVar("T", Run, Sweep)


def _result(done: Any, what: str, kind: type[T]) -> T:
    """The Run (or Sweep) of a finished command, or the exception for one that is not a
    result."""
    if done.run is None:
        raise failure(done.error or f"the {what} measured nothing", done.code)
    result: T = done.run
    if done.run_dir is not None:
        result.path = Path(done.run_dir)
    if kind is Sweep and done.code == EXIT_UNREACHABLE:
        raise RunFailed(str(result.answer or "no setting could be measured"), done.code, result)
    if done.code == EXIT_INTERRUPTED:
        raise RunFailed(f"the {what} was interrupted; exc.run holds what finished",
                        done.code, result)
    if done.code == EXIT_WRITE or result.status == "failed":
        error = result.error if isinstance(result, Sweep) else result.state.error
        raise RunFailed(str(error or f"the {what} failed"), done.code, result)
    if isinstance(result, Run) and done.code == EXIT_OVERLOADED and \
            result.findings.workers is not None and result.findings.workers.crashed:
        raise RunFailed(f"a worker process died during the {what}; exc.run holds the "
                        "incomplete figures", done.code, result)
    return result


run = Command(RunSpec, lambda s: RunResult.of(_result(_perform_spec("run", s), "run", Run)), """``llmbench run``: one load
level. ``run(RunSpec(...))`` or ``run(url=..., concurrency=8, ...)``. Returns the Run
(``run.summary.ttft.p50``, ``run.summary.output_throughput``, ``run.path``); failed thresholds
are in ``run.findings.thresholds`` (``run.passed``, ``run.exit_code``), not an exception.""")

ramp = Command(RampSpec, lambda s: _result(_perform_spec("ramp", s), "ramp", Run), """``llmbench ramp``: steps of
users until the thresholds break. ``ramp(RampSpec(...))`` or ``ramp(url=..., users=[1, 2,
4])``. Returns the Run (``ramp.steps``, ``ramp.held``, ``ramp.verdict.kind``,
``ramp.verdict.text``).""")

sweep = Command(SweepSpec, lambda s: _result(_perform_spec("sweep", s), "sweep", Sweep), """``llmbench sweep``: a ramp
per server setting. ``settings={"NAME": [1, 2, 4]}`` (or ``setting=``, as on the command line)
is ``--setting NAME=1,2,4``. Returns the sweep folder's Sweep (``results``, ``answer``,
``best``).""")

probe = Command(ProbeSpec, lambda s: _result(_perform_spec("probe", s), "probe", Run), """``llmbench probe``:
router overhead versus compute (``router=``, ``direct=``, ``model=`` required). Returns the Run
(``probe.findings.router.steps``).""")

report = Command(ReportSpec, perform_report, """``llmbench report``: a run's (or a
sweep's) report. ``report("results/<run>")`` writes RUN_DIR/report.html; ``format="md"`` or
``"csv"`` with no ``output`` gives the text. Returns a Report (``.path``, ``.text``,
``.notes``).""")

compare = Command(CompareSpec, perform_compare, """``llmbench compare``: runs side by side,
the first the baseline. ``compare(["results/a", "results/b"], max_regression="10%")`` writes
compare-A-vs-B.html beside the last run's folder and returns a Comparison (``.data``, ``.text``,
``.html``, ``.regressions``, ``.passed``).""")


def load_run(path: str | Path) -> Run:
    """Any run folder (run, ramp, probe; every schema version), as a Run. A run killed before
    it wrote its summary gets one rebuilt from requests.jsonl (marked partial, ``note`` says
    so). A folder that is not one is a UsageError; a sweep folder is read by
    ``llmbench.Sweep.load(path)``."""
    from llmbench.specs.errors import translate
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"load_run({path!r}): give a run folder's path (a str or a Path)")
    p = Path(path)
    with _typed_errors():
        try:
            if (p / "sweep.json").is_file() and not (p / "run.json").is_file():
                raise UsageError(f"load_run({str(p)!r}): a sweep folder; llmbench.Sweep.load("
                                 "path) reads it, load_run one of its settings' run folders")
            from llmbench.analysis.recover import load_checked
            return load_checked(p, "load")
        except ValueError as exc:           # a schema this llmbench cannot read
            if translate(exc) is None:
                raise UsageError(f"{p}: {exc}") from exc
            raise


@contextlib.contextmanager
def mock(**options: Any) -> Iterator[str]:
    """The built-in mock in a child process on a free loopback port, for the time of the
    ``with`` block: yields its OpenAI-style base URL (``http://127.0.0.1:PORT/v1``), to give
    to ``run(url=...)``. Keywords: ``llmbench mock``'s options (``ttft_ms``, ``itl_ms``,
    ``parallel``, ``max_queue``, ``profile``, faults...)."""
    from llmbench.mock_server import MockProcess
    from llmbench.mock_server.cli import MockOptions, prepare
    if options.get("port") not in (None, 0):
        raise UsageError("llmbench.mock(): it listens on a free port, and the with-statement "
                         "gives its URL; drop port= (llmbench mock --port on the command line)")
    if options.get("save_profile") is not None:
        raise UsageError("llmbench.mock(): save_profile= writes a profile and serves nothing; "
                         "use llmbench mock --like RUN --save-profile FILE")
    if options.get("record_prompts"):
        raise UsageError("llmbench.mock(): record_prompts= is for llmbench mock --record-prompts")
    options.pop("port", None)
    with _typed_errors():
        o = MockOptions.from_options(options, "llmbench.mock()")
        cfg = prepare(o).config
    proc = MockProcess(cfg, replicas=o.replicas, host=o.host,
                       record=str(o.record) if o.record else None, workers=o.workers)
    try:
        proc.__enter__()
    except (RuntimeError, OSError) as exc:
        raise CommandFailed(f"the built-in mock did not start ({exc})", 1) from exc
    try:
        yield proc.url + "/v1"
    finally:
        proc.__exit__(None, None, None)


def _sign_mock() -> None:
    """mock's keywords, for help() and editors: its spec's fields (a free port: port=0)."""
    from llmbench.mock_server.cli import MockOptions
    params = [p.replace(default=0) if p.name == "port" else p
              for p in _signature(MockOptions).parameters.values() if p.name != "spec"]
    mock.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]


_sign_mock()
