"""``llmbench sweep``: which server setting serves more users. For each value (or each point of
a grid of settings) start the server with it (or restart it with a one-shot command), wait until
it is ready, run the ramp (every ramp option applies, ``--repeat`` too), stop the server, go on;
then one folder with every ramp's run folder, the servers' logs, ``sweep.json`` and one page
with the answer (docs/results.md lists the folder's files)."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from llmbench.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from llmbench.results.writer import SweepFolder
from llmbench.servers.managed import (ManagedServer, ServerFailed, run_before, tail, their_environ,
                                      wait_up)
from llmbench.client.target import make_target
from llmbench.analysis import finish
from llmbench.commands.common import Done
from llmbench.report import outcome as shown

if TYPE_CHECKING:
    from llmbench.specs.sweep import SweepSpec

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def grid(settings: dict[str, list[str]]) -> list[dict[str, str]]:
    names = list(settings)
    return [dict(zip(names, combo)) for combo in itertools.product(*settings.values())]


def name_of(setting: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items())


def fill(text: str, setting: dict[str, str], port: int | None, quote: bool) -> str:
    """{NAME} -> its value (shell-quoted in a shell command), {PORT} -> the value's port.
    Plain replacement, not str.format: a command may hold other braces (JSON, ${VAR})."""
    for k, v in setting.items():
        text = text.replace("{" + k + "}", shlex.quote(v) if quote else v)
    if port is not None:
        text = text.replace("{PORT}", str(port))
    return text


from llmbench.servers.ports import free_port


RampFor = Callable[[str, "str | None", Path, dict, "int | None"], Done]   # ..., server pid


@dataclass
class SweepPlan:
    """A sweep ready to run: the settings' values and how each server is started."""
    settings: dict[str, list[str]]
    mode: str                                  # serve | before | mock
    command: str | None                        # --serve / --before
    mock_options: list[str]
    url: str | None                            # may hold {NAME} and {PORT}
    model: str | None
    api: str | None
    api_key: str | None
    headers: list[str] | None
    ready_timeout_s: float
    stop_grace_s: float
    out: Path
    labels: dict[str, str]
    repeat: int
    expect: float | None
    unit: str
    ramp: RampFor                              # one setting's ramp (cli builds it: ramp's code)
    config: dict[str, Any] = field(default_factory=dict)
    # make_target's network keywords (--endpoint, --redact; proxy and TLS), as the ramps get
    target_options: dict[str, Any] = field(default_factory=dict)
    # the sweep's options for its folder's config.toml (spec.replay_of; secrets left out)
    replay: dict[str, Any] | None = None
    # --resume FOLDER: the sweep folder to go on in (settings complete there are skipped)
    resume: Path | None = None
    dry_run: bool = False
    dashboard_at: tuple[str, int] | None = None     # --dashboard: one page for every ramp
    dashboard_linger_s: float | None = None
    mlflow: str | None = None                  # --mlflow: a parent run, a child per setting

    def server_command(self) -> str | list[str] | None:
        if self.mode == "serve":
            return self.command
        if self.mode != "mock":
            return None
        # the built-in mock as a server of its own, started and stopped like any other
        cmd = [sys.executable, "-m", "llmbench.cli", "mock", "--host", "127.0.0.1",
               "--port", "{PORT}"]
        if "--profile" not in self.mock_options:
            cmd += ["--profile", "ollama"]
        cmd += self.mock_options
        for name in self.settings:
            cmd += ["--" + name.replace("_", "-"), "{" + name + "}"]
        return cmd

    def url_template(self) -> str:
        return self.url or "http://127.0.0.1:{PORT}/v1"

    def needs_port(self) -> bool:
        cmd = self.server_command()
        text = " ".join(cmd) if isinstance(cmd, list) else (cmd or "")
        return "{PORT}" in text or "{PORT}" in self.url_template()

    def describe(self) -> dict[str, Any]:
        from llmbench.client.target import strip_userinfo
        cmd = self.server_command()
        return {"mode": self.mode, "command": " ".join(cmd) if isinstance(cmd, list) else cmd,
                "before": self.command if self.mode == "before" else None,
                "url": strip_userinfo(self.url_template()), "model": self.model,
                "ready_timeout_s": self.ready_timeout_s, "stop_grace_s": self.stop_grace_s,
                "ramp": self.config}


def _slug(setting: dict[str, str]) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "_".join(f"{k}={v}" for k, v in setting.items()))[:80]


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def perform(plan: SweepPlan) -> Done:
    """The sweep command: its sweep.json (as ``run``), exit code and folder."""
    points = grid(plan.settings)
    first_url = fill(plan.url_template(), points[0], 1, quote=False)
    # a bad --url or --header: one line (exit 2) before any server starts
    make_target(first_url, plan.model or "?", plan.api, plan.api_key, plan.headers,
                **plan.target_options)
    kept: dict[int, Any] = {}
    if plan.resume is not None:
        # the folder checked (with --dry-run too: what the resume would do), its finished
        # settings kept, only the others run
        folder = resumable(plan)
        kept = finish.sweep_kept(folder.by_point(points), folder.path)
    if plan.dry_run:
        print(dry_run_text(plan, set(kept)))
        return Done(None, EXIT_OK, None)
    if plan.resume is not None:
        finish.sweep_resumed(folder.doc)
    else:
        label = plan.labels.get("name") or "_".join(plan.settings)
        folder = SweepFolder.new(plan.out, label, finish.sweep_started(plan, points))
    sweep_dir, doc = folder.path, folder.doc

    board = None
    if plan.dashboard_at is not None or shown.cell_view_open():
        # opened first (its URL is the first line); each setting's ramp feeds the same page
        from llmbench.report.dashboard import handle
        board = handle.for_run(plan.dashboard_at, plan.dashboard_linger_s)
        board.sweep({"settings": name_of_settings(plan.settings), "grid": points,
                     "unit": plan.unit})

    def save() -> None:
        data = folder.save()
        if board is not None:
            res = data["results"]
            board.sweep_setting(len(res) - 1 if res else 0, res[-1]["name"] if res else None,
                                [{k: r.get(k) for k in ("name", "status", "held", "verdict")}
                                 for r in res])
    save()
    if plan.replay is not None and plan.resume is None:
        from llmbench.specs.config import write_replay
        write_replay(sweep_dir / "config.toml", "sweep", plan.replay)
    if plan.resume is not None:
        print(f"Resuming the sweep in {sweep_dir}: {len(kept)} of {len(points)} setting(s) "
              f"complete there, {len(points) - len(kept)} to run", flush=True)
    else:
        print(f"Sweep of {name_of_settings(plan.settings)}: {len(points)} setting(s), "
              f"folder {sweep_dir}", flush=True)
    interrupted = False
    if plan.mlflow is not None:         # the settings' ramps log as its children
        from llmbench.report import tracker
        line = tracker.start_parent(plan.mlflow, sweep_dir)
        if line:
            print(line, flush=True)
    _on_sigterm(_raise_interrupt)       # stop the server in order on SIGTERM too
    try:
        for i, setting in enumerate(points):
            if i in kept:
                doc.results.append(kept[i])
                print(f"\n== {kept[i].name} ({i + 1} of {len(points)}): complete in "
                      f"{kept[i].run_dir}, skipped ==", flush=True)
                save()
                continue
            if _one(plan, folder, setting, i, len(points), save) == "interrupted":
                interrupted = True
                break
    except KeyboardInterrupt:
        interrupted = True
        if doc.results and doc.results[-1].status in ("starting", "running"):
            doc.results[-1].status = "interrupted"
    finally:
        _on_sigterm(signal.SIG_DFL)
    code = _finish(plan, folder, interrupted, save)
    if board is not None:
        board.sweep_finished(sweep_dir, doc)        # the page becomes the sweep's report
    return Done(doc, code, sweep_dir)


def _on_sigterm(handler: Any) -> None:
    """SIGTERM's handler, in the main thread (only there can one be set: llmbench.sweep() in
    a thread or a running event loop has none)."""
    import threading
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


# -- --resume and --dry-run ----------------------------------------------------------------------

def resumable(plan: SweepPlan) -> SweepFolder:
    """The sweep folder to resume; one line (UsageError) when it is no sweep folder, or a
    sweep of other settings or other ramps."""
    import json
    path = Path(plan.resume or "")
    where = f"--resume {path}"
    if not (path / "sweep.json").is_file():
        raise UsageError(f"{where}: no sweep.json there; give a folder made by llmbench sweep")
    try:
        folder = SweepFolder.read(path)
    except Exception as exc:  # noqa: BLE001 - a folder edited by hand: one line
        raise UsageError(f"{where}: {exc}")
    doc = folder.doc

    def key(setting: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(setting.items()))
    if sorted(map(key, doc.grid or [])) != sorted(map(key, grid(plan.settings))):
        raise UsageError(f"{where}: that sweep was of {name_of_settings(doc.settings or {})}, "
                         f"this one is of {name_of_settings(plan.settings)}; resume with the "
                         "same --setting values (or start a new sweep)")
    before = json.loads(json.dumps((doc.config or {}).get("ramp") or {}, sort_keys=True))
    now = json.loads(json.dumps(plan.config or {}, sort_keys=True))
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if changed:
        raise UsageError(f"{where}: its ramps ran with other options ({', '.join(changed)} "
                         "differ); resume with the options it was started with (its "
                         "config.toml) or start a new sweep")
    return folder


def dry_run_text(plan: SweepPlan, done: set[int] | None = None) -> str:
    """--dry-run: each setting's server command, URL and ramp, and how long it may take;
    ``done`` (with --resume): the settings finished in the folder, kept and not run again."""
    done = done or set()
    from llmbench.client.target import strip_userinfo
    cmd = plan.server_command()
    rows = []
    for i, setting in enumerate(grid(plan.settings)):
        server = before = None
        if cmd is not None:
            filled = ([fill(c, setting, None, quote=False) for c in cmd]
                      if isinstance(cmd, list) else fill(cmd, setting, None, quote=True))
            server = shlex.join(filled) if isinstance(filled, list) else filled
        elif plan.command:
            before = fill(plan.command, setting, None, quote=True)
        url = strip_userinfo(fill(plan.url_template(), setting, None, quote=False))
        rows.append(shown.DryRunSetting(name_of(setting), i in done, server, before, url))
    return shown.sweep_dry_run(name_of_settings(plan.settings), rows, plan.config,
                               plan.resume, plan.needs_port())


def name_of_settings(settings: dict[str, list[str]]) -> str:
    return " x ".join(f"{k}={','.join(v)}" for k, v in settings.items())


def _one(plan: SweepPlan, folder: SweepFolder, setting: dict[str, str], i: int, n: int,
         save: Callable[[], None]) -> str:
    """One setting: its server started, its ramp, its server stopped; its result's status."""
    name, sweep_dir = name_of(setting), folder.path
    log = sweep_dir / f"server-{_slug(setting)}.log"
    res = finish.sweep_begun(folder.doc, setting, name, log.name)
    port = free_port() if plan.needs_port() else None
    url = fill(plan.url_template(), setting, port, quote=False)
    env = {**their_environ(), **setting}
    if plan.mode == "mock":
        here = str(Path(__file__).resolve().parents[2])     # the mock must import llmbench
        env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    print(f"\n== {name} ({i + 1} of {n}) ==", flush=True)
    server: ManagedServer | None = None
    log.touch()
    try:
        cmd = plan.server_command()
        if cmd is not None:
            cmd = ([fill(c, setting, port, quote=False) for c in cmd] if isinstance(cmd, list)
                   else fill(cmd, setting, port, quote=True))
            shown = shlex.join(cmd) if isinstance(cmd, list) else cmd
            print(f"starting: {shown}  (log: {log.name})", flush=True)
            server = ManagedServer(cmd, env, log).start()
            res.server_pid = server.pid
            save()
        else:
            before = fill(plan.command or "", setting, port, quote=True)
            print(f"before: {before}  (log: {log.name})", flush=True)
            run_before(before, env, log, plan.ready_timeout_s)
        target = make_target(url, plan.model or "?", plan.api, plan.api_key, plan.headers,
                             **plan.target_options)
        ready_s, model = wait_up(target, plan.ready_timeout_s,
                                 give_up=server.exited if server is not None else None)
        print(f"ready after {ready_s:.1f} s (models listed, {model} answered a warm-up "
              "request)", flush=True)
        res.status, res.ready_s = "running", round(ready_s, 2)
        save()
        labels = {**plan.labels, **setting}
        if "name" in plan.labels:
            labels["name"] = f"{plan.labels['name']}_{_slug(setting)}"
        done = plan.ramp(url, model, sweep_dir, labels, server.pid if server is not None else None)
        _on_sigterm(_raise_interrupt)   # the harness reset it
        finish.sweep_setting(res, done.code, done.run_dir, done.run, sweep_dir, EXIT_INTERRUPTED)
        why = server.exited() if server is not None else None
        if why and res.status != "interrupted":
            res.status, res.error, res.log_tail = ("server_died", why + " (during the ramp)",
                                                   tail(log))
            _say_failure(name, res.error, res.log, res.log_tail)
    except ServerFailed as exc:
        res.status, res.error, res.log_tail = "server_failed", str(exc), tail(log)
        _say_failure(name, res.error, res.log, res.log_tail)
    finally:
        if server is not None:
            server.stop(plan.stop_grace_s)
            res.server_exit_code = server.exit_code()
        save()
    return res.status


def _say_failure(name: str, error: str | None, log: str | None,
                 log_tail: list[str] | None) -> None:
    print(f"error: {name}: {error}; going on with the next setting", file=sys.stderr,
          flush=True)
    lines = log_tail or []
    if lines:
        print(f"  last lines of {log}:", file=sys.stderr)
        for line in lines:
            print(f"  | {line}", file=sys.stderr)
    sys.stderr.flush()


def _finish(plan: SweepPlan, folder: SweepFolder, interrupted: bool,
            save: Callable[[], None]) -> int:
    sweep_dir, doc = folder.path, folder.doc
    results = doc.results
    code = finish.sweep_answer(doc, sweep_dir, plan.unit, interrupted, plan.expect)
    text, load = doc.answer or "", doc.common_load
    save()
    print()
    print(shown.sweep_table(results, plan.unit, load))
    print()
    from llmbench.report import screen
    screen.say(text)                      # wrapped at word boundaries on a terminal
    for d in doc.server_differences or []:
        screen.say(f"Servers differed: {d.text}")
    page = None
    try:
        from llmbench.report.sweep_html import write
        page = write(sweep_dir)
    except Exception as exc:  # noqa: BLE001 - the ramps and sweep.json are on disk already
        print(f"warning: could not write report.html ({type(exc).__name__}: {exc}); run "
              f"'llmbench report {sweep_dir}' to retry", file=sys.stderr)
    if interrupted:
        print("PARTIAL RESULT: the sweep was interrupted; finished settings are kept.")
    if page is not None:
        print(f"Report: {page}")
    if plan.mlflow is not None:
        from llmbench.report import tracker
        print(tracker.finish_parent(plan.mlflow, sweep_dir), flush=True)
    print(f"Results: {sweep_dir}")
    return code


def plan_of(spec: SweepSpec, progress: bool | None = None) -> Any:
    """The sweep's plan, every value checked before any server starts."""
    from llmbench.commands.ramp import find_plan, perform_at, prepared
    from llmbench.commands.spec import replay_of
    from llmbench.errors import EXIT_USAGE, LlmbenchError
    prepared(spec)
    ramp_in_s, hold_s, think_s = spec.timing()
    find = find_plan(spec)
    config = {"by": spec.by, "steps": [] if find is not None else spec.steps(),
              "ramp_in_s": ramp_in_s,
              "hold_s": hold_s, "think_s": list(think_s),
              "thresholds": [t.text for t in spec.gates()], "repeat": spec.repeat,
              "expect": spec.expect_users, "join": spec.join}
    if find is not None:
        config["find"] = find.describe()

    def ramp_for(url: str, model: str | None, out: Path, labels: dict[str, str],
                 server_pid: int | None = None) -> Any:
        """One setting's ramp (``server_pid``: the process --serve started, sampled during
        it); a server it cannot use (no model, wrong --model) ends that setting, not the
        sweep (its error line is printed here)."""
        try:
            return perform_at(spec, url, model, out=out, labels=labels, progress=progress,
                              server_pid=server_pid)
        except LlmbenchError as exc:
            if exc.exit_code == EXIT_USAGE:
                raise
            print(f"error: {exc}", file=sys.stderr)
            return Done(None, exc.exit_code, None)
    return SweepPlan(settings=dict(spec.setting or {}), mode=spec.modes()[0],
                     command=spec.serve or spec.before, mock_options=list(spec.mock_options or []),
                     url=spec.url, model=spec.model, api=spec.api, api_key=spec.api_key,
                     headers=spec.header, ready_timeout_s=spec.ready_timeout,  # type: ignore[arg-type]
                     stop_grace_s=spec.stop_grace,  # type: ignore[arg-type]
                     out=Path(spec.out), labels=spec.labels(), repeat=spec.repeat,
                     expect=spec.expect_users,
                     unit="users" if spec.by == "users" else "req/s", ramp=ramp_for,
                     config=config, target_options=spec.target_options(),
                     replay=replay_of(spec), resume=spec.resume, dry_run=spec.dry_run,
                     dashboard_at=spec.dashboard_at(), dashboard_linger_s=spec.linger_s(),
                     mlflow=spec.mlflow)


def perform_spec(opts: SweepSpec, progress: bool | None = None) -> Any:
    """The sweep (a Done); no --url and no --mock: the server found on this machine."""
    from llmbench.commands.local import with_local_server
    spec = opts if opts.mock else with_local_server(opts, needed=True)
    return perform(plan_of(spec, progress))
