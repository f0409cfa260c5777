"""llmbench as a library: run, ramp, sweep and probe a server from Python, read any run folder
back, and start the built-in mock; no Typer here, the command line is one client of the same
functions (llmbench/commands/spec.py).

Every keyword is the command line option's name in snake_case (``--max-tokens`` is
``output_tokens`` or its own name, ``--no-stream`` is ``stream=False``), with the same default
and the same checks. Values may be typed as Python has them: ``users=[1, 2, 4]``,
``rate=4``, ``label={"name": "a"}``, ``out=Path(...)``. A bad value raises ``UsageError`` with
the line the command line prints; a server that cannot be used raises ``ServerUnreachable`` (or
``ServerRefused``); a run that started but did not end as a result raises ``RunFailed``, which
carries what was measured (``exc.run``). Nothing is printed unless ``progress=True`` (then
everything the command prints, tables and the live line), or ``progress=None`` (the tables,
and the live line on a terminal).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from llmbench.errors import (EXIT_INTERRUPTED, EXIT_OVERLOADED, EXIT_UNREACHABLE, EXIT_WRITE,
                             CommandFailed, LlmbenchError, RunFailed, UsageError, failure)
from llmbench.results.schema import Run

__all__ = ["run", "ramp", "sweep", "probe", "load_run", "mock"]


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
    from llmbench.commands.spec import translate
    try:
        yield
    except LlmbenchError:
        raise
    except Exception as exc:
        err = translate(exc)
        if err is None:
            raise
        raise err from exc


def _perform(command: str, options: dict[str, Any], work: Callable[[dict[str, Any]], Any]) -> Any:
    from llmbench.commands.spec import LAYOUTS
    options.setdefault("progress", False)
    progress = options["progress"]
    with _typed_errors(), _output(progress):
        groups = LAYOUTS[command].build(options, f"llmbench.{command}()")
        return _own_loop(lambda: work(groups))


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


def _result(done: Any, what: str) -> Run:
    """The Run of a finished command, or the exception for one that is not a result."""
    if done.run is None:
        raise failure(done.error or f"the {what} measured nothing", done.code)
    run = Run.from_dict(done.run, done.run_dir)
    lost = (done.run.get("workers") or {}).get("crashed")
    if done.code == EXIT_INTERRUPTED:
        raise RunFailed(f"the {what} was interrupted; exc.run holds what finished",
                        done.code, run)
    if done.code == EXIT_WRITE or run.status == "failed":
        raise RunFailed(str(done.run.get("error") or f"the {what} failed"), done.code, run)
    if done.code == EXIT_OVERLOADED and lost:
        raise RunFailed(f"a worker process died during the {what}; exc.run holds the "
                        "incomplete figures", done.code, run)
    return run


def run(**options: Any) -> Run:
    """``llmbench run``: one load level. Returns the Run (``run.summary.ttft.p50``,
    ``run.summary.output_throughput``, ``run.path``); failed thresholds are in
    ``run.data["thresholds"]``, not an exception."""
    def work(groups: dict[str, Any]) -> Any:
        from llmbench.commands.spec import run_spec
        return run_spec(groups).perform()
    return _result(_perform("run", options, work), "run")


def ramp(**options: Any) -> Run:
    """``llmbench ramp``: steps of users until the thresholds break. Returns the Run
    (``ramp.steps``, ``ramp.held``, ``ramp.verdict.kind``, ``ramp.verdict.text``)."""
    def work(groups: dict[str, Any]) -> Any:
        from llmbench.commands.spec import ramp_setup
        return ramp_setup(groups).perform_here()
    return _result(_perform("ramp", options, work), "ramp")


def sweep(settings: dict[str, Any] | None = None, **options: Any) -> Run:
    """``llmbench sweep``: a ramp per server setting. ``settings={"NAME": [1, 2, 4]}`` is
    ``--setting NAME=1,2,4`` (``setting=`` as on the command line works too). Returns the sweep
    folder's Run (kind "sweep"; ``data["results"]``, ``data["answer"]``, ``data["best"]``)."""
    if settings is not None:
        if "setting" in options:
            raise UsageError("llmbench.sweep(): give settings= or setting=, not both")
        if not isinstance(settings, dict):
            raise UsageError("llmbench.sweep(): settings= is a dict, e.g. "
                             "{'OLLAMA_NUM_PARALLEL': [1, 2, 4]}")
        options["setting"] = settings

    def work(groups: dict[str, Any]) -> Any:
        from llmbench.commands.spec import sweep_plan
        from llmbench.commands.sweep import perform
        return perform(sweep_plan(groups))
    done = _perform("sweep", options, work)
    if done.code == EXIT_UNREACHABLE and done.run is not None:
        raise RunFailed(str(done.run.get("answer") or "no setting could be measured"),
                        done.code, Run.from_dict(done.run, done.run_dir))
    return _result(done, "sweep")


def probe(**options: Any) -> Run:
    """``llmbench probe``: router overhead versus compute (``router=``, ``direct=``,
    ``model=`` required). Returns the Run (``probe.steps``)."""
    def work(groups: dict[str, Any]) -> Any:
        from llmbench.commands.probe import perform
        from llmbench.commands.spec import probe_plan
        return perform(probe_plan(groups))
    return _result(_perform("probe", options, work), "probe")


def load_run(path: str | Path) -> Run:
    """Any run folder (run, ramp, probe; every schema version) or sweep folder, as a Run. A run
    killed before it wrote its summary gets one rebuilt from requests.jsonl (marked partial,
    ``data["note"]`` says so). A folder that is not one is a UsageError."""
    from llmbench.commands.spec import translate
    p = Path(path)
    try:
        if (p / "sweep.json").is_file():
            try:
                doc = json.loads((p / "sweep.json").read_text(encoding="utf-8"))
            except RecursionError:
                raise UsageError(f"{p}: sweep.json is nested too deeply to be one llmbench "
                                 "wrote") from None
            except json.JSONDecodeError as exc:
                raise UsageError(f"{p}: sweep.json is not valid JSON ({exc.msg}); it was cut "
                                 "short or edited by hand")
            return Run.from_dict(doc, p)
        from llmbench.analysis.recover import load_checked
        return Run.from_dict(load_checked(p, "load"), p)
    except LlmbenchError:
        raise
    except ValueError as exc:           # a schema this llmbench cannot read
        if translate(exc) is not None:
            raise translate(exc) from exc  # type: ignore[misc]
        raise UsageError(f"{p}: {exc}") from exc
    except Exception as exc:
        err = translate(exc)
        if err is None:
            raise
        raise err from exc


@contextlib.contextmanager
def mock(**options: Any) -> Iterator[str]:
    """The built-in mock in a child process on a free loopback port, for the time of the
    ``with`` block: yields its OpenAI-style base URL (``http://127.0.0.1:PORT/v1``), to give
    to ``run(url=...)``. Keywords: ``llmbench mock``'s options (``ttft_ms``, ``itl_ms``,
    ``parallel``, ``max_queue``, ``profile``, faults...)."""
    from llmbench.mock_server import MockProcess
    from llmbench.mock_server.cli import MOCK, prepare
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
        groups = MOCK.build(options, "llmbench.mock()")
        o = groups["options"]
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


# -- signatures: the keywords each function takes, for help() and editors -----------------------
def _sign(fn: Callable[..., Any], layout: Any, first: tuple[inspect.Parameter, ...] = (),
          override: dict[str, Any] | None = None) -> None:
    params = list(first)
    for name, f in layout.fields().items():
        default = (override or {}).get(name, f.default)
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if default is Ellipsis else default,
            annotation=f.type))
    fn.__signature__ = inspect.Signature(params, return_annotation=fn.__annotations__.get("return"))  # type: ignore[attr-defined]


def _signatures() -> None:
    from llmbench.commands.spec import PROBE, RAMP, RUN, SWEEP
    from llmbench.mock_server.cli import MOCK
    quiet = {"progress": False}
    _sign(run, RUN, override=quiet)
    _sign(ramp, RAMP, override=quiet)
    _sign(sweep, SWEEP, (inspect.Parameter("settings", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                           default=None),), override=quiet)
    _sign(probe, PROBE, override=quiet)
    _sign(mock, MOCK, override={"port": 0})


_signatures()
