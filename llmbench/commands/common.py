"""What every command shares: the plan's common part, the run folder's start and failure."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from llmbench.analysis import finish
from llmbench.client.request import RequestParams, Timeouts
from llmbench.errors import EXIT_INTERRUPTED
from llmbench.load.harness import Harness, LiveView, PreflightError, STOP_SIGNALS, release_signals
from llmbench.load.observe import Observer
from llmbench.report import outcome as shown
from llmbench.results import writer
from llmbench.results.folder import new_run_dir
from llmbench.results.schema import Run, Sweep
from llmbench.client.target import Target
from llmbench.workload import Workload


@dataclass
class Done:
    """What a finished command leaves: its Run (None if nothing was measured), the exit
    code, and the folder (``sweep`` and the Python API read all three)."""

    run: Run | Sweep | None
    code: int
    run_dir: Path | None
    error: str | None = None         # nothing measured: why (the line printed after "error:")


@dataclass
class Watch:
    """Who watches a run, apart from the plan (what is measured): the live views and exporters
    the command's wiring hands the harness as its observers (--progress, --metrics-port,
    --dashboard, --otlp), what it says (-q, -v), and where the result is logged after
    (--mlflow). Nothing measured depends on these."""

    progress: bool | None = None
    quiet: bool = False                    # -q: errors and the final answer only
    verbose: bool = False                  # -v: what llmbench decides, as it decides it
    metrics_at: tuple[str, int] | None = None     # --metrics-host, --metrics-port
    dashboard_at: tuple[str, int] | None = None   # --dashboard [HOST:]PORT (port 0: any)
    dashboard_linger_s: float | None = None       # --dashboard-linger (None: until Ctrl-C)
    otlp: str | None = None                # --otlp URL|env: request spans (report/otlp.py)
    mlflow: str | None = None              # --mlflow URI: the run logged (report/tracker.py)

    def observers(self, shape: Any, run_dir: Path | None, target: Target,
                  workers: int | str = 1) -> list[Observer]:
        """Who watches the run, built in this one place: the Prometheus exporter
        (--metrics-port), the terminal view, the dashboard's page (--dashboard) and a notebook
        cell's view (one feed: report.dashboard.feed.DashboardFeed) and the OTLP exporter
        (--otlp: its spans are built in a child process that follows requests.jsonl)."""
        out: list[Observer] = []
        if self.metrics_at is not None:
            from llmbench.report.prometheus import MetricsExporter
            host, port = self.metrics_at
            out.append(MetricsExporter(host, port, run=run_dir.name if run_dir else "",
                                       keep=run_dir / "metrics.prom" if run_dir else None))
        if shape is not None and self.progress is not False:
            out.append(board_for(shape))
        if shape is not None and (self.dashboard_at is not None or _cell_view()):
            from llmbench.report.dashboard import handle
            from llmbench.report.dashboard.feed import DashboardFeed
            # the page (one per command: a sweep's ramps share it) and a notebook cell's view
            board = handle.for_run(self.dashboard_at, self.dashboard_linger_s)
            if board is not None:
                board.begin(dashboard_meta(shape, target, run_dir, workers))
                out.append(DashboardFeed(board))
        if self.otlp is not None:
            from llmbench.report.otlp import OtlpExporter
            out.append(OtlpExporter(
                self.otlp, target.model or "", target.api, target.base_url,
                run_dir.name if run_dir else "",
                log=run_dir / "requests.jsonl" if run_dir is not None else None))
        return out


@dataclass
class Common:
    """The parts of a plan every command has (from the target, workload, request and output
    option groups)."""

    target: Target
    workload: Workload
    params: RequestParams = field(default_factory=RequestParams)
    timeouts: Timeouts = field(default_factory=Timeouts)
    count_tokens: Callable[[str], int] | None = None
    served_by_header: str | None = None
    server_probe: str = "auto"
    out: Path | None = Path("results")
    labels: dict[str, str] = field(default_factory=dict)
    workers: int | str = 1                 # --workers N|auto (1: this process only)
    tokenizer: str | None = None           # the --tokenizer spec, rebuilt in each worker
    ray: Any = None                        # --ray: the joined cluster (workers.ray_launcher)
    # the options that made this plan, written to the run folder as config.toml so that
    # `llmbench CMD --config RUN/config.toml` replays it (spec.replay_of; secrets left out)
    replay: dict[str, Any] | None = None
    last_run_dir: Path | None = None       # the folder run_dir made last (stops_cleanly)
    # what the server's machine did and what the server is (servers.telemetry.TelemetrySpec;
    # None: nothing sampled)
    telemetry: Any = None
    network_floor: str = "auto"            # --network-floor auto|on|off (client/floor.py)
    # who watches it (the harness's observers, -q/-v, --mlflow): not what is measured
    watch: Watch = field(default_factory=Watch)

    def floor(self, when: str) -> Any:
        """The network floor now (client.floor.Floor), or None when not wanted: --network-floor
        off, or auto with a loopback address (nothing there is worth naming)."""
        if self.network_floor == "off":
            return None
        from llmbench.client.floor import floor_now, is_loopback
        if self.network_floor == "auto" and is_loopback(self.target.base_url):
            return None
        return floor_now(self.target.base_url, self.target.net, when,
                         self.target.request_headers())

    def floor_later(self, when: str, into: list[Any]) -> Any:
        """``floor`` in a thread (between a ramp's steps), appended to ``into``."""
        from llmbench.client.floor import floor_later
        return floor_later(self.target.base_url, self.target.net, when,
                           self.target.request_headers(), into)

    @property
    def label(self) -> str | None:
        """The run folder's suffix: the 'name' label, else all labels."""
        return self.labels.get("name") or "_".join(f"{k}={v}" for k, v in self.labels.items()) or None

    def run_dir(self, kind: str) -> Path | None:
        d = new_run_dir(self.out, kind, self.label) if self.out else None
        self.last_run_dir = d           # the folder stops_cleanly finishes and unlocks
        return d

    def harness(self, run_dir: Path | None, live_line: Callable[[LiveView], str] | None = None,
                keep_texts: bool = False, shape: Any = None) -> Harness:
        h = Harness(self.params, self.timeouts, run_dir, count_tokens=self.count_tokens,
                    served_by_header=self.served_by_header, progress=self.watch.progress,
                    live_line=live_line, keep_texts=keep_texts,
                    # the run's own harness: a signal after its load waits for run.json
                    hold_after=run_dir is not None)
        h.fleet = self.fleet(shape)
        h.observers = self.watch.observers(shape, run_dir, self.target, self.workers)
        if self.telemetry is not None and self.telemetry.wanted():
            from llmbench.servers.telemetry import Telemetry
            h.telemetry = Telemetry(self.telemetry)
        if self.watch.verbose:
            h.verbose = True
            self.say_decisions(h)
        return h

    def say_decisions(self, h: Harness) -> None:
        """-v: what llmbench chose for this run, on stderr."""
        from llmbench.client.request import choose_transport
        info = self.workload.tokenizer_info or {}
        lines = [f"tokenizer: {self.workload.tokenizer}"
                 + (f" ({info.get('exact') and 'exact' or 'approximate'})" if info else ""),
                 f"transport: {choose_transport(self.target.base_url)} to {self.target.endpoint}",
                 f"workers: {'1 (this process)' if h.fleet is None else self.workers}",
                 f"stream: {'yes' if self.params.stream else 'no'}; api: {self.target.api}"]
        for line in lines:
            print(f"llmbench: {line}", file=sys.stderr)

    def fleet(self, shape: Any) -> Any:
        """Worker processes for --workers N > 1, or auto when it chooses more than one (the
        ramp: when its largest step does); None: the one-process path, unchanged."""
        if shape is None:
            return None
        if self.ray is not None:             # --ray: always actors, even just one
            from llmbench.workers.ray_launcher import RayFleet, RayLauncher
            return RayFleet(self.workers, RayLauncher(self.ray), tokenizer=self.tokenizer,
                            count_tokens=self.count_tokens)
        if self.workers == 1:
            return None
        from llmbench.workers import plan
        from llmbench.workers.coordinator import Fleet
        from llmbench.workers.local import LocalLauncher
        if self.workers == "auto" and plan.auto_workers(plan.streams(shape)) == 1:
            return None
        return Fleet(self.workers, LocalLauncher(), tokenizer=self.tokenizer,
                     count_tokens=self.count_tokens)

    def request_config(self) -> dict[str, Any]:
        from llmbench.client.request import choose_transport
        p = self.params
        return {"stream": p.stream, "temperature": p.temperature, "ignore_eos": p.ignore_eos,
                "max_tokens_field": p.max_tokens_field, "extra_body_keys": sorted(p.extra_body),
                # which HTTP client sent the requests (LLMBENCH_TRANSPORT): a comparison of two
                # runs should know if it changed
                "transport": choose_transport(self.target.base_url),
                **({"abandon": p.abandon.text()} if p.abandon is not None else {})}


def board_for(shape: Any) -> Any:
    """The live view for a shape: a ramp or probe's steps (each ramp-in + hold, or the probe's
    rounds of slices), a run's planned requests or seconds."""
    from llmbench.report.live import LiveBoard
    steps = getattr(shape, "steps", None)
    if steps:
        kind = getattr(shape, "kind", "ramp")
        if hasattr(shape, "hold_s"):
            step_s = getattr(shape, "ramp_in_s", 0.0) + shape.hold_s
        else:
            step_s = getattr(shape, "slice_s", 0.0) * 2 * getattr(shape, "rounds", 1)
        return LiveBoard(kind="probe" if kind != "ramp" and not hasattr(shape, "hold_s") else "ramp",
                         unit=getattr(shape, "unit", "users"), n_steps=len(steps), step_s=step_s)
    return LiveBoard(kind="run", requests=getattr(shape, "requests", None),
                     duration_s=getattr(shape, "duration_s", None))


def dashboard_meta(shape: Any, target: Target, run_dir: Path | None,
                   workers: Any = 1) -> dict[str, Any]:
    """What the dashboard shows of a plan before it runs (as ``board_for`` reads a shape)."""
    b = board_for(shape)
    desc = target.describe()
    return {"kind": getattr(shape, "kind", "run"), "unit": b.unit, "n_steps": b.n_steps,
            "step_s": b.step_s, "requests": b.requests, "duration_s": b.duration_s,
            "steps": list(getattr(shape, "steps", None) or []),
            "rate": getattr(shape, "rate", None), "concurrency": getattr(shape, "concurrency", None),
            "model": desc.get("model"), "url": desc.get("url"),
            "folder": run_dir.name if run_dir is not None else None,
            "workers": None if workers == 1 else str(workers)}


def write_started(run_dir: Path | None, kind: str, target: Target, config: dict[str, Any],
                  labels: dict[str, str], replay: dict[str, Any] | None = None) -> None:
    """run.json from the first moment, status "running": a run killed with SIGKILL still leaves
    a folder that says what it was, and ``report`` rebuilds its summary from requests.jsonl.
    config.toml beside it replays the command (``--config``)."""
    writer.start(run_dir, finish.running(kind, target, config, labels))
    if run_dir is not None and replay is not None:
        from llmbench.specs.config import write_replay
        write_replay(run_dir / "config.toml", kind, replay)


def stops_cleanly(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command's ``perform(plan, ...)``: however it ends, its folder is left complete, partial,
    failed or interrupted, never "running", and unlocked. A signal outside the load (Ctrl-C,
    SIGTERM, SIGHUP: KeyboardInterrupt) ends it through ``stopped``, which says what it
    skipped; one during the final write of run.json waits for it (harness.hold_signals)."""
    import functools

    def wrap(perform: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(perform)
        def wrapper(plan: Any, *args: Any, **kwargs: Any) -> Any:
            c = plan.common
            c.last_run_dir = None
            try:
                return perform(plan, *args, **kwargs)
            except KeyboardInterrupt as exc:
                return stopped(exc, c.last_run_dir, kind, c.target)
            except Exception as exc:
                # a bug: it leaves with its traceback, but not with run.json "running"
                _crashed(exc, c.last_run_dir, kind, c.target)
                raise
            finally:
                release_signals(raise_held=False)
                writer.release(c.last_run_dir)
        return wrapper
    return wrap


def stopped(exc: BaseException, run_dir: Path | None, kind: str, target: Target) -> Done:
    """A command stopped by a signal outside its load: one line that says what it skipped,
    and a run.json that is not "running" (nothing measured: interrupted; records on disk but
    no final run.json: partial, its summary rebuilt by ``llmbench report``)."""
    import signal as signal_mod
    previous = {}
    for sig in STOP_SIGNALS:            # a second signal must not cut this short
        try:
            previous[sig] = signal_mod.signal(sig, signal_mod.SIG_IGN)
        except (ValueError, OSError):
            pass
    name = getattr(exc, "signal", "Ctrl-C")
    name = "Ctrl-C" if name == "SIGINT" else name
    try:
        run, message = _stopped_doc(run_dir, kind, target, name)
    finally:
        for sig, handler in previous.items():
            try:
                signal_mod.signal(sig, handler)
            except (ValueError, TypeError, OSError):
                pass
    print(f"error: {message}", file=sys.stderr, flush=True)
    return Done(run, EXIT_INTERRUPTED, run_dir, message)


def _crashed(exc: Exception, run_dir: Path | None, kind: str, target: Target) -> None:
    """run.json "failed" (with what llmbench itself raised) when it still says "running"."""
    if run_dir is None:
        return
    on_disk = writer.on_disk(run_dir)
    if on_disk is not None and on_disk.status != "running":
        return
    why = (f"llmbench stopped on an error of its own ({type(exc).__name__}: "
           f"{str(exc)[:160]}); the finished requests are in requests.jsonl")
    try:
        writer.mark(run_dir, on_disk, lambda: finish.unmeasured(kind, target, "failed", why),
                    "failed", why)
    except Exception:           # noqa: BLE001 - the first error is the one to show
        pass


def _stopped_doc(run_dir: Path | None, kind: str, target: Target,
                 name: str) -> tuple[Run | None, str]:
    if run_dir is None:
        return None, f"interrupted ({name}): nothing was written (no run folder)"
    on_disk = writer.on_disk(run_dir)
    if on_disk is not None and on_disk.status != "running":
        # the result was written whole: what came after it was skipped
        skipped = ("the rest of the output and report.html"
                   if not (run_dir / "report.html").exists() else "the rest of the output")
        on_disk.path = run_dir
        return on_disk, (f"interrupted ({name}) after run.json was written "
                         f"({on_disk.status}); skipped {skipped}: `llmbench report "
                         f"{run_dir}` writes the report")
    log = run_dir / "requests.jsonl"
    if log.is_file() and log.stat().st_size > 0:
        why = (f"interrupted ({name}) before its result was written; the finished requests are "
               f"in requests.jsonl: `llmbench report {run_dir}` rebuilds the summary and report")
        writer.mark(run_dir, on_disk, lambda: finish.unmeasured(kind, target, "partial", why),
                    "partial", why)
        return None, why
    why = f"interrupted ({name}) before the load started: nothing was measured"
    writer.mark(run_dir, on_disk, lambda: finish.unmeasured(kind, target, "interrupted", why),
                "interrupted", why)
    return None, why


def report_failed(exc: PreflightError, run_dir: Path | None, kind: str, target: Target) -> int:
    """One line on stderr, and a run.json that says why nothing was measured."""
    message = target.redact(str(exc)) or ""
    print(f"error: {message}", file=sys.stderr)
    status = "interrupted" if exc.exit_code == EXIT_INTERRUPTED else "failed"
    finish.unmeasured(kind, target, status, message).save(run_dir)
    release_signals()           # a signal held since the load ended is raised now
    return exc.exit_code


def failed(exc: PreflightError, run_dir: Path | None, kind: str, target: Target) -> Done:
    """``report_failed``, as the Done of a command that measured nothing."""
    code = report_failed(exc, run_dir, kind, target)
    board = shown.board_now()
    if board is not None:
        board.failed(target.redact(str(exc)) or "")
    return Done(None, code, run_dir, target.redact(str(exc)) or "")


def dashboard_of(h: Harness) -> Any:
    """The dashboard a run's harness feeds (a ramp's steps and thresholds go to its page as
    they are judged), or None."""
    from llmbench.report.dashboard.feed import DashboardFeed
    return next((o.board for o in h.observers if isinstance(o, DashboardFeed)), None) \
        if "llmbench.report.dashboard.feed" in sys.modules else None


def _cell_view() -> bool:
    mod = sys.modules.get("llmbench.report.dashboard.handle")
    return bool(mod is not None and mod._CELL)


def agent_preflight(target: Any, params: Any, convs: Any) -> dict[str, Any] | None:
    """The first request's extra fields for a run of agents: the first session's tools (as
    its calls send them), so a server that refuses tools fails at once, in one line, before
    the load; None for chat, or when --tools' own are in every body already."""
    from llmbench.workload.agents import is_agent
    if not len(convs) or not is_agent(convs[0]) or "tools" in (params.extra_body or {}):
        return None
    from llmbench.wire.agents import request_fields
    fields = request_fields(target.api, list(convs[0].tools), None, None)
    return fields or None
