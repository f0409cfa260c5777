"""The command line: Typer only. Flags -> a command's spec (llmbench/commands/: RunSpec,
RampSpec ..., the ones the Python API takes too) -> its command's ``perform_spec``. Only the
command asked for is built (``_TABLE``, ``_lazy_group``): a usage error costs little.

Every option is declared once, on its spec (llmbench/specs/groups.py, run.py, ...;
llmbench/mock_server/cli.py), with its default and its checks; this module turns the declarations into
typer options, adds what only a command line has (--config FILE, --json, --version), prints
what a command returns, and turns every failure into one line on stderr and its exit code (2
for a user mistake), never a traceback. docs/cli.md is generated from the same declarations
(scripts/gen_cli_docs.py).
"""

import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from llmbench.errors import EXIT_INTERRUPTED, EXIT_USAGE
from llmbench.cli.options import cheap_coercion, spec_command
from llmbench.specs.options import P_OUTPUT

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Load-test LLM chat servers: how many users hold, and why the next step broke.")
datasets_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Look at a workload before you send it.")
app.add_typer(datasets_app, name="datasets")


def fail(message: str, code: int = EXIT_USAGE) -> "typer.Exit":
    # a spec with several problems says each on its own line (options.Problems)
    for line in message.split("\n"):
        typer.echo(f"error: {line}", err=True)
    return typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        from llmbench.version import __version__
        typer.echo(f"llmbench {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False) -> None:
    """Load-test LLM chat servers: how many users hold, and why the next step broke."""


def _guard(fn):
    """Turn our own errors (a bad value, a server that cannot be used, a path or a disk that
    cannot be written) into one line and their exit code (llmbench.specs.errors.translate)."""

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except Exception as exc:
            from llmbench.specs.errors import translate
            err = translate(exc)
            if err is None:
                raise
            raise fail(str(err), err.exit_code)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return wrapper


def _config(ctx: typer.Context, param: object, value: Optional[Path]) -> Optional[Path]:
    """--config FILE (eager, so before every other option): the file's options become this
    command's defaults; what the command line gives still wins."""
    if value is not None:
        from llmbench.cli.config import defaults_from
        ctx.default_map = {**(ctx.default_map or {}), **defaults_from(ctx, value)}
    return value


def _config_param() -> inspect.Parameter:
    return inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Config)


Config = Annotated[Optional[Path], typer.Option(
    "--config", metavar="FILE", is_eager=True, callback=_config, expose_value=False,
    help="Options from a TOML, YAML or JSON file (keys: option names); the command line wins. "
         "Every run folder has a config.toml that replays it.")]
JsonOut = Annotated[bool, typer.Option(
    "--json", help="Print the summary as JSON on stdout; tables and progress go to stderr.",
    rich_help_panel=P_OUTPUT)]


def _json_param() -> inspect.Parameter:
    return inspect.Parameter("json_out", inspect.Parameter.KEYWORD_ONLY, default=False,
                             annotation=JsonOut)


def _answer(kind: str, done) -> str:
    """--quiet's one line: the run's headline (a ramp's verdict, a sweep's answer) and folder."""
    from llmbench.results.folder import headline
    run = done.run
    if run is None:
        line = ""
    else:
        line = str(run.answer or "") if kind == "sweep" else headline(run)
    where = f" ({done.run_dir})" if done.run_dir else ""
    return (line or (run.status if run is not None else "") or "no result") + where


def _perform(spec, json_out: bool, kind: str) -> None:
    """Run the command's ``perform_spec(spec)`` (llmbench/commands/<kind>.py: a Done); with
    --json, everything it prints goes to stderr and the summary, as JSON, to stdout; with
    --quiet, only errors (stderr) and one closing line. Exits with the command's code.
    --dashboard's page opens first: its URL is the first line (before the mock, Ray or the
    preflight speak)."""
    import contextlib
    import importlib
    perform_spec = importlib.import_module(f"llmbench.commands.{kind}").perform_spec
    if getattr(spec, "dashboard", None) is not None:
        from llmbench.report.dashboard import handle
        handle.shared(spec.dashboard_at())
    if spec.quiet and not json_out:
        import io
        with contextlib.redirect_stdout(io.StringIO()):
            done = perform_spec(spec)
        if done.run is not None or done.run_dir is not None:
            print(_answer(kind, done))
    elif not json_out:
        done = perform_spec(spec)
    else:
        import json
        from llmbench.cli.jsonout import document
        with contextlib.redirect_stdout(sys.stderr):
            done = perform_spec(spec)
        sys.stderr.flush()
        print(json.dumps(document(kind, done), indent=1, default=str))
    _linger(done.code)
    raise typer.Exit(done.code)


def _linger(code: int) -> None:
    """--dashboard: the page stays up after the command's output (until Ctrl-C, or
    --dashboard-linger), unless a stop signal ended the command (exit 130); the exit code
    stays the command's."""
    handle = sys.modules.get("llmbench.report.dashboard.handle")
    if handle is not None:
        sys.stdout.flush()
        handle.end_of_command(cli=True, interrupted=code == EXIT_INTERRUPTED)


# -- the commands: a spec each (llmbench/commands/), built from the flags ------------------------
def _run(spec, json_out: bool = False) -> None:
    """One load level with vLLM-compatible numbers. With no --url, a one-minute demo against the built-in mock."""
    _perform(spec, json_out, "run")


def _ramp(spec, json_out: bool = False) -> None:
    """Add users step by step until the thresholds break, and say why (no --url: a one-minute demo on the built-in mock)."""
    _perform(spec, json_out, "ramp")


def _sweep(spec) -> None:
    """Which server setting serves more users: a ramp per value, one page with the answer."""
    _perform(spec, False, "sweep")


def _probe(spec) -> None:
    """Router overhead versus compute: the same workload through a router and straight to a backend, interleaved in time."""
    _perform(spec, False, "probe")


def _mock(options) -> None:
    """A mock LLM server that behaves like a real one under load (OpenAI and Ollama routes)."""
    from llmbench.mock_server.cli import serve
    serve(options)


def _record(spec) -> None:
    """Record real clients' traffic through a proxy, anonymised, as a trace run --trace replays."""
    def listening(url: str) -> None:
        typer.echo(f"Recording to {spec.out}: point clients at {url} (requests go on to "
                   f"{spec.upstream}); Ctrl-C to stop", err=True)
    from llmbench.commands.record import perform_record
    for line in perform_record(spec, listening):
        typer.echo(line)


def _chat(spec) -> None:
    """One user, a few turns: TTFT, tokens/s, prompt and cached tokens per turn (exit 1: the server cannot stream a chat)."""
    from llmbench.commands.chat import perform_spec
    code = perform_spec(spec, typer.echo, lambda line: typer.echo(line, err=True))
    raise typer.Exit(code)


def _context(spec) -> None:
    """The longest prompt the server serves: doubling, then bisecting, until it refuses, fails or passes a TTFT bound; the prefill rate."""
    from llmbench.commands.context import perform_spec
    raise typer.Exit(perform_spec(spec, typer.echo))


def _servers(spec, json_out: bool = False) -> None:
    """The LLM servers on this machine's usual ports: engine, version, models, slots, context (exit 1: none)."""
    from llmbench.commands.local import lines, perform_servers
    found = perform_servers(spec)
    if json_out:
        import json
        typer.echo(json.dumps([f.to_dict() for f in found], indent=1))
    else:
        for line in lines(found):
            typer.echo(line)
    if not found:
        raise typer.Exit(1)


def _says_skipped(fn):
    """After a command that reads run folders: one note per JSON-lines file whose reading
    skipped lines (records.record.json_lines: not UTF-8, not JSON), so nothing is dropped
    silently."""
    def wrapper(spec) -> None:
        from llmbench.records.record import SKIPPED, skipped_notes
        SKIPPED.clear()
        try:
            return fn(spec)
        finally:
            for note in skipped_notes():
                typer.echo(f"note: {note}", err=True)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_says_skipped
def _report(spec) -> None:
    """Write a run's report: one self-contained HTML file, markdown for a PR, CSV or Parquet."""
    from llmbench.commands.report import perform_report
    done = perform_report(spec)
    for note in done.notes:
        typer.echo(note, err=True)
    if done.text is not None:
        typer.echo(done.text, nl=False)
    else:
        typer.echo(str(done.path))


@_says_skipped
def _compare(spec) -> None:
    """Runs side by side (e.g. OLLAMA_NUM_PARALLEL=1 vs 4), with a regression gate for CI."""
    from llmbench.commands.report import perform_compare
    done = perform_compare(spec)
    typer.echo(done.text)
    typer.echo(f"HTML: {done.html}")
    if done.png is not None:
        typer.echo(f"PNG: {done.png}")
    if not done.passed:
        raise typer.Exit(1)


def _runs(spec) -> None:
    """List run folders: date, command, labels, headline result."""
    from llmbench.commands.report import perform_runs
    rows = perform_runs(spec)
    if not rows:
        typer.echo(f"no runs under {spec.out}")
        return
    def show(r, indent: str = "") -> None:
        if r.error is not None:
            typer.echo(f"{indent}{r.folder}  (unreadable: {r.error})")
            return
        labels = " ".join(f"{k}={v}" for k, v in r.labels.items())
        status = "" if r.status == "complete" else f" [{r.status}]"
        pad = indent + "    "
        head = f"{indent}{r.date}  {r.kind:<5} {r.folder}{status}"
        if indent:                      # a ramp inside a sweep: its setting, not its command
            typer.echo(f"{head}\n{pad}setting: {r.setting}\n{pad}{r.headline}")
            return
        typer.echo(f"{head}\n{pad}{r.command}" + (f"\n{pad}labels: {labels}" if labels else "")
                   + f"\n{pad}{r.headline}")
    for r in rows:
        show(r)
        for sub in r.ramps:
            show(sub, "    ")


def _dashboard(spec) -> None:
    """Serve a finished run or sweep as --dashboard shows it when a run ends, until Ctrl-C."""
    from llmbench.report.dashboard.address import url_of

    def listening(p: int) -> None:
        typer.echo(f"Dashboard: {url_of(spec.host, p)} serving {spec.folder} (Ctrl-C to stop)",
                   err=True)
    from llmbench.commands.report import perform_dashboard
    perform_dashboard(spec, listening)


def _inspect(spec) -> None:
    """Counts, length distributions and the fingerprint of a workload."""
    import numpy as np
    from llmbench.analysis.percentile import percentiles
    from llmbench.commands.report import perform_inspect
    done = perform_inspect(spec)
    if isinstance(done, list):           # a recording or an agent trace: its own summary
        for line in done:
            typer.echo(line)
        return
    wl, tok = done
    convs = wl.conversations
    # as sent: a run puts its salt first in each conversation (workload.salt)
    salt = wl.salt_for("main")
    p = np.array([(t.prompt_tokens or 0) + (salt.tokens if i == 0 else 0)
                  for c in convs for i, t in enumerate(c.turns)], dtype=float)
    o = np.array([t.max_tokens for c in convs for t in c.turns if t.max_tokens], dtype=float)
    n_turns = np.array([len(c.turns) for c in convs], dtype=float)

    def dist(a: "np.ndarray") -> str:
        if not len(a):
            return "-"
        p50, p90 = percentiles(a, [50, 90])
        return (f"min {a.min():.0f}  p50 {p50:.0f}  mean {a.mean():.1f}  "
                f"p90 {p90:.0f}  max {a.max():.0f}")
    typer.echo(f"source:         {wl.source}")
    typer.echo(f"tokenizer:      {wl.tokenizer} ({wl.tokenizer_info.get('counting')})")
    typer.echo(f"conversations:  {len(convs)}")
    typer.echo(f"user turns:     {int(n_turns.sum())}  ({dist(n_turns)} per conversation)")
    typer.echo(f"prompt tokens:  {dist(p)}")
    typer.echo(f"output tokens:  {dist(o)}")
    typer.echo(f"fingerprint:    {wl.fingerprint}")
    typer.echo("salt:           " + (f"{salt.tokens} tokens first in each conversation, new for "
                                     "every run (--same-prompts: none)" if salt else
                                     "none (--same-prompts): a run sends these very prompts"))
    for w in wl.warnings:
        typer.echo(f"note: {w}")


# name -> (the module and class of its spec, the function, takes --config, takes --json): every
# command of the command line. Named, not imported: the command line imports the one spec the
# user asked for (``LazyGroup``), so a usage error or `llmbench --help` costs a tenth of a
# second, not the import of every command (scripts/bench_startup.py).
_TABLE: dict = {
    "run": ("llmbench.specs.run", "RunSpec", _run, True, True),
    "ramp": ("llmbench.specs.ramp", "RampSpec", _ramp, True, True),
    "sweep": ("llmbench.specs.sweep", "SweepSpec", _sweep, True, False),
    "probe": ("llmbench.specs.probe", "ProbeSpec", _probe, True, False),
    "mock": ("llmbench.mock_server.cli", "MockOptions", _mock, True, False),
    "record": ("llmbench.specs.record", "RecordSpec", _record, False, False),
    "report": ("llmbench.specs.report", "ReportSpec", _report, True, False),
    "compare": ("llmbench.specs.report", "CompareSpec", _compare, True, False),
    "runs": ("llmbench.specs.report", "RunsSpec", _runs, False, False),
    "dashboard": ("llmbench.specs.report", "DashboardSpec", _dashboard, False, False),
    "servers": ("llmbench.specs.report", "ServersSpec", _servers, False, True),
    "chat": ("llmbench.specs.chat", "ChatSpec", _chat, True, False),
    "context": ("llmbench.specs.context", "ContextSpec", _context, True, False),
    "datasets inspect": ("llmbench.specs.report", "InspectSpec", _inspect, False, False)}


def _spec_class(name: str) -> type:
    import importlib
    module, cls, *_ = _TABLE[name]
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def commands() -> dict:
    """name -> (its spec, the function, takes --config, takes --json): every
    command of the command line, for scripts/gen_cli_docs.py (this imports them all)."""
    return {name: (_spec_class(name), *row[2:]) for name, row in _TABLE.items()}


def _command(name: str):
    """One command as click runs it, built from its spec's declarations when first asked."""
    _mod, _cls, fn, cfg, json_ = _TABLE[name]
    extra = ([_config_param()] if cfg else []) + ([_json_param()] if json_ else [])
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    one.command(name.split()[-1], cls=_cheap_command())(
        _guard(spec_command(_spec_class(name), fn, *extra)))
    return typer.main.get_command(one)


def _cheap_command() -> type:
    from typer.core import TyperCommand

    class CheapCommand(TyperCommand):
        def parse_args(self, ctx, args):
            cheap_coercion(self.get_params(ctx))    # its options and --help: no pydantic
            return super().parse_args(ctx, args)
    return CheapCommand


class _Commands(dict):
    """A group's commands, each built on first use (``_command``); the keys are known first,
    so the help lists them in order."""

    def __init__(self, build, names) -> None:
        super().__init__((n, None) for n in names)
        self._build = build

    def __getitem__(self, name):
        cmd = super().__getitem__(name)
        if cmd is None:
            cmd = self._build(name)
            super().__setitem__(name, cmd)
        return cmd

    def get(self, name, default=None):
        return self[name] if name in self else default

    def values(self):
        return [self[n] for n in self]

    def items(self):
        return [(n, self[n]) for n in self]


class _Listed:
    """What a group's help shows of a command not yet built: its name and its help line
    (the function's docstring), without importing its spec."""

    def __init__(self, name: str, help: str) -> None:
        self.name, self.help, self.short_help = name, help, None
        self.hidden = self.deprecated = False
        self.rich_help_panel = None

    def get_short_help_str(self, limit: int = 45) -> str:
        import textwrap
        return textwrap.shorten(self.help, limit, placeholder="...")


def _lazy_group(table: dict, prefix: str = "") -> type:
    from typer.core import TyperGroup

    class LazyGroup(TyperGroup):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            eager = dict(self.commands)
            names = [n[len(prefix):] for n in table if n.startswith(prefix)
                     and " " not in n[len(prefix):]]
            self.commands = _Commands(lambda n: eager.get(n) or _command(prefix + n),
                                      [*names, *eager])
            self._listing = False

        def list_commands(self, ctx):
            return list(self.commands)          # in order, none built

        def parse_args(self, ctx, args):
            # the group's own flags (--help, --version, --install-completion): no pydantic
            cheap_coercion(self.get_params(ctx))
            return super().parse_args(ctx, args)

        def get_command(self, ctx, cmd_name):
            # the group's help lists the commands: their docstrings, not their specs
            if self._listing and dict.get(self.commands, cmd_name) is None \
                    and prefix + cmd_name in table:
                return _Listed(cmd_name, table[prefix + cmd_name][2].__doc__ or "")
            return self.commands.get(cmd_name)

        def format_help(self, ctx, formatter) -> None:
            self._listing = True
            try:
                super().format_help(ctx, formatter)
            finally:
                self._listing = False
    return LazyGroup


app.info.cls = _lazy_group(_TABLE)
datasets_app.info.cls = _lazy_group(_TABLE, "datasets ")


def _click_exceptions():
    """typer 0.2x vendors click as typer._click; earlier versions use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:                     # pragma: no cover - the installed typer decides
        from click import exceptions
    return exceptions


def _stop_signals_raise() -> None:
    """Ctrl-C, SIGTERM and SIGHUP end a command as Ctrl-C does (errors.Interrupted, a
    KeyboardInterrupt), outside the load too: their default killed the process with its
    run.json left "running". The load handles all three itself (load.harness).

    What the parent left ignored: SIGINT is taken back, because sh starts ``cmd &`` with it
    ignored and a script (or CI) that stops llmbench with ``kill -INT`` must still get its
    partial result (issue 49: ``llmbench dashboard`` under such a parent never ended);
    SIGHUP stays ignored, as ``nohup`` asked: the run outlives the terminal."""
    import signal

    def stop(signum: int, _frame: object) -> None:
        from llmbench.errors import Interrupted
        raise Interrupted(signal.Signals(signum).name)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None or (name == "SIGHUP" and signal.getsignal(sig) == signal.SIG_IGN):
            continue
        signal.signal(sig, stop)


def main() -> None:
    if sys.argv[1:2] and sys.argv[1] in ("run", "ramp", "probe"):
        # until the load starts (load.harness); not a sweep, which first starts a server
        from llmbench.load import hold_collector
        hold_collector()
    _stop_signals_raise()
    cx = _click_exceptions()
    abort = getattr(cx, "Abort", None) or getattr(typer, "Abort", KeyboardInterrupt)
    sys.argv[1:] = _bare_dashboard(sys.argv[1:])
    try:
        rv = app(standalone_mode=False)
    except (KeyboardInterrupt, abort):
        _exit(130)
    except cx.NoArgsIsHelpError as exc:     # `llmbench` alone: the help, as before
        exc.show()
        _exit(exc.exit_code)
    except cx.UsageError as exc:
        # a value typer itself could not parse (`--requests nan`, an unknown flag): one line,
        # as every other bad input, not click's five-line box
        text = " ".join(exc.format_message().split())
        where = exc.ctx.command_path if exc.ctx is not None else "llmbench"
        foreign = None
        if isinstance(exc, cx.NoSuchOption):
            # another tool's name (vLLM's, GuideLLM's, k6's, Locust's): the flag meant here
            from llmbench.cli.foreign import hint
            foreign = hint(exc.option_name, where)
        print(f"error: {foreign}" if foreign else f"error: {text} (see '{where} --help')",
              file=sys.stderr)
        _exit(exc.exit_code)
    except cx.ClickException as exc:
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        _exit(exc.exit_code)
    except SystemExit as exc:
        _exit(exc.code)
    _exit(rv if isinstance(rv, int) else 0)


def _bare_dashboard(args: list[str]) -> list[str]:
    """``--dashboard`` with no value (last, or before another option) means any free port on
    127.0.0.1: typer's options take a value or none, never either, so the value is given
    here (a port or address never starts with '-')."""
    out: list[str] = []
    for i, a in enumerate(args):
        out.append(a)
        if a == "--":
            return out + args[i + 1:]
        if a == "--dashboard" and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append("auto")
    return out


def _exit(code: object) -> None:
    """Leave without tearing the interpreter down: freeing every module (aiohttp's SSL contexts,
    numpy, typer's adapters) cost 0.1-0.2 s of CPU after the work was done, a sixth of a small
    run (scripts/bench_fixed_costs.py). atexit handlers still run (multiprocessing, Ray) and
    the streams are flushed; with any other thread alive the ordinary exit joins it."""
    import atexit
    import threading
    if isinstance(code, str):               # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if threading.active_count() > 1 or os.environ.get("LLMBENCH_NO_FAST_EXIT"):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):       # a closed pipe: nothing more to say
            pass
    os._exit(status)
