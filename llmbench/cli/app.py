"""The command line: parse flags into option groups, build a plan, call one entry point.

Option groups (target, server, workload, request, output) are declared once in options.py and
used by every command; each validates itself. Every user mistake becomes one line on stderr and
exit code 2, never a traceback.
"""



import dataclasses
import inspect
import math
import os
import sys
import typing
from pathlib import Path
from typing import List, Optional

import typer
from typing import Annotated

from llmbench.errors import EXIT_USAGE, EXIT_WRITE
from llmbench.cli import options as opt
from llmbench.cli.options import P_GATES, P_LOAD, P_OUTPUT, P_STEPS, P_TARGET, P_VLLM, OutputOpts, RequestOpts, ServerOpts, TargetOpts, UsageError, WorkloadOpts, group_defaults, with_groups

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Load-test LLM chat servers: how many users hold, and why the next step broke.")
datasets_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Look at a workload before you send it.")
app.add_typer(datasets_app, name="datasets")


def fail(message: str, code: int = EXIT_USAGE) -> "typer.Exit":
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


# Options several commands share but that belong to no group: declared once here.
Think = Annotated[Optional[str], typer.Option(help="Pause between a user's turns, e.g. 5s-10s; 0 allowed.", rich_help_panel=P_LOAD)]
Threshold = Annotated[Optional[List[str]], typer.Option("--threshold", metavar="EXPR", help="Gate, e.g. 'ttft.p95_all<=2s' (repeatable).", rich_help_panel=P_GATES)]
Users = Annotated[Optional[str], typer.Option(help="Steps of users, e.g. 1,2,4,8.", rich_help_panel=P_STEPS)]
Workers = Annotated[str, typer.Option(metavar="N|auto", help="Worker processes sharing the load (auto: from the streams and cores).", rich_help_panel=P_LOAD)]


def _workers(value: str) -> int | str:
    """--workers N|auto: 1 (the default) runs in this process, as without the option."""
    v = (value or "1").strip().lower()
    if v == "auto":
        return "auto"
    try:
        n = int(v)
    except ValueError:
        raise UsageError(f"--workers {value!r}: expected a number of processes (1, 2, ...) or auto")
    if n < 1:
        raise UsageError(f"--workers {value!r}: must be at least 1 (1 = this process only)")
    if n > 256:
        raise UsageError(f"--workers {n}: at most 256 processes; use auto to fit the cores")
    return n


RayOpt = Annotated[Optional[str], typer.Option("--ray", metavar="auto|ADDR", help="Run the workers as Ray actors over a cluster's nodes (auto: RAY_ADDRESS, else local Ray).", rich_help_panel=P_LOAD)]


def _ray(value: str | None) -> str | None:
    """--ray auto|HOST:PORT, checked without importing Ray (it takes a second)."""
    if value is None:
        return None
    import importlib.util
    from llmbench.workers.ray_launcher import RAY_NEEDED, parse_address
    try:
        address = parse_address(value)
    except ValueError as exc:
        raise UsageError(str(exc))
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):        # a broken or blocked install
        found = False
    if not found:
        raise UsageError(RAY_NEEDED)
    return address


_RAY_JOINED: dict = {}


def _with_ray(common, address: str | None):
    """Join the Ray cluster before the run (one line and exit 3 when it cannot); once per
    process (a --repeat ramp or a sweep builds several plans)."""
    if address is None:
        return common
    if address in _RAY_JOINED:
        return dataclasses.replace(common, ray=_RAY_JOINED[address])
    from llmbench.workers.ray_launcher import RayUnavailable, connect
    try:
        cluster = _RAY_JOINED[address] = connect(address)
    except RayUnavailable as exc:
        raise fail(str(exc), exc.exit_code)
    typer.echo(f"Ray: {cluster.nodes} node(s), {cluster.cpus:g} CPUs at {cluster.connected_to}"
               + (" (a local instance started for this run)" if cluster.started_local else ""),
               err=True)
    return dataclasses.replace(common, ray=cluster)


def _version(value: bool) -> None:
    if value:
        from llmbench.version import __version__
        typer.echo(f"llmbench {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None) -> None:
    """Load-test LLM chat servers: how many users hold, and why the next step broke."""


def _target(t: TargetOpts, s: ServerOpts, url: str, model: str | None):
    """The target; waits for a starting server (--wait-ready) and, without --model, asks the
    server for the one model it serves."""
    from llmbench.servers.discover import DiscoverError, pick_model, wait_ready as wait
    from llmbench.client.target import make_target
    probe = make_target(url, model or "?", s.api, s.api_key, s.header, **s.target_options())
    try:
        wait_s = t.wait_ready_s()
        if wait_s:
            wait(probe, wait_s)
        if model:
            return probe
        import dataclasses
        name = pick_model(probe)
    except DiscoverError as exc:
        raise fail(str(exc), exc.exit_code)
    typer.echo(f"note: no --model given; the server serves one model: {name}", err=True)
    return dataclasses.replace(probe, model=name)


def _common(tgt, s: ServerOpts, w: WorkloadOpts, rq: RequestOpts, o: OutputOpts, n: int,
            multi_turn: bool | None = None, progress: bool | None = None):
    """The plan's common part from the groups (the workload is built against ``tgt``)."""
    from llmbench.commands.common import Common
    params, timeouts = rq.build()
    wl, tok = w.build(n, target=tgt, multi_turn=multi_turn)
    return Common(target=tgt, workload=wl, params=params, timeouts=timeouts,
                  count_tokens=tok.count, served_by_header=s.served_by_header,
                  server_probe=s.server_probe, out=o.out, labels=o.labels(),
                  progress=o.progress if progress is None else progress)


def _trace_plan(tgt, s: ServerOpts, w: WorkloadOpts, rq: RequestOpts, o: OutputOpts, path: str,
                speed: float, window_s, limit: int | None):
    """run --trace: the plan's common part with the trace's workload, and the replay shape."""
    import dataclasses
    from llmbench.load.shapes.trace import TraceReplay
    from llmbench.workload import ServerRef, load_tokenizer
    from llmbench.workload.traces import PrefixAim, check_replay, trace_workload
    aim = None
    if w.prefix_hit_ratio is not None:
        aim = PrefixAim(w.prefix_hit_ratio, w.cache_block_tokens, w.prefixes)
        w = dataclasses.replace(w, prefix_hit_ratio=None)   # the trace, not a synthetic set
    common = _common(tgt, s, w, rq, o, 1)     # groups checked, params and timeouts built
    ref = ServerRef(tgt.server_root, tgt.model,
                    {k: v for k, v in tgt.request_headers().items() if k != "content-type"},
                    tgt.net)
    tok = load_tokenizer(w.tokenizer, server=ref)
    tr, wl = trace_workload(path, tok, w.seed, window_s, limit, aim)
    check_replay(tr, speed)           # a replay that ends within 30 days, or one line
    common = dataclasses.replace(common, workload=wl)
    return common, TraceReplay(tr.items, speed, tr.describe(), w.seed)



def _check_writable(path: Path | None, flag: str) -> None:
    """Find out before a long run, not after it, that a result file cannot be written."""
    if path is None:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{flag} {p}: is a folder; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{flag} {p}: the folder {parent} does not exist; create it or pick another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{flag} {p}: cannot write there (permission denied); pick another path")


# Our input errors, by module: looked up only in modules already imported (an error class
# whose module was never imported cannot have been raised), so the CLI does not import numpy
# (through slo) just to print help or reject a flag.
_INPUT_ERRORS = {"llmbench.results.folder": ("RunFolderError",), "llmbench.analysis.slo": ("ThresholdError",),
                 "llmbench.client.target": ("TargetError",), "llmbench.client.netconfig": ("NetError",),
                 "llmbench.workload.files": ("DatasetError",),
                 "llmbench.workload.tokenizer": ("TokenizerError",)}


def _input_errors() -> tuple[type, ...]:
    out = []
    for module, names in _INPUT_ERRORS.items():
        mod = sys.modules.get(module)
        out += [getattr(mod, n) for n in names if mod is not None and hasattr(mod, n)]
    return tuple(out)


def _guard(fn):
    """Turn our own input errors into one line and exit 2."""

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except UsageError as exc:
            raise fail(str(exc))
        except Exception as exc:
            if isinstance(exc, _input_errors()):
                raise fail(str(exc))
            from llmbench.results.folder import is_write_error, write_error_line
            if is_write_error(exc) and exc.filename is not None:
                # the disk, not the path: full, a file over its size limit, read-only
                raise fail(write_error_line(exc), EXIT_WRITE)
            if isinstance(exc, OSError) and exc.filename is not None:
                # a path the user gave (--out, --output, --html, --png, a dataset) is not usable
                raise fail(f"{exc.filename}: {exc.strerror}; check the path you gave")
            raise
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = __import__("inspect").signature(fn)  # type: ignore[attr-defined]
    return wrapper


# -- run -----------------------------------------------------------------------------------------
@app.command()
@_guard
@with_groups
def run(
    target: TargetOpts = None,
    server: ServerOpts = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Closed loop: N requests in flight.", rich_help_panel=P_LOAD)] = None,
    rate: Annotated[Optional[str], typer.Option(help="Open loop: requests per second (or inf).", rich_help_panel=P_LOAD)] = None,
    burstiness: Annotated[float, typer.Option(help="Gamma shape of the gaps: 1 = Poisson, <1 burstier.", rich_help_panel=P_LOAD)] = 1.0,
    arrival: Annotated[str, typer.Option(help="gamma | poisson | constant", rich_help_panel=P_LOAD)] = "gamma",
    max_concurrency: Annotated[Optional[int], typer.Option(help="Open loop: cap on requests in flight.", rich_help_panel=P_LOAD)] = None,
    requests: Annotated[Optional[int], typer.Option(help="How many requests (default 200 unless --duration; with no --url, 60 s of requests).", rich_help_panel=P_LOAD)] = None,
    duration: Annotated[Optional[str], typer.Option(help="Stop starting requests after this long, e.g. 60s.", rich_help_panel=P_LOAD)] = None,
    warmup: Annotated[int, typer.Option(help="Requests sent first and not counted.", rich_help_panel=P_LOAD)] = 0,
    think: Think = "0",
    workers: Workers = "1",
    ray: RayOpt = None,
    trace: Annotated[Optional[Path], typer.Option(metavar="FILE", help="Replay a trace on its own timestamps: Mooncake JSONL, Azure CSV, or JSONL with timestamp (ms) and lengths or messages.", rich_help_panel=P_LOAD)] = None,
    trace_speed: Annotated[float, typer.Option(help="--trace: 2 replays twice as fast (gaps halved).", rich_help_panel=P_LOAD)] = 1.0,
    trace_window: Annotated[Optional[str], typer.Option(metavar="START-END", help="--trace: only this part, from its first request, e.g. 10m-20m.", rich_help_panel=P_LOAD)] = None,
    workload: WorkloadOpts = None,
    request: RequestOpts = None,
    save_result: Annotated[bool, typer.Option("--save-result", help="Also write vLLM's result JSON (vllm bench serve's keys and types).", rich_help_panel=P_VLLM)] = False,
    save_detailed: Annotated[bool, typer.Option("--save-detailed", help="Add per-request arrays: ttfts, itls, input_lens, output_lens, start_times, generated_texts, errors.", rich_help_panel=P_VLLM)] = False,
    append_result: Annotated[bool, typer.Option("--append-result", help="Append the result as one more line of the file.", rich_help_panel=P_VLLM)] = False,
    result_dir: Annotated[Optional[Path], typer.Option(metavar="DIR", help="Folder for the file (default: the current one).", rich_help_panel=P_VLLM)] = None,
    result_filename: Annotated[Optional[str], typer.Option(metavar="NAME", help="File name (default: vLLM's pattern of label, rate, concurrency, model and date).", rich_help_panel=P_VLLM)] = None,
    metadata: Annotated[Optional[List[str]], typer.Option("--metadata", metavar="K=V", help="Stored in the file (repeatable).", rich_help_panel=P_VLLM)] = None,
    percentile_metrics: Annotated[str, typer.Option(help="Metrics to print percentiles for (ttft,tpot,itl,e2el).", rich_help_panel=P_OUTPUT)] = "ttft,tpot,itl",
    metric_percentiles: Annotated[str, typer.Option(help="Percentiles to print, e.g. 50,99.", rich_help_panel=P_OUTPUT)] = "99",
    goodput: Annotated[Optional[List[str]], typer.Option(metavar="KEY:MS", help="vLLM's goodput SLO, e.g. ttft:500 (repeatable).", rich_help_panel=P_OUTPUT)] = None,
    output: OutputOpts = None,
    threshold: Threshold = None,
) -> None:
    """One load level with vLLM-compatible numbers. With no --url, a one-minute demo against the built-in mock."""

    if concurrency is not None and rate is not None:
        raise UsageError("give --concurrency (closed loop) or --rate (open loop), not both")
    n_workers = _workers(workers)
    ray_address = _ray(ray)
    if trace is None and (trace_window is not None or trace_speed != 1.0):
        raise UsageError("--trace-speed and --trace-window need --trace FILE")
    if trace is not None:
        if concurrency is not None or rate is not None or duration is not None or warmup:
            raise UsageError("--trace sets the load itself: drop --concurrency, --rate, "
                             "--duration and --warmup (--trace-window picks a part)")
        if not (trace_speed > 0 and math.isfinite(trace_speed)):
            raise UsageError(f"--trace-speed {trace_speed:g}: must be a finite number above 0")
    if concurrency is not None and concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    opt.count(concurrency, "--concurrency", hi=MAX_LOAD)
    opt.count(max_concurrency, "--max-concurrency")
    opt.count(warmup, "--warmup", lo=0)
    request.validate()
    workload.validate()
    server.validate()
    if save_result or append_result:
        # the file name is known only after the run (vLLM's pattern has the date), so check
        # the folder it goes to: --result-dir, or the folder part of --result-filename
        folder = Path(result_dir) if result_dir is not None else Path(".")
        # vLLM creates --result-dir; the nearest folder that exists must let us do that
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError(f"--result-dir {folder}: {existing} is a file; pick another folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"--result-dir {folder}: cannot write in {existing} (permission denied); pick another folder")
        if result_filename and folder.is_dir():
            _check_writable(folder / result_filename, "--result-filename")
    rate_f = None
    if rate is not None:
        try:
            rate_f = float(rate)
        except ValueError:
            raise UsageError(f"--rate {rate!r}: expected a number of requests per second, or inf")
        if not rate_f > 0:
            raise UsageError("--rate must be > 0")
    if arrival not in ("gamma", "poisson", "constant"):
        raise UsageError(f"--arrival {arrival!r}: choose gamma, poisson or constant")
    if not burstiness > 0 or not math.isfinite(burstiness):
        raise UsageError(f"--burstiness {burstiness:g}: must be a finite number above 0 (1 = Poisson)")
    duration_s = opt.duration(duration, "--duration") if duration else None
    if duration_s is not None and duration_s <= 0:
        raise UsageError("--duration must be above 0")
    if rate_f is not None and math.isinf(rate_f) and requests is None:
        raise UsageError("--rate inf sends everything at once: give --requests N")
    if requests is None and duration_s is None and trace is None:
        if target.url is None and rate_f is None and concurrency is None:
            # the demo on the built-in mock: a minute, not 200 requests one at a time (~4 min)
            duration_s = DEMO_RUN_S
            typer.echo(f"No --url, --requests or --duration: a {DEMO_RUN_S:g} s demo, one "
                       "request at a time against the built-in mock (--requests N or "
                       "--duration to change it)", err=True)
        else:
            requests = 200
    if requests is not None and requests < 1:
        raise UsageError("--requests must be at least 1")
    opt.count(requests, "--requests")
    if (rate_f is not None and requests is not None and duration_s is None
            and requests / rate_f > opt.MAX_DURATION_S):
        # --rate 1e-9: the schedule's gaps are 30 years each (a --duration ends it anyway)
        raise UsageError(f"--rate {rate}: {requests} requests would take "
                         f"{requests / rate_f / 86400:,.0f} days, and a run lasts at most 30 days: "
                         "raise --rate or give --duration")
    slo = {}
    for g in goodput or []:
        k, _, v = g.partition(":")
        if k not in ("ttft", "tpot", "e2el") or not v:
            raise UsageError(f"--goodput {g!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            slo[k] = float(v)
        except ValueError:
            raise UsageError(f"--goodput {g!r}: {v!r} is not a number of milliseconds")
        opt.number(slo[k], f"--goodput {k}", lo=0, lo_open=True)
    pm = tuple(m.strip() for m in percentile_metrics.split(",") if m.strip())
    for m in pm:
        if m not in ("ttft", "tpot", "itl", "e2el"):
            raise UsageError(f"--percentile-metrics: unknown metric {m!r}; use ttft,tpot,itl,e2el")
    try:
        mp = tuple(float(p) for p in metric_percentiles.split(","))
    except ValueError:
        raise UsageError(f"--metric-percentiles {metric_percentiles!r}: expected numbers like 50,90,99")
    if any(not 0 < p < 100 for p in mp):
        raise UsageError("--metric-percentiles must lie between 0 and 100")
    output.labels()
    think_s = opt.parse_think(think or "0")
    from llmbench.report.vllm_json import parse_metadata
    try:
        meta = parse_metadata(metadata)
    except ValueError as exc:
        raise UsageError(str(exc))
    from llmbench.analysis.slo import parse_threshold
    thresholds = [parse_threshold(t) for t in threshold or []]
    count = (requests or 1000) + warmup
    window_s = None
    if trace_window is not None:
        from llmbench.workload.traces import parse_window
        window_s = parse_window(trace_window)
    from llmbench.commands.run import Gates, RunPlan, VllmResult, execute
    from llmbench.load.shapes import ClosedLoop, OpenLoop
    with _maybe_mock(target.url) as (url_, model_):
        tgt = _target(target, server, url_, target.model or model_)
        if trace is not None:
            common, shape = _trace_plan(tgt, server, workload, request, output, str(trace),
                                        trace_speed, window_s, requests)
        else:
            common = _common(tgt, server, workload, request, output, count)
            convs = common.workload.conversations
            shape = (OpenLoop(convs, rate_f, requests, duration_s, burstiness, arrival,
                              max_concurrency, warmup, think_s, workload.seed)
                     if rate_f is not None else
                     ClosedLoop(convs, concurrency or 1, requests, duration_s, warmup, think_s,
                                workload.seed))
        common = dataclasses.replace(common, workers=n_workers,
                                     tokenizer=workload.tokenizer)
        common = _with_ray(common, ray_address)
        plan = RunPlan(common, shape,
                       Gates(pm, mp, slo or None, thresholds=thresholds),
                       VllmResult(save_detailed, append_result, result_dir, result_filename, meta)
                       if save_result or append_result else None)
        code = execute(plan)
    raise typer.Exit(code)


DEMO_RUN_S = 60.0        # `llmbench run` with no --url and no size: a one-minute demo


class _maybe_mock:
    """No --url: start the built-in mock (Ollama-like queueing) in a child process."""

    def __init__(self, url: str | None, profile: str = "ollama", **overrides) -> None:
        self.url = url
        self.profile = profile
        self.overrides = overrides
        self.proc = None

    def __enter__(self):
        if self.url:
            return self.url, None
        from mock_server import MockProcess, make_config
        cfg = make_config(self.profile, **self.overrides)
        self.proc = MockProcess(cfg).__enter__()
        typer.echo(f"No --url given: using the built-in mock ({self.profile} profile) at "
                   f"{self.proc.url}", err=True)
        return self.proc.url + "/v1", cfg.models[0]

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.__exit__(*exc)




# -- ramp ----------------------------------------------------------------------------------------
# With no --url, a short demo against the built-in mock: about a minute, and it breaks.
DEMO = {"users": "2,4,6,8,10,12", "hold": "10s", "ramp_in": "2s", "think": "1s-3s",
        "output_tokens": "64", "prompt_tokens": "32-96", "turns": 3}
SERVER = {"hold": "60s", "ramp_in": "10s", "think": "5s-10s", "output_tokens": "128",
          "prompt_tokens": "64-256", "turns": 4}


# more streams than any one machine (or cluster) opens: a typo, not a plan. Refused, so that
# --users 1e308 or --concurrency 10**12 is one line, not a run that allocates forever.
MAX_LOAD = 1_000_000


def _steps(users: Optional[str], start: Optional[float], step: Optional[float],
           up_to: Optional[float], by: str) -> list:
    if users:
        try:
            steps = [float(x) for x in users.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--users {users!r}: expected numbers like 1,2,4,8")
        if any(not math.isfinite(s) for s in steps):
            raise UsageError(f"--users {users!r}: need finite numbers like 1,2,4,8")
        if not steps or any(s <= 0 for s in steps) or steps != sorted(steps):
            raise UsageError(f"--users {users!r}: need increasing numbers above 0")
        if by == "users" and any(s != int(s) for s in steps):
            raise UsageError(f"--users {users!r}: users come in whole numbers, e.g. 1,2,4,8")
        if max(steps) > MAX_LOAD:
            raise UsageError(f"--users {users!r}: at most {MAX_LOAD:,} "
                             f"{'users' if by == 'users' else 'requests/s'} a step")
        return steps
    opt.number(start, "--start", lo=0, lo_open=True)
    opt.number(step, "--step", lo=0, lo_open=True)
    opt.number(up_to, "--up-to", lo=0, lo_open=True)
    start = 2 if start is None else start
    step = 2 if step is None else step
    up_to = 40 if up_to is None else up_to
    if (up_to - start) / step > 10000:
        raise UsageError(f"--start {start:g} --step {step:g} --up-to {up_to:g} make over 10000 steps; "
                         "raise --step")
    if start <= 0 or step <= 0:
        raise UsageError("--start and --step must be above 0")
    if start > up_to:
        raise UsageError(f"--start {start:g} is above --up-to {up_to:g}; lower --start or raise --up-to")
    out, v = [], start
    while v <= up_to + 1e-9:
        out.append(round(v, 6))
        v += step
    if by == "users" and any(abs(s - round(s)) > 1e-9 for s in out):
        raise UsageError("users come in whole numbers: check --start/--step/--up-to")
    if out and max(out) > MAX_LOAD:
        raise UsageError(f"--up-to {up_to:g}: at most {MAX_LOAD:,} "
                         f"{'users' if by == 'users' else 'requests/s'} a step")
    return out



@dataclasses.dataclass
class _RampSetup:
    """The ramp's options, checked, and how to build its plan for a server: ``ramp`` builds
    one, ``sweep`` one per setting, ``--repeat`` one per repeat (seeds offset by k)."""

    target: TargetOpts
    server: ServerOpts
    workload: WorkloadOpts
    request: RequestOpts
    output: OutputOpts
    steps: list
    by: str
    ramp_in_s: float
    hold_s: float
    think_s: tuple
    thresholds: list
    keep_going: bool
    lag_limit_ms: float
    expect: Optional[float]
    repeat: int
    workers: Optional[int] = 1             # worker processes (None: auto)
    ray: Optional[str] = None              # --ray auto|HOST:PORT (checked, not yet joined)

    def plan(self, url: str, model: Optional[str], mock: Optional[dict] = None,
             seed_offset: int = 0, out: Optional[Path] = None,
             labels: Optional[dict] = None):
        from llmbench.commands.ramp import RampPlan
        from llmbench.load.shapes import Ramp
        tgt = _target(self.target, self.server, url, model)
        wl = dataclasses.replace(self.workload, seed=self.workload.seed + seed_offset)
        common = _common(tgt, self.server, wl, self.request, self.output, 2000, multi_turn=True)
        common = dataclasses.replace(common, workers=self.workers, tokenizer=wl.tokenizer)
        common = _with_ray(common, self.ray)
        if out is not None or labels is not None:
            common = dataclasses.replace(common, out=out or common.out,
                                         labels=common.labels if labels is None else labels)
        shape = Ramp(common.workload.conversations, self.steps, by=self.by,
                     ramp_in_s=self.ramp_in_s, hold_s=self.hold_s, think_s=self.think_s,
                     keep_going=self.keep_going,
                     drain_s=max(self.request.timeout_first_token, 30.0),
                     seed=wl.seed, lag_limit_ms=self.lag_limit_ms)
        return RampPlan(common, shape, self.thresholds, expect=self.expect, mock=mock)

    def perform(self, url: str, model: Optional[str], mock: Optional[dict] = None,
                out: Optional[Path] = None, labels: Optional[dict] = None):
        """Every repeat of the ramp against one server, into one run folder (RampDone)."""
        from llmbench.commands.ramp import perform
        first = self.plan(url, model, mock, out=out, labels=labels)
        found = first.common.target.model        # asked once, when --model was not given
        return perform(first, self.repeat,
                       lambda k: self.plan(url, found, mock, k, out=out, labels=labels))


def _ramp_options(
    target: TargetOpts = None,
    server: ServerOpts = None,
    start: Annotated[Optional[float], typer.Option(help="Users at the first step (default 2).", rich_help_panel=P_STEPS)] = None,
    step: Annotated[Optional[float], typer.Option(help="Users added per step (default 2).", rich_help_panel=P_STEPS)] = None,
    up_to: Annotated[Optional[float], typer.Option(help="Last step (default 40).", rich_help_panel=P_STEPS)] = None,
    users: Users = None,
    by: Annotated[str, typer.Option(help="users (closed loop) | rate (steps are requests/s, open loop).", rich_help_panel=P_STEPS)] = "users",
    ramp_in: Annotated[Optional[str], typer.Option(help="Time to bring a step's new users in (default 10s).", rich_help_panel=P_STEPS)] = None,
    hold: Annotated[Optional[str], typer.Option(help="Time each step holds its load (default 60s).", rich_help_panel=P_STEPS)] = None,
    think: Think = None,
    workers: Workers = "1",
    ray: RayOpt = None,
    repeat: Annotated[int, typer.Option(help="Run the whole ramp N times (fresh conversations, seed + k): users held gets an interval (min-max).", rich_help_panel=P_STEPS)] = 1,
    threshold: Threshold = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Run every step even after one fails.", rich_help_panel=P_GATES)] = False,
    generator_lag_limit: Annotated[str, typer.Option(help="Event-loop lag p99 or own send-delay p99 past which llmbench calls its own numbers untrustworthy (exit 4).", rich_help_panel=P_GATES)] = "10ms",
    expect_users: Annotated[Optional[float], typer.Option(help="Exit 1 if fewer users (or req/s) held.", rich_help_panel=P_GATES)] = None,
    workload: WorkloadOpts = group_defaults(
        prompt_tokens=None, output_tokens=None, turns=None, omit=("multi_turn", "sharegpt_output_len"),
        help={"prompt_tokens": "(default 64-256)", "output_tokens": "(default 128)",
              "turns": "(default 4)"}),
    request: RequestOpts = group_defaults(timeout_first_token=120.0),
    output: OutputOpts = None,
) -> _RampSetup:
    """The ramp's options (``ramp`` and ``sweep`` take them all), checked."""
    from llmbench.analysis.slo import DEFAULT_THRESHOLDS, parse_threshold

    if by not in ("users", "rate"):
        raise UsageError(f"--by {by!r}: choose users or rate")
    n_workers = _workers(workers)
    ray_address = _ray(ray)
    url = target.url
    d = DEMO if not url else SERVER
    if not url and users is None and start is None and step is None and up_to is None:
        users = DEMO["users"]
    steps = _steps(users, start, step, up_to, by)
    hold_s = opt.duration(hold or d["hold"], "--hold")
    ramp_in_s = opt.duration(ramp_in or d["ramp_in"], "--ramp-in")
    think_s = opt.parse_think(think or d["think"])
    if hold_s <= 0:
        raise UsageError("--hold must be above 0")
    opt.number(expect_users, "--expect-users", lo=0)
    opt.count(repeat, "--repeat", hi=1000)
    request.validate()
    server.validate()
    lag_limit_ms = opt.duration(generator_lag_limit, "--generator-lag-limit", zero_ok=False) * 1000
    thresholds = [parse_threshold(t) for t in (threshold or DEFAULT_THRESHOLDS)]
    # a rate step's arrivals come on the schedule whatever the think time: no user goes quiet
    if by == "users" and think_s[1] > 0 and hold_s < think_s[1]:
        typer.echo(f"warning: --hold {hold_s:g}s is shorter than the longest think time "
                   f"({think_s[1]:g}s): some users send nothing in a hold window", err=True)
    output.labels()
    workload.turns = workload.turns if workload.turns is not None else d["turns"]
    workload.prompt_tokens = workload.prompt_tokens or d["prompt_tokens"]
    workload.output_tokens = workload.output_tokens or d["output_tokens"]
    workload.validate()
    if workload.prefix_hit_ratio is not None:   # warm-up and verification live in run
        raise UsageError("--prefix-hit-ratio works with llmbench run only")
    return _RampSetup(target, server, workload, request, output, steps, by, ramp_in_s, hold_s,
                      think_s, thresholds, keep_going, lag_limit_ms, expect_users, repeat,
                      n_workers, ray_address)


def _with_options(spec):
    """A command that takes every option of ``spec`` (declared there once) besides its own:
    ``spec`` checks them and its result reaches the command as ``setup``. An option the command
    declares itself (same name) replaces the spec's, e.g. sweep's --url help."""
    spec_sig = inspect.signature(spec)
    spec_hints = typing.get_type_hints(spec, include_extras=True)

    def decorate(fn):
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
        own = {n: p.replace(annotation=hints.get(n, p.annotation))
               for n, p in sig.parameters.items() if n != "setup"}
        params = list(own.values()) + [
            p.replace(annotation=spec_hints.get(n, p.annotation), kind=p.KEYWORD_ONLY)
            for n, p in spec_sig.parameters.items() if n not in own]

        def wrapper(**kwargs):
            setup = spec(**{n: kwargs[n] for n in spec_sig.parameters})
            return fn(setup=setup, **{n: kwargs[n] for n in own})
        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        wrapper.__signature__ = inspect.Signature(
            [p.replace(kind=p.KEYWORD_ONLY) for p in params])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper
    return decorate


@app.command()
@_guard
@with_groups
@_with_options(_ramp_options)
def ramp(setup: _RampSetup) -> None:
    """Add users step by step until the thresholds break, and say why (no --url: a one-minute demo on the built-in mock)."""
    url = setup.target.url
    with _maybe_mock(url) as (url_, model_):
        done = setup.perform(url_, setup.target.model or model_,
                             mock=None if url else {"profile": "ollama"})
    raise typer.Exit(done.code)


# -- sweep ---------------------------------------------------------------------------------------
P_SWEEP = "Sweep"


def _sweep_ramp(setup: _RampSetup):
    """The ramp for one setting; a server the ramp cannot use (no model, wrong --model) ends
    that setting, not the sweep (the error line was printed already)."""
    def ramp_for(url: str, model: Optional[str], out: Path, labels: dict):
        from llmbench.commands.ramp import RampDone
        try:
            return setup.perform(url, model, out=out, labels=labels)
        except typer.Exit as exc:
            return RampDone(None, exc.exit_code, None)
    return ramp_for


def _sweep_config(setup: _RampSetup) -> dict:
    return {"by": setup.by, "steps": setup.steps, "ramp_in_s": setup.ramp_in_s,
            "hold_s": setup.hold_s, "think_s": list(setup.think_s),
            "thresholds": [t.text for t in setup.thresholds], "repeat": setup.repeat,
            "expect": setup.expect}


@app.command()
@_guard
@with_groups
@_with_options(_ramp_options)
def sweep(
    setup: _RampSetup,
    setting: Annotated[Optional[List[str]], typer.Option("--setting", metavar="NAME=V1,V2", help="A server setting and its values (repeatable: a grid). Set in the server's environment; {NAME} in --serve and --url is replaced.", rich_help_panel=P_SWEEP)] = None,
    serve: Annotated[Optional[str], typer.Option(metavar="CMD", help="Start this server per value (shell command, own process group), stop it after.", rich_help_panel=P_SWEEP)] = None,
    before: Annotated[Optional[str], typer.Option(metavar="CMD", help="Run this once per value instead (e.g. systemctl restart ollama), then wait for ready.", rich_help_panel=P_SWEEP)] = None,
    mock: Annotated[bool, typer.Option("--mock", help="Sweep the built-in mock: each NAME is a mock option (--parallel).", rich_help_panel=P_SWEEP)] = False,
    mock_options: Annotated[Optional[str], typer.Option(metavar="ARGS", help="--mock: more llmbench mock options, e.g. '--itl-ms 20'.", rich_help_panel=P_SWEEP)] = None,
    ready_timeout: Annotated[str, typer.Option(metavar="DURATION", help="Wait this long for a server to answer and load its model.", rich_help_panel=P_SWEEP)] = "5m",
    stop_grace: Annotated[str, typer.Option(metavar="DURATION", help="After SIGTERM, wait this long before SIGKILL.", rich_help_panel=P_SWEEP)] = "10s",
    target: TargetOpts = group_defaults(omit=("wait_ready",), help={"url": "{NAME} and {PORT} (a free port per value) are replaced."}),
) -> None:
    """Which server setting serves more users: a ramp per value, one page with the answer."""
    from llmbench.commands.sweep import SweepPlan, execute, parse_settings
    settings = parse_settings(setting or [])
    modes = [m for m, on in (("serve", serve is not None), ("before", before is not None),
                             ("mock", mock)) if on]
    if len(modes) != 1:
        raise UsageError("give one of --serve, --before or --mock: how each value reaches "
                         "the server")
    if mock_options is not None and not mock:
        raise UsageError("--mock-options go with --mock")
    if mock and setup.target.url:
        raise UsageError("--mock starts its own server: drop --url")
    if not mock and not setup.target.url:
        raise UsageError(f"--{modes[0]} needs --url: where the server answers, e.g. "
                         "http://127.0.0.1:11434/v1 ({NAME} and {PORT} are replaced)")
    import shlex
    try:
        extra = shlex.split(mock_options or "")
    except ValueError as exc:
        raise UsageError(f"--mock-options {mock_options!r}: {exc}")
    if mock:
        known = set(inspect.signature(globals()["mock"]).parameters)
        for name in settings:
            if name.replace("-", "_") not in known or name in ("host", "port"):
                raise UsageError(f"--setting {name}: not an option of llmbench mock; use one of "
                                 "its options, e.g. parallel, batch_slowdown, itl_ms")
    ready_s = opt.duration(ready_timeout, "--ready-timeout", zero_ok=False)
    grace_s = opt.duration(stop_grace, "--stop-grace")
    plan = SweepPlan(settings=settings, mode=modes[0], command=serve or before,
                     mock_options=extra, url=setup.target.url, model=setup.target.model,
                     api=setup.server.api, api_key=setup.server.api_key,
                     headers=setup.server.header, ready_timeout_s=ready_s, stop_grace_s=grace_s,
                     out=setup.output.out, labels=setup.output.labels(), repeat=setup.repeat,
                     expect=setup.expect, unit="users" if setup.by == "users" else "req/s",
                     ramp=_sweep_ramp(setup), config=_sweep_config(setup),
                     target_options=setup.server.target_options())
    raise typer.Exit(execute(plan))


# -- probe ---------------------------------------------------------------------------------------
@app.command()
@_guard
@with_groups
def probe(
    router: Annotated[str, typer.Option(help="The router's URL as clients use it, e.g. localhost:12434/v1.", rich_help_panel=P_TARGET)],
    direct: Annotated[str, typer.Option(help="A backend's own URL, e.g. localhost:11434/v1.", rich_help_panel=P_TARGET)],
    target: TargetOpts = group_defaults(model=..., omit=("url", "wait_ready"),
                                        help={"model": "Through the router."}),
    direct_model: Annotated[Optional[str], typer.Option(help="Model name at the backend, if it differs.", rich_help_panel=P_TARGET)] = None,
    server: ServerOpts = None,
    users: Users = "1,4,16,64",
    slice_s: Annotated[str, typer.Option("--slice", help="Length of one slice on one path.", rich_help_panel=P_LOAD)] = "5s",
    rounds: Annotated[int, typer.Option(help="Slices per path per step (alternating order).", rich_help_panel=P_LOAD)] = 3,
    think: Think = "0",
    workers: Workers = "1",
    ray: RayOpt = None,
    workload: WorkloadOpts = group_defaults(prompt_tokens="128", output_tokens="64", turns=3,
                                            omit=("multi_turn", "sharegpt_output_len")),
    request: RequestOpts = None,
    output: OutputOpts = None,
) -> None:
    """Router overhead versus compute: the same workload through a router and straight to a backend, interleaved in time."""
    from llmbench.commands.common import Common
    from llmbench.commands.probe import ProbePlan, execute
    from llmbench.load.shapes import RouterAB
    from llmbench.client.target import make_target

    steps = _steps(users, None, None, None, "users")
    n_workers = _workers(workers)
    ray_address = _ray(ray)
    if rounds < 1:
        raise UsageError("--rounds must be at least 1")
    slice_seconds = opt.duration(slice_s, "--slice")
    if slice_seconds <= 0:
        raise UsageError("--slice must be above 0")
    think_s = opt.parse_think(think or "0")
    request.validate()
    workload.validate()
    if workload.prefix_hit_ratio is not None:   # warm-up and verification live in run
        raise UsageError("--prefix-hit-ratio works with llmbench run only")
    server.validate()
    output.labels()
    model = target.model
    way = server.target_options()
    rt = make_target(router, model, server.api, server.api_key, server.header, **way)
    dt = make_target(direct, direct_model or model, server.api, server.api_key, server.header,
                     **way)
    # the workload is counted against the backend (its /tokenize), sent through both
    common = _common(dt, server, workload, request, output, 4000, multi_turn=True)
    common = Common(**{**common.__dict__, "target": rt, "workers": n_workers,
                       "tokenizer": workload.tokenizer})
    common = _with_ray(common, ray_address)
    shape = RouterAB(common.workload.conversations, [int(s) for s in steps],
                     slice_s=slice_seconds, rounds=rounds, think_s=think_s, seed=workload.seed)
    plan = ProbePlan(common, dt, shape)
    code = execute(plan)
    raise typer.Exit(code)


# -- mock ----------------------------------------------------------------------------------------
@app.command()
@_guard
def mock(
    ttft_ms: Annotated[Optional[float], typer.Option(help="Time to first token when idle (ms).", rich_help_panel="Timing")] = None,
    itl_ms: Annotated[Optional[float], typer.Option(help="Gap between tokens (ms).", rich_help_panel="Timing")] = None,
    tokens_per_s: Annotated[Optional[float], typer.Option(help="Alternative to --itl-ms.", rich_help_panel="Timing")] = None,
    tokens: Annotated[Optional[int], typer.Option(help="Reply length when the request sets none.", rich_help_panel="Timing")] = None,
    natural_tokens: Annotated[Optional[int], typer.Option(help="Stop early here (EOS) unless ignore_eos.", rich_help_panel="Timing")] = None,
    chunk_tokens: Annotated[Optional[int], typer.Option(help="Tokens per streamed event.", rich_help_panel="Timing")] = None,
    jitter: Annotated[Optional[float], typer.Option(help="+- fraction of randomness on each delay.", rich_help_panel="Timing")] = None,
    models: Annotated[Optional[str], typer.Option(help="Model names served, comma-separated.", rich_help_panel="Server")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed for jitter and faults.", rich_help_panel="Timing")] = None,
    parallel: Annotated[Optional[int], typer.Option(help="Slots served at once (0 = unlimited).", rich_help_panel="Capacity")] = None,
    max_queue: Annotated[Optional[int], typer.Option(help="Waiting requests before rejecting (0 = unlimited).", rich_help_panel="Capacity")] = None,
    prefill_ms_per_token: Annotated[Optional[float], typer.Option(metavar="MS", help="Prefill time per uncached prompt token.", rich_help_panel="Prefill")] = None,
    prefix_cache: Annotated[Optional[bool], typer.Option("--prefix-cache/--no-prefix-cache", help="Block-hashed LRU prefix cache.", rich_help_panel="Prefix cache")] = None,
    cache_blocks: Annotated[Optional[int], typer.Option(help="Prefix cache capacity in 16-token blocks.", rich_help_panel="Prefix cache")] = None,
    batch_slowdown: Annotated[Optional[float], typer.Option(help="k in step = itl * (1 + k * (running - 1)).", rich_help_panel="Capacity")] = None,
    fault_500: Annotated[Optional[float], typer.Option(help="Probability of HTTP 500.", rich_help_panel="Faults")] = None,
    fault_429: Annotated[Optional[float], typer.Option(help="Probability of HTTP 429.", rich_help_panel="Faults")] = None,
    fault_cut: Annotated[Optional[float], typer.Option(help="Probability of a stream cut part-way.", rich_help_panel="Faults")] = None,
    fault_malformed: Annotated[Optional[float], typer.Option(help="Probability of a malformed event.", rich_help_panel="Faults")] = None,
    fault_error_event: Annotated[Optional[float], typer.Option(help="Probability of an error event in the stream.", rich_help_panel="Faults")] = None,
    fault_stall: Annotated[Optional[float], typer.Option(help="Probability of a mid-stream stall.", rich_help_panel="Faults")] = None,
    stall_ms: Annotated[Optional[float], typer.Option(help="Length of a stall.", rich_help_panel="Faults")] = None,
    fault_slow_first_byte: Annotated[Optional[float], typer.Option(help="Probability of a slow first byte.", rich_help_panel="Faults")] = None,
    slow_first_byte_ms: Annotated[Optional[float], typer.Option(help="Length of a slow first byte.", rich_help_panel="Faults")] = None,
    profile: Annotated[Optional[str], typer.Option(help="ollama | vllm | llamacpp presets, or a profile FILE (.json/.toml, from --save-profile).", rich_help_panel="Timing")] = None,
    replicas: Annotated[int, typer.Option(help="Independent servers on consecutive ports.", rich_help_panel="Server")] = 1,
    workers: Annotated[int, typer.Option(metavar="N", help="Worker processes sharing each port (SO_REUSEPORT, Linux), for more streams than one process serves. Each is a whole server: N replicas behind one port, each with its own --parallel slots, queue and caches.", rich_help_panel="Server")] = 1,
    host: Annotated[str, typer.Option(help="Address to bind.", rich_help_panel="Server")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="First port (0 = any free).", rich_help_panel="Server")] = 8000,
    record: Annotated[Optional[Path], typer.Option(help="Log every request's real event send times here.", rich_help_panel="Server")] = None,
    record_prompts: Annotated[bool, typer.Option("--record-prompts", help="Also log the request messages.", rich_help_panel="Server")] = False,
    like: Annotated[Optional[Path], typer.Option(help="Fit the mock to the real server of this run folder (a server twin).", rich_help_panel="Twin")] = None,
    save_profile: Annotated[Optional[Path], typer.Option(help="With --like: write the fitted profile (JSON) here and exit.", rich_help_panel="Twin")] = None,
    kv_capacity_tokens: Annotated[Optional[int], typer.Option(help="KV cache size in tokens: admission by blocks, preemption by recompute when full (0 = unlimited).", rich_help_panel="Capacity")] = None,
    block_tokens: Annotated[Optional[int], typer.Option(help="Tokens per KV / prefix-cache block.", rich_help_panel="Capacity")] = None,
    decode_ms_curve: Annotated[Optional[str], typer.Option(metavar="MS,MS,...", help="Decode step ms with 1,2,... sequences running, e.g. 12.6,42,58,65.", rich_help_panel="Timing")] = None,
    prefill_in_step: Annotated[Optional[bool], typer.Option("--prefill-in-step/--prefill-apart", help="Prefill inside the shared steps, stalling running decodes (or apart).", rich_help_panel="Prefill")] = None,
    step_token_budget: Annotated[Optional[int], typer.Option(metavar="N", help="Tokens computed per step (chunked prefill; 0 = no limit).", rich_help_panel="Prefill")] = None,
    prefill_last_step: Annotated[Optional[bool], typer.Option("--prefill-last-step", help="With --prefill-in-step: the last prompt tokens in a step of their own, as llama.cpp does for SWA models (fitted by --like).", rich_help_panel="Prefill")] = None,
    reasoning_tokens: Annotated[Optional[int], typer.Option(metavar="N", help="A reasoning model: N reasoning tokens before each answer, in the API's own field (reasoning_content; reasoning for the ollama profile's /v1; thinking on /api/chat).", rich_help_panel="Timing")] = None,
) -> None:
    """A mock LLM server that behaves like a real one under load (OpenAI and Ollama routes)."""
    import asyncio
    from mock_server import PROFILES, make_config
    from mock_server.fit import ProfileError, describe, fit_run, load_profile
    from mock_server.fit import save_profile as write_profile
    from mock_server.server import serve_forever

    for flag, v in (("--ttft-ms", ttft_ms), ("--itl-ms", itl_ms), ("--jitter", jitter),
                    ("--prefill-ms-per-token", prefill_ms_per_token),
                    ("--batch-slowdown", batch_slowdown), ("--stall-ms", stall_ms),
                    ("--slow-first-byte-ms", slow_first_byte_ms)):
        opt.number(v, flag, lo=0)
    for flag, v in (("--fault-500", fault_500), ("--fault-429", fault_429),
                    ("--fault-cut", fault_cut), ("--fault-malformed", fault_malformed),
                    ("--fault-error-event", fault_error_event), ("--fault-stall", fault_stall),
                    ("--fault-slow-first-byte", fault_slow_first_byte)):
        opt.number(v, flag, lo=0, hi=1)
    for flag, n, lo in (("--tokens", tokens, 1), ("--natural-tokens", natural_tokens, 1),
                        ("--chunk-tokens", chunk_tokens, 1), ("--parallel", parallel, 0),
                        ("--max-queue", max_queue, 0), ("--cache-blocks", cache_blocks, 0),
                        ("--reasoning-tokens", reasoning_tokens, 0)):
        opt.count(n, flag, lo=lo)
    if replicas < 1:
        raise UsageError("--replicas must be at least 1")
    opt.count(workers, "--workers", lo=1)
    if workers > 1:
        from mock_server.server import REUSEPORT
        if not REUSEPORT:
            raise UsageError("--workers needs SO_REUSEPORT as Linux has it; use --workers 1 "
                             "or --replicas N (one port each)")
    opt.count(port, "--port", lo=0, hi=65536 - replicas)
    if tokens_per_s is not None:
        if not tokens_per_s > 0 or not math.isfinite(tokens_per_s):
            raise UsageError("--tokens-per-s must be a finite number above 0")
        itl_ms = 1000.0 / tokens_per_s
    if replicas < 1:
        raise UsageError("--replicas must be at least 1")
    if save_profile is not None and like is None:
        raise UsageError("--save-profile needs --like RUN_DIR (the run to fit)")
    learned: dict = {}
    try:
        if profile and profile not in PROFILES and (Path(profile).suffix.lower() in (".json", ".toml")
                                                          or Path(profile).exists()):
            learned.update(load_profile(Path(profile)))
            profile = None
        if like is not None:
            fitted = fit_run(like)
            typer.echo(describe(fitted), err=True)
            if save_profile is not None:
                write_profile(fitted, save_profile)
                typer.echo(str(save_profile))
                return
            learned.update(fitted.mock)
    except ProfileError as exc:
        raise UsageError(f"{exc} (--profile/--like)")
    try:
        cfg = make_config(profile, ttft_ms=ttft_ms, itl_ms=itl_ms, tokens=tokens,
                          natural_tokens=natural_tokens, chunk_tokens=chunk_tokens, jitter=jitter,
                          models=models, seed=seed, parallel=parallel, max_queue=max_queue,
                          prefill_ms_per_token=prefill_ms_per_token, prefix_cache=prefix_cache,
                          cache_blocks=cache_blocks, batch_slowdown=batch_slowdown,
                          fault_500=fault_500, fault_429=fault_429, fault_cut=fault_cut,
                          fault_malformed=fault_malformed, fault_error_event=fault_error_event,
                          fault_stall=fault_stall, stall_ms=stall_ms,
                          fault_slow_first_byte=fault_slow_first_byte,
                          slow_first_byte_ms=slow_first_byte_ms, _learned=learned,
                          kv_capacity_tokens=kv_capacity_tokens, block_tokens=block_tokens,
                          decode_ms_curve=decode_ms_curve, prefill_in_step=prefill_in_step,
                          step_token_budget=step_token_budget, prefill_last_step=prefill_last_step,
                          reasoning_tokens=reasoning_tokens)
    except ValueError as exc:
        raise UsageError(str(exc))
    total = sum(getattr(cfg, f) for f in ("fault_500", "fault_429", "fault_cut", "fault_malformed",
                                          "fault_error_event", "fault_stall", "fault_slow_first_byte"))
    if total > 1:
        raise UsageError("fault probabilities add up to more than 1")
    if workers > 1 and (cfg.parallel or cfg.max_queue or cfg.kv_capacity_tokens or
                        cfg.batch_slowdown or cfg.decode_ms_curve or cfg.prefix_cache):
        typer.echo(f"note: --workers {workers}: each worker is a whole server with its own "
                   "slots, queue, KV and prefix cache, and the kernel spreads connections over "
                   f"them: {workers} replicas behind one port, not one bigger server", err=True)
    from mock_server.server import WorkerFailed
    try:
        asyncio.run(serve_forever(cfg, replicas, host, port, str(record) if record else None,
                                  record_prompts, announce=False, workers=workers))
    except KeyboardInterrupt:
        pass
    except WorkerFailed as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port")


# -- report, compare, runs -----------------------------------------------------------------------
@app.command()
@_guard
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run or sweep folder (results/<date>-<kind>...).")],
    format: Annotated[str, typer.Option("--format", help="html | md | csv")] = "html",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Where to write (html default: RUN_DIR/report.html; md/csv: stdout).")] = None,
) -> None:
    """Write a run's report: one self-contained HTML file, markdown for a PR, or CSV."""
    if format not in ("html", "md", "csv"):
        raise UsageError(f"--format {format!r}: choose html, md or csv")
    if (run_dir / "sweep.json").is_file():
        if format != "html":
            raise UsageError(f"{run_dir} is a sweep: its report is html; each ramp folder in it "
                             "has md and csv")
        from llmbench.report.sweep_html import write as write_sweep
        typer.echo(str(write_sweep(run_dir, output)))
        return
    from llmbench.analysis.recover import REBUILT_NOTE, load_checked
    run = load_checked(run_dir)   # says so if the folder or its schema is wrong; rebuilds a killed run
    if run.get("note") == REBUILT_NOTE:
        typer.echo(f"note: {run_dir}: summary {REBUILT_NOTE}", err=True)
    elif run.get("status") == "partial":
        typer.echo(f"note: {run_dir} is a partial run (interrupted); reporting what finished", err=True)
    if format == "html":
        from llmbench.report.html import write
        typer.echo(str(write(run_dir, output)))
        return
    from llmbench.report.text import to_csv, to_markdown
    text = to_markdown(run_dir) if format == "md" else to_csv(run_dir)
    if output:
        output.write_text(text, encoding="utf-8")
        typer.echo(str(output))
    else:
        typer.echo(text, nl=False)


@app.command()
@_guard
def compare(
    run_dirs: Annotated[List[Path], typer.Argument(help="Two or more run folders; the first is the baseline.")],
    max_regression: Annotated[Optional[str], typer.Option(help="Exit 1 when a metric got worse by more than this, e.g. 10%.")] = None,
    metric: Annotated[Optional[List[str]], typer.Option("--metric", metavar="NAME", help="held, ttft.p50, ttft.p95, ttft.p99, itl.p50, itl.p95, e2el.p50, e2el.p95, output_throughput (repeatable).")] = None,
    html_out: Annotated[Optional[Path], typer.Option("--html", help="Where to write the HTML comparison (default: compare.html in the last run's folder).")] = None,
    png: Annotated[Optional[Path], typer.Option(help="Also write the overlay chart as a PNG.")] = None,
) -> None:
    """Runs side by side (e.g. OLLAMA_NUM_PARALLEL=1 vs 4), with a regression gate for CI."""
    from llmbench.analysis.compare import DEFAULT_METRICS, CompareError, compare as do_compare, load_runs, parse_max_regression
    from llmbench.report import compare_html
    try:
        limit = None if max_regression is None else parse_max_regression(max_regression)
    except CompareError as exc:
        raise UsageError(str(exc))
    from llmbench.analysis.recover import load_checked
    for d in run_dirs:
        load_checked(d, "compare")    # a failed or killed run: one line, or a rebuilt summary
    try:
        runs = load_runs(run_dirs)
        result = do_compare(runs, tuple(metric or DEFAULT_METRICS), limit)
    except CompareError as exc:
        raise UsageError(str(exc))
    typer.echo(compare_html.console_text(result))
    # next to the candidate (the last run), not into whatever folder the shell is in
    path = compare_html.write(result, runs, html_out or Path(run_dirs[-1]) / "compare.html")
    typer.echo(f"HTML: {path}")
    if png is not None:
        from llmbench.report.charts import compare_png
        compare_png([(r.name, r.steps) for r in runs], "users", str(png))
        typer.echo(f"PNG: {png}")
    if result["regressions"]:
        raise typer.Exit(1)


@app.command()
@_guard
@with_groups
def runs(output: OutputOpts = group_defaults(omit=("label", "progress"))) -> None:
    """List run folders: date, command, labels, headline result."""
    out = output.out
    from llmbench.results.folder import list_runs
    rows = list_runs(out)
    if not rows:
        typer.echo(f"no runs under {out}")
        return
    def show(r: dict, indent: str = "") -> None:
        if "error" in r:
            typer.echo(f"{indent}{r['folder']}  (unreadable: {r['error']})")
            return
        labels = " ".join(f"{k}={v}" for k, v in r["labels"].items())
        status = "" if r["status"] == "complete" else f" [{r['status']}]"
        pad = indent + "    "
        head = f"{indent}{r['date']}  {r['kind']:<5} {r['folder']}{status}"
        if indent:                      # a ramp inside a sweep: its setting, not its command
            typer.echo(f"{head}\n{pad}setting: {r.get('setting')}\n{pad}{r['headline']}")
            return
        typer.echo(f"{head}\n{pad}{r['command']}" + (f"\n{pad}labels: {labels}" if labels else "")
                   + f"\n{pad}{r['headline']}")
    for r in rows:
        show(r)
        for sub in r.get("ramps") or []:
            show(sub, "    ")


# -- datasets inspect ----------------------------------------------------------------------------
@datasets_app.command("inspect")
@_guard
@with_groups
def datasets_inspect(
    spec: Annotated[str, typer.Argument(help="synthetic | random | words | FILE | hf:NAME")],
    count: Annotated[int, typer.Option(help="Conversations to sample (synthetic/random/ShareGPT).")] = 1000,
    workload: WorkloadOpts = group_defaults(omit=("dataset", "sharegpt_output_len")),
) -> None:
    """Counts, length distributions and the fingerprint of a workload."""
    import numpy as np
    workload.dataset = spec
    wl, tok = workload.build(count)
    convs = wl.conversations
    p = np.array([t.prompt_tokens or 0 for c in convs for t in c.turns], dtype=float)
    o = np.array([t.max_tokens for c in convs for t in c.turns if t.max_tokens], dtype=float)
    n_turns = np.array([len(c.turns) for c in convs], dtype=float)

    def dist(a: "np.ndarray") -> str:
        if not len(a):
            return "-"
        return (f"min {a.min():.0f}  p50 {np.percentile(a, 50):.0f}  mean {a.mean():.1f}  "
                f"p90 {np.percentile(a, 90):.0f}  max {a.max():.0f}")
    typer.echo(f"source:         {wl.source}")
    typer.echo(f"tokenizer:      {wl.tokenizer} ({wl.tokenizer_info.get('counting')})")
    typer.echo(f"conversations:  {len(convs)}")
    typer.echo(f"user turns:     {int(n_turns.sum())}  ({dist(n_turns)} per conversation)")
    typer.echo(f"prompt tokens:  {dist(p)}")
    typer.echo(f"output tokens:  {dist(o)}")
    typer.echo(f"fingerprint:    {wl.fingerprint}")
    for w in wl.warnings:
        typer.echo(f"note: {w}")


def _click_exceptions():
    """typer 0.2x vendors click as typer._click; earlier versions use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:                     # pragma: no cover - the installed typer decides
        from click import exceptions
    return exceptions


def main() -> None:
    cx = _click_exceptions()
    abort = getattr(cx, "Abort", None) or getattr(typer, "Abort", KeyboardInterrupt)
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
        print(f"error: {text} (see '{where} --help')", file=sys.stderr)
        _exit(exc.exit_code)
    except cx.ClickException as exc:
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        _exit(exc.exit_code)
    except SystemExit as exc:
        _exit(exc.code)
    _exit(rv if isinstance(rv, int) else 0)


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


