"""The harness wired for a plan (who watches it, its worker fleet, the server's machine, the
network's round trip around the load), and each command's load measured on it: the
``measure_*`` link of ARCHITECTURE.md's chain (issue 44 §2). The plans are read by attribute
only (commands' RunPlan, RampPlan, ProbePlan: a layer above this one), so nothing here calls
back up into the command.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from llmbench.analysis import finish
from llmbench.client.request import choose_transport
from llmbench.client.target import Target
from llmbench.load.harness import Harness, LiveView, Outcome, TargetSpec
from llmbench.load.observe import Observer
from llmbench.load.shapes import ClosedLoop
from llmbench.report import outcome as shown


@dataclass
class Watch:
    """Who watches a run, apart from the plan (what is measured): the harness's observers, what
    it says and where the result is logged after. Nothing measured depends on these."""

    progress: bool | None = None
    quiet: bool = False                    # -q: errors and the final answer only
    verbose: bool = False                  # -v: what llmbench decides, as it decides it
    metrics_at: tuple[str, int] | None = None     # --metrics-host, --metrics-port
    dashboard_at: tuple[str, int] | None = None   # --dashboard [HOST:]PORT (port 0: any)
    dashboard_linger_s: float | None = None       # --dashboard-linger (None: until Ctrl-C)
    otlp: str | None = None                # --otlp URL|env: request spans (report/otlp.py)
    mlflow: str | None = None              # --mlflow URI: the run logged (report/tracker.py)


def observers(watch: Watch, shape: Any, run_dir: Path | None, target: Target,
              workers: int | str = 1) -> list[Observer]:
    """Who watches the run, built in this one place; the dashboard's page and a notebook cell's
    view share one feed (report.dashboard.feed.DashboardFeed)."""
    out: list[Observer] = []
    if watch.metrics_at is not None:
        from llmbench.report.prometheus import MetricsExporter
        host, port = watch.metrics_at
        out.append(MetricsExporter(host, port, run=run_dir.name if run_dir else "",
                                   keep=run_dir / "metrics.prom" if run_dir else None))
    if shape is not None and watch.progress is not False:
        out.append(board_for(shape))
    if shape is not None and (watch.dashboard_at is not None or shown.cell_view_open()):
        from llmbench.report.dashboard import handle
        from llmbench.report.dashboard.feed import DashboardFeed
        board = handle.for_run(watch.dashboard_at, watch.dashboard_linger_s)
        if board is not None:
            board.begin(dashboard_meta(shape, target, run_dir, workers))
            out.append(DashboardFeed(board))
    if watch.otlp is not None:
        from llmbench.report.otlp import OtlpExporter
        out.append(OtlpExporter(
            watch.otlp, target.model or "", target.api, target.base_url,
            run_dir.name if run_dir else "",
            log=run_dir / "requests.jsonl" if run_dir is not None else None))
    return out


def board_for(shape: Any) -> Any:
    """The terminal's live view, its progress bar sized by the shape's plan."""
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


def dashboard_of(h: Harness) -> Any:
    """The dashboard a run's harness feeds (a ramp's steps and thresholds go to its page as
    they are judged), or None."""
    if "llmbench.report.dashboard.feed" not in sys.modules:
        return None
    from llmbench.report.dashboard.feed import DashboardFeed
    return next((o.board for o in h.observers if isinstance(o, DashboardFeed)), None)


# -- the harness ---------------------------------------------------------------------------------

def harness(c: Any, run_dir: Path | None, live_line: Callable[[LiveView], str] | None = None,
            keep_texts: bool = False, shape: Any = None) -> Harness:
    """The harness of a plan's common part (commands.common.Common): its request options, its
    observers, its worker fleet (``shape`` None: none of them), the server's machine."""
    h = Harness(c.params, c.timeouts, run_dir, count_tokens=c.count_tokens,
                served_by_header=c.served_by_header, progress=c.watch.progress,
                live_line=live_line, keep_texts=keep_texts,
                # the run's own harness: a signal after its load waits for run.json
                hold_after=run_dir is not None)
    h.fleet = fleet(c, shape)
    h.observers = observers(c.watch, shape, run_dir, c.target, c.workers)
    if c.telemetry is not None and c.telemetry.wanted():
        from llmbench.servers.telemetry import Telemetry
        h.telemetry = Telemetry(c.telemetry)
    if c.watch.verbose:
        h.verbose = True
        _say_decisions(c, h)
    return h


def _say_decisions(c: Any, h: Harness) -> None:
    """-v: what llmbench chose for this run, on stderr."""
    info = c.workload.tokenizer_info or {}
    lines = [f"tokenizer: {c.workload.tokenizer}"
             + (f" ({info.get('exact') and 'exact' or 'approximate'})" if info else ""),
             f"transport: {choose_transport(c.target.base_url)} to {c.target.endpoint}",
             f"workers: {'1 (this process)' if h.fleet is None else c.workers}",
             f"stream: {'yes' if c.params.stream else 'no'}; api: {c.target.api}"]
    for line in lines:
        print(f"llmbench: {line}", file=sys.stderr)


def fleet(c: Any, shape: Any) -> Any:
    """Worker processes for --workers N > 1, or auto when it chooses more than one (the ramp:
    when its largest step does); None: the one-process path, unchanged."""
    if shape is None:
        return None
    if c.ray is not None:             # --ray: always actors, even just one
        from llmbench.workers.ray_launcher import RayFleet, RayLauncher
        return RayFleet(c.workers, RayLauncher(c.ray), tokenizer=c.tokenizer,
                        count_tokens=c.count_tokens)
    if c.workers == 1:
        return None
    from llmbench.workers import plan
    from llmbench.workers.coordinator import Fleet
    from llmbench.workers.local import LocalLauncher
    if c.workers == "auto" and plan.auto_workers(plan.streams(shape)) == 1:
        return None
    return Fleet(c.workers, LocalLauncher(), tokenizer=c.tokenizer, count_tokens=c.count_tokens)


def floor(c: Any, when: str) -> Any:
    """The network floor now (client.floor.Floor), or None when not wanted: --network-floor
    off, or auto with a loopback address (nothing there is worth naming)."""
    if c.network_floor == "off":
        return None
    from llmbench.client.floor import floor_now, is_loopback
    if c.network_floor == "auto" and is_loopback(c.target.base_url):
        return None
    return floor_now(c.target.base_url, c.target.net, when, c.target.request_headers())


# -- llmbench run --------------------------------------------------------------------------------

@dataclass
class Measured:
    """A run's load as measured: the harness's outcome, the network's round trip before and
    after (None: not measured), the prompt cache's counters around it (--prefix-hit-ratio:
    before, (kind, after), the warm-up's failures) and the reply texts (vLLM --save-detailed)."""

    outcome: Outcome
    floors: list[Any] | None = None
    prefix: tuple[Any, Any, Any] | None = None
    texts: dict[str, str] = field(default_factory=dict)


def run_line(v: LiveView) -> str:
    c = v.counters
    return (f"in flight {c.in_flight:4d}  done {c.done:6d}  failed {c.failed:4d}  "
            f"~{v.events_last_s:5d} tok/s")


def measure_run(plan: Any, run_dir: Path | None) -> Measured:
    """``llmbench run``'s shape on its harness (raises PreflightError before any load)."""
    c = plan.common
    h = harness(c, run_dir, run_line, keep_texts=plan.vllm is not None and plan.vllm.detailed,
                shape=plan.shape)
    prefix_before = warm_failed = None
    if c.workload.prefix is not None:          # --prefix-hit-ratio: warm the cache, then count
        warm_failed = _warm_up(c)
        prefix_before = _prefix_counters(c)[1]
    before = floor(c, "before")          # the network's round trip (client/floor.py)
    outcome = h.run(plan.shape, plan.targets)
    floors = [before, floor(c, "after")] if before is not None else None
    counted = ((prefix_before, _prefix_counters(c), warm_failed)
               if c.workload.prefix is not None else None)
    return Measured(outcome, floors, counted, h.texts)


def measure_classes(plan: Any, run_dir: Path | None) -> Outcome:
    """``run --scenario``: the crowd held once on its harness, each step judged as the ramp
    judges a step of classes."""
    finish.ramp_judges(plan.ramp)
    return harness(plan.common, run_dir, run_line, shape=plan.shape).run(plan.shape,
                                                                          plan.targets)


def _prefix_counters(c: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(server kind, one poll of its prefix-cache counters) or (None, None) when probing is
    off or finds nothing."""
    if c.server_probe == "off":
        return None, None
    from llmbench.servers.scrape import ServerProbe, errors
    probe = ServerProbe(c.target.server_root, c.server_probe,
                        headers={k: v for k, v in c.target.request_headers().items()
                                 if k != "content-type"}, net=c.target.net)

    async def once() -> dict[str, Any] | None:
        async with probe.session() as session:
            if await probe.detect(session) is None:
                return None
            return await probe.poll_once(session)
    try:
        sample = asyncio.run(once())
    except errors():        # aiohttp's too when an https:// probe loaded it
        return None, None
    return (probe.kind if sample else None), sample


def _warm_up(c: Any) -> int:
    """--prefix-hit-ratio: send the workload's warm-up conversations (each shared prompt once,
    all at once) through a harness of their own, so none of them lands in the run's records;
    the number that failed."""
    warm = c.workload.warmup
    if not warm:
        return 0
    outcome = harness(c, None).run(ClosedLoop(warm, len(warm)), [TargetSpec(
        c.target, server_probe="off", salt=c.workload.salt_for("main"))])
    return sum(1 for r in outcome.records if not r.ok)


# -- llmbench ramp -------------------------------------------------------------------------------

def measure_ramp(r: Any, run_dir: Path | None) -> tuple[Outcome, Any]:
    """A ramp's steps on its harness, its table printed as they are judged, and the network's
    round trip before, between the steps and after. Raises PreflightError before any load."""
    from llmbench.client.floor import floor_later
    c, shape = r.common, r.shape
    finish.ramp_judges(r)
    if r.find is not None:
        shape.pacer = finish.search_pacer(r.find, shape)
        shape.steps = []
    h = harness(c, run_dir, shown.ramp_live_line(shape.unit, None if r.find is not None
                                                 else len(shape.steps)), shape=shape)
    shape.pace()                  # the fixed list's pacer, made now; a search's is set above
    table = shown.RampTable(r, h, run_dir, dashboard_of(h), finish.unit_of(r))
    shape.on_plan, shape.on_step = table.on_plan, table.on_step
    shape.before_step = r.reset.before_step if r.reset is not None else None
    if r.scenario is not None and shape.isolate:
        shape.on_isolated = table.on_isolated
    table.begin(c.target.api)
    before = floor(c, "before")          # the network's round trip (client/floor.py)
    table.floor = finish.network_of([before])
    between: list[Any] = []             # the network floor after each step
    measuring: list[Any] = []
    if before is not None:              # measured off the loop while the next step starts
        t = c.target
        table.after_step = lambda step: measuring.append(floor_later(
            t.base_url, t.net, f"after step {step.index}", t.request_headers(), between))
    outcome = h.run(shape, r.targets)
    after = floor(c, "after") if before is not None else None
    for th in measuring:
        th.join(12.0)                    # each of its steps has a 5 s deadline
    return outcome, finish.network_of([before, *between, after])


# -- llmbench probe ------------------------------------------------------------------------------

def measure_probe(plan: Any, run_dir: Path | None) -> Outcome:
    """The probe's steps on its harness, each step's row printed as it is judged."""
    shape = plan.shape
    live = shown.ramp_live_line("users", len(shape.steps), probe=True)
    h = harness(plan.common, run_dir, live, shape=shape)
    shape.judge = finish.probe_judge(plan)
    board = dashboard_of(h)

    def on_step(step: Any) -> None:     # its row, and the step on the dashboard's page
        h.say(shown.probe_row(step))
        if board is not None:
            board.step(step.to_dict())
    shape.on_step = on_step
    print(shown.PROBE_HEADER, flush=True)
    return h.run(shape, plan.targets)
