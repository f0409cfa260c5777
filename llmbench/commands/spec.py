"""Options -> checked spec -> plan, for run, ramp, sweep and probe, with no Typer in it.

Each command's options are a ``Layout`` (option groups in the order of its help). The command
line (llmbench/cli/app.py) and the Python API (llmbench/api.py) both build the groups from it
and call the functions here, so a value is checked once, the same way, with the same one-line
message: a bad value is a ``UsageError``, a server that cannot be used a ``ServerUnreachable``
(or another ``LlmbenchError`` with its exit code). Nothing here exits the process.
"""

import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import Annotated, Any, List, Optional

from llmbench.commands import options as opt
from llmbench.commands.options import (P_GATES, P_LOAD, P_OUTPUT, P_STEPS, P_TARGET, P_VLLM,
                                       Layout, OptionGroup, OutputOpts, RequestOpts, ServerOpts,
                                       TargetOpts, TelemetryOpts, UsageError, WorkloadOpts, _opt, group_defaults)
from llmbench.errors import EXIT_USAGE, EXIT_WRITE, LlmbenchError, failure


def say(message: str) -> None:
    """A note for the user, on stderr (stdout is for results)."""
    print(message, file=sys.stderr, flush=True)


# -- options several commands share but that belong to no group: declared once here -----------
THINK = _opt("Pause between a user's turns, e.g. 5s-10s; 0 allowed.", P_LOAD)
THRESHOLD = _opt("Gate, e.g. 'ttft.p95_all<=2s' (repeatable).", P_GATES, "--threshold", metavar="EXPR")
USERS = _opt("Steps of users, e.g. 1,2,4,8.", P_STEPS)
WORKERS = _opt("Worker processes sharing the load (auto: from the streams and cores).", P_LOAD, metavar="N|auto")
RAY = _opt("Run the workers as Ray actors over a cluster's nodes (auto: RAY_ADDRESS, else local Ray).", P_LOAD, "--ray", metavar="auto|ADDR")

# more streams than any one machine (or cluster) opens: a typo, not a plan. Refused, so that
# --users 1e308 or --concurrency 10**12 is one line, not a run that allocates forever.
MAX_LOAD = 1_000_000
DEMO_RUN_S = 60.0        # `llmbench run` with no --url and no size: a one-minute demo
# ramp with no --url: a short demo against the built-in mock, about a minute, and it breaks.
DEMO = {"users": "2,4,6,8,10,12", "hold": "10s", "ramp_in": "2s", "think": "1s-3s",
        "output_tokens": "64", "prompt_tokens": "32-96", "turns": 3}
SERVER = {"hold": "60s", "ramp_in": "10s", "think": "5s-10s", "output_tokens": "128",
          "prompt_tokens": "64-256", "turns": 4}


# -- the commands' own options ---------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class RunLoadOpts(OptionGroup):
    concurrency: Annotated[Optional[int], _opt("Closed loop: N requests in flight.", P_LOAD)] = None
    rate: Annotated[Optional[str], _opt("Open loop: requests per second (or inf).", P_LOAD)] = None
    burstiness: Annotated[float, _opt("Gamma shape of the gaps: 1 = Poisson, <1 burstier.", P_LOAD)] = 1.0
    arrival: Annotated[str, _opt("gamma | poisson | constant", P_LOAD)] = "gamma"
    max_concurrency: Annotated[Optional[int], _opt("Open loop: cap on requests in flight.", P_LOAD)] = None
    requests: Annotated[Optional[int], _opt("How many requests (default 200 unless --duration; with no --url, 60 s of requests).", P_LOAD)] = None
    duration: Annotated[Optional[str], _opt("Stop starting requests after this long, e.g. 60s.", P_LOAD)] = None
    warmup: Annotated[int, _opt("Requests sent first and not counted.", P_LOAD)] = 0
    think: Annotated[Optional[str], THINK] = "0"
    workers: Annotated[str, WORKERS] = "1"
    ray: Annotated[Optional[str], RAY] = None
    trace: Annotated[Optional[Path], _opt("Replay a trace on its own timestamps: Mooncake JSONL, Azure CSV, or JSONL with timestamp (ms) and lengths or messages.", P_LOAD, metavar="FILE")] = None
    trace_speed: Annotated[float, _opt("--trace: 2 replays twice as fast (gaps halved).", P_LOAD)] = 1.0
    trace_window: Annotated[Optional[str], _opt("--trace: only this part, from its first request, e.g. 10m-20m.", P_LOAD, metavar="START-END")] = None


@dataclasses.dataclass(eq=False)
class VllmOpts(OptionGroup):
    save_result: Annotated[bool, _opt("Also write vLLM's result JSON (vllm bench serve's keys and types).", P_VLLM, "--save-result")] = False
    save_detailed: Annotated[bool, _opt("Add per-request arrays: ttfts, itls, input_lens, output_lens, start_times, generated_texts, errors.", P_VLLM, "--save-detailed")] = False
    append_result: Annotated[bool, _opt("Append the result as one more line of the file.", P_VLLM, "--append-result")] = False
    result_dir: Annotated[Optional[Path], _opt("Folder for the file (default: the current one).", P_VLLM, metavar="DIR")] = None
    result_filename: Annotated[Optional[str], _opt("File name (default: vLLM's pattern of label, rate, concurrency, model and date).", P_VLLM, metavar="NAME")] = None
    metadata: Annotated[Optional[List[str]], _opt("Stored in the file (repeatable).", P_VLLM, "--metadata", metavar="K=V")] = None


@dataclasses.dataclass(eq=False)
class PrintOpts(OptionGroup):
    percentile_metrics: Annotated[str, _opt("Metrics to print percentiles for (ttft,tpot,itl,e2el).", P_OUTPUT)] = "ttft,tpot,itl"
    metric_percentiles: Annotated[str, _opt("Percentiles to print, e.g. 50,99.", P_OUTPUT)] = "99"
    goodput: Annotated[Optional[List[str]], _opt("vLLM's goodput SLO, e.g. ttft:500 (repeatable).", P_OUTPUT, metavar="KEY:MS")] = None


@dataclasses.dataclass(eq=False)
class GateOpts(OptionGroup):
    threshold: Annotated[Optional[List[str]], THRESHOLD] = None


@dataclasses.dataclass(eq=False)
class RampOpts(OptionGroup):
    start: Annotated[Optional[float], _opt("Users at the first step (default 2).", P_STEPS)] = None
    step: Annotated[Optional[float], _opt("Users added per step (default 2).", P_STEPS)] = None
    up_to: Annotated[Optional[float], _opt("Last step (default 40).", P_STEPS)] = None
    users: Annotated[Optional[str], USERS] = None
    by: Annotated[str, _opt("users (closed loop) | rate (steps are requests/s, open loop).", P_STEPS)] = "users"
    ramp_in: Annotated[Optional[str], _opt("Time to bring a step's new users in (default 10s).", P_STEPS)] = None
    hold: Annotated[Optional[str], _opt("Time each step holds its load (default 60s).", P_STEPS)] = None
    think: Annotated[Optional[str], THINK] = None
    workers: Annotated[str, WORKERS] = "1"
    ray: Annotated[Optional[str], RAY] = None
    repeat: Annotated[int, _opt("Run the whole ramp N times (fresh conversations, seed + k): users held gets an interval (min-max).", P_STEPS)] = 1
    threshold: Annotated[Optional[List[str]], THRESHOLD] = None
    keep_going: Annotated[bool, _opt("Run every step even after one fails.", P_GATES, "--keep-going")] = False
    generator_lag_limit: Annotated[str, _opt("Event-loop lag p99 or own send-delay p99 past which llmbench calls its own numbers untrustworthy (exit 4).", P_GATES)] = "10ms"
    expect_users: Annotated[Optional[float], _opt("Exit 1 if fewer users (or req/s) held.", P_GATES)] = None


P_SWEEP = "Sweep"


@dataclasses.dataclass(eq=False)
class SweepOpts(OptionGroup):
    setting: Annotated[Optional[List[str]], _opt("A server setting and its values (repeatable: a grid). Set in the server's environment; {NAME} in --serve and --url is replaced.", P_SWEEP, "--setting", metavar="NAME=V1,V2")] = None
    serve: Annotated[Optional[str], _opt("Start this server per value (shell command, own process group), stop it after.", P_SWEEP, metavar="CMD")] = None
    before: Annotated[Optional[str], _opt("Run this once per value instead (e.g. systemctl restart ollama), then wait for ready.", P_SWEEP, metavar="CMD")] = None
    mock: Annotated[bool, _opt("Sweep the built-in mock: each NAME is a mock option (--parallel).", P_SWEEP, "--mock")] = False
    mock_options: Annotated[Optional[str], _opt("--mock: more llmbench mock options, e.g. '--itl-ms 20'.", P_SWEEP, metavar="ARGS")] = None
    ready_timeout: Annotated[str, _opt("Wait this long for a server to answer and load its model.", P_SWEEP, metavar="DURATION")] = "5m"
    stop_grace: Annotated[str, _opt("After SIGTERM, wait this long before SIGKILL.", P_SWEEP, metavar="DURATION")] = "10s"


@dataclasses.dataclass(eq=False)
class ProbeEnds(OptionGroup):
    router: Annotated[str, _opt("The router's URL as clients use it, e.g. localhost:12434/v1.", P_TARGET)] = ...  # type: ignore[assignment]
    direct: Annotated[str, _opt("A backend's own URL, e.g. localhost:11434/v1.", P_TARGET)] = ...  # type: ignore[assignment]


@dataclasses.dataclass(eq=False)
class ProbeDirect(OptionGroup):
    direct_model: Annotated[Optional[str], _opt("Model name at the backend, if it differs.", P_TARGET)] = None


@dataclasses.dataclass(eq=False)
class ProbeLoadOpts(OptionGroup):
    users: Annotated[Optional[str], USERS] = "1,4,16,64"
    slice_s: Annotated[str, _opt("Length of one slice on one path.", P_LOAD, "--slice")] = "5s"
    rounds: Annotated[int, _opt("Slices per path per step (alternating order).", P_LOAD)] = 3
    think: Annotated[Optional[str], THINK] = "0"
    workers: Annotated[str, WORKERS] = "1"
    ray: Annotated[Optional[str], RAY] = None


_RAMP_WORKLOAD = group_defaults(
    prompt_tokens=None, output_tokens=None, turns=None, omit=("multi_turn", "sharegpt_output_len"),
    help={"prompt_tokens": "(default 64-256)", "output_tokens": "(default 128)",
          "turns": "(default 4)"})
_RAMP_REQUEST = group_defaults(timeout_first_token=120.0)

RUN = Layout((("target", TargetOpts, None), ("server", ServerOpts, None),
              ("telemetry", TelemetryOpts, None), ("load", RunLoadOpts, None),
              ("workload", WorkloadOpts, None),
              ("request", RequestOpts, None), ("vllm", VllmOpts, None),
              ("report", PrintOpts, None), ("output", OutputOpts, None),
              ("gates", GateOpts, None)))
RAMP = Layout((("target", TargetOpts, None), ("server", ServerOpts, None),
               ("telemetry", TelemetryOpts, None), ("ramp", RampOpts, None),
               ("workload", WorkloadOpts, _RAMP_WORKLOAD),
               ("request", RequestOpts, _RAMP_REQUEST), ("output", OutputOpts, None)))
SWEEP = Layout((("sweep", SweepOpts, None),
                ("target", TargetOpts, group_defaults(omit=("wait_ready",), help={
                    "url": "{NAME} and {PORT} (a free port per value) are replaced."})),
                ("server", ServerOpts, None), ("telemetry", TelemetryOpts, None),
                ("ramp", RampOpts, None), ("workload", WorkloadOpts, _RAMP_WORKLOAD),
                ("request", RequestOpts, _RAMP_REQUEST), ("output", OutputOpts, None)))
PROBE = Layout((("ends", ProbeEnds, None),
                ("target", TargetOpts, group_defaults(model=..., omit=("url", "wait_ready"),
                                                      help={"model": "Through the router."})),
                ("direct", ProbeDirect, None), ("server", ServerOpts, None),
                ("telemetry", TelemetryOpts, None), ("load", ProbeLoadOpts, None),
                ("workload", WorkloadOpts, group_defaults(
                    prompt_tokens="128", output_tokens="64", turns=3,
                    omit=("multi_turn", "sharegpt_output_len"))),
                ("request", RequestOpts, None), ("output", OutputOpts, None)))
LAYOUTS = {"run": RUN, "ramp": RAMP, "sweep": SWEEP, "probe": PROBE}


# -- errors ------------------------------------------------------------------------------------
# Our input errors, by module: looked up only in modules already imported (an error class
# whose module was never imported cannot have been raised), so the CLI does not import numpy
# (through slo) just to print help or reject a flag.
_INPUT_ERRORS = {"llmbench.results.jsonfile": ("RunFolderError",), "llmbench.analysis.slo": ("ThresholdError",),
                 "llmbench.client.target": ("TargetError",), "llmbench.client.netconfig": ("NetError",),
                 "llmbench.workload.files": ("DatasetError",),
                 "llmbench.workload.tokenizer": ("TokenizerError",)}


def _input_errors() -> tuple[type, ...]:
    out = []
    for module, names in _INPUT_ERRORS.items():
        mod = sys.modules.get(module)
        out += [getattr(mod, n) for n in names if mod is not None and hasattr(mod, n)]
    return tuple(out)


def translate(exc: BaseException) -> LlmbenchError | None:
    """Our own input errors (and a path that cannot be used) as the LlmbenchError they are,
    with the line the command line prints; None for anything else (a bug: let it show)."""
    if isinstance(exc, LlmbenchError):
        return exc
    if isinstance(exc, _input_errors()):
        return UsageError(str(exc))
    if isinstance(exc, OSError) and exc.filename is not None:
        from llmbench.results.folder import is_write_error, write_error_line
        if is_write_error(exc):
            # the disk, not the path: full, a file over its size limit, read-only
            return failure(write_error_line(exc), EXIT_WRITE)
        # a path the user gave (--out, --output, --html, --png, a dataset) is not usable
        return UsageError(f"{exc.filename}: {exc.strerror}; check the path you gave")
    return None


# -- pieces every command uses --------------------------------------------------------------
def check_workers(value: str) -> int | str:
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


def check_ray(value: str | None) -> str | None:
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


def with_ray(common, address: str | None):
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
        raise failure(str(exc), exc.exit_code)
    say(f"Ray: {cluster.nodes} node(s), {cluster.cpus:g} CPUs at {cluster.connected_to}"
        + (" (a local instance started for this run)" if cluster.started_local else ""))
    return dataclasses.replace(common, ray=cluster)


def make_target(t: TargetOpts, s: ServerOpts, url: str, model: str | None):
    """The target; waits for a starting server (--wait-ready) and, without --model, asks the
    server for the one model it serves."""
    from llmbench.servers.discover import DiscoverError, pick_model, wait_ready as wait
    from llmbench.client.target import make_target as make
    probe = make(url, model or "?", s.api, s.api_key, s.header, **s.target_options())
    try:
        wait_s = t.wait_ready_s()
        if wait_s:
            wait(probe, wait_s)
        if model:
            return probe
        name = pick_model(probe)
    except DiscoverError as exc:
        raise failure(str(exc), exc.exit_code)
    say(f"note: no --model given; the server serves one model: {name}")
    return dataclasses.replace(probe, model=name)


def make_common(tgt, s: ServerOpts, w: WorkloadOpts, rq: RequestOpts, o: OutputOpts, n: int,
                multi_turn: bool | None = None, progress: bool | None = None,
                replay: dict | None = None, targets: tuple[str, ...] = ("main",)):
    """The plan's common part from the groups (the workload is built against ``tgt``, with a
    salt for each of the harness's ``targets``)."""
    from llmbench.commands.common import Common
    check_api_features(tgt.api, w, rq)
    from llmbench import wire
    if wire.get(tgt.api).output == "embeddings":
        # an input has no conversation to continue, and no reply length to ask for
        w = dataclasses.replace(w, turns=1, output_tokens=None)
    params, timeouts = rq.build(api=tgt.api)
    if not wire.get(tgt.api).streams and params.stream:
        # embeddings are never streamed: TTFT would be E2EL, so it is not shown as one
        params = dataclasses.replace(params, stream=False)
    o.validate()
    wl, tok = w.build(n, target=tgt, multi_turn=multi_turn, targets=targets)
    if replay is not None:
        replay = {**replay, "salt": wl.describe_salt()}     # config.toml names it
    quiet = o.quiet
    return Common(target=tgt, workload=wl, params=params, timeouts=timeouts,
                  count_tokens=tok.count, served_by_header=s.served_by_header,
                  server_probe=s.server_probe, out=o.out, labels=o.labels(),
                  progress=False if quiet else (o.progress if progress is None else progress),
                  replay=replay,
                  metrics_at=None if o.metrics_port is None else (o.metrics_host, o.metrics_port),
                  quiet=quiet, verbose=o.verbose)


def check_api_features(api: str, w: WorkloadOpts, rq: RequestOpts) -> None:
    """What the workload and requests ask of the API, refused before anything is sent when the
    API cannot carry it (one line naming the flag and the APIs that can)."""
    from llmbench import wire
    fmt = wire.get(api)
    if w.images is not None and not fmt.images:
        able = ", ".join(f.name for f in map(wire.get, wire.names()) if f.images)
        raise UsageError(f"--images: --api {api} sends text only; use one of {able}")
    if rq.tools is not None and not fmt.tools:
        able = ", ".join(f.name for f in map(wire.get, wire.names()) if f.tools)
        raise UsageError(f"--tools: --api {api} has no tools; use one of {able}")
    if rq.response_format is not None and not fmt.structured:
        able = ", ".join(f.name for f in map(wire.get, wire.names()) if f.structured)
        raise UsageError(f"--response-format: --api {api} has no response format; use one of "
                         f"{able}")
    if rq.responses_state != "client" and api != "responses":
        raise UsageError(f"--responses-state server: --api {api} keeps no conversation; "
                         "use --api responses")
    if w.batch_size > 1 and fmt.output != "embeddings":
        raise UsageError(f"--batch-size {w.batch_size}: batches are for --api embeddings; "
                         f"--api {api} sends one prompt per request")



def _trace_plan(tgt, s: ServerOpts, w: WorkloadOpts, rq: RequestOpts, o: OutputOpts, path: str,
                speed: float, window_s, limit: int | None, replay: dict | None):
    """run --trace: the plan's common part with the trace's workload, and the replay shape."""
    from llmbench.load.shapes.trace import TraceReplay
    from llmbench.workload import ServerRef, load_tokenizer
    from llmbench.workload.traces import PrefixAim, check_replay, trace_workload
    aim = None
    if w.prefix_hit_ratio is not None:
        aim = PrefixAim(w.prefix_hit_ratio, w.cache_block_tokens, w.prefixes)
        w = dataclasses.replace(w, prefix_hit_ratio=None)   # the trace, not a synthetic set
    common = make_common(tgt, s, w, rq, o, 1, replay=replay)  # groups checked, params built
    ref = ServerRef(tgt.server_root, tgt.model,
                    {k: v for k, v in tgt.request_headers().items() if k != "content-type"},
                    tgt.net)
    tok = load_tokenizer(w.tokenizer, server=ref)
    tr, wl = trace_workload(path, tok, w.seed, window_s, limit, aim,
                            reserve=max(x.tokens for x in common.workload.salts.values()))
    check_replay(tr, speed)           # a replay that ends within 30 days, or one line
    wl.salts = common.workload.salts      # a trace's prompts get the run's salt in front
    common = dataclasses.replace(common, workload=wl)
    return common, TraceReplay(tr.items, speed, tr.describe(), w.seed)


def check_writable(path: Path | None, flag: str) -> None:
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


class MaybeMock:
    """No --url: start the built-in mock (Ollama-like queueing) in a child process."""

    def __init__(self, url: str | None, profile: str = "ollama", **overrides) -> None:
        self.url = url
        self.profile = profile
        self.overrides = overrides
        self.proc = None

    def __enter__(self):
        if self.url:
            return self.url, None
        from llmbench.mock_server import MockProcess, make_config
        cfg = make_config(self.profile, **self.overrides)
        self.proc = MockProcess(cfg).__enter__()
        say(f"No --url given: using the built-in mock ({self.profile} profile) at "
            f"{self.proc.url}")
        return self.proc.url + "/v1", cfg.models[0]

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.__exit__(*exc)


def replay_of(layout: Layout, groups: dict[str, Any]) -> dict[str, Any]:
    """The options to write into the run folder's config.toml (llmbench.commands.config)."""
    return {"values": layout.values(groups), "fields": layout.fields()}


# -- run -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class RunSpec:
    """run's options, checked: ``perform`` starts the mock if there is no --url, finds the
    model, builds the workload and the plan, and runs it."""

    g: dict[str, Any]
    n_workers: int | str
    ray_address: str | None
    rate_f: float | None
    duration_s: float | None
    requests: int | None
    think_s: tuple
    gates: Any
    vllm: Any
    window_s: Any
    replay: dict | None = None

    def perform(self, progress: bool | None = None):
        from llmbench.commands.run import RunPlan, perform
        from llmbench.load.shapes import ClosedLoop, OpenLoop
        t, s, ld, w = self.g["target"], self.g["server"], self.g["load"], self.g["workload"]
        rq, o = self.g["request"], self.g["output"]
        count = (self.requests or 1000) + ld.warmup
        with MaybeMock(t.url) as (url_, model_):
            tgt = make_target(t, s, url_, t.model or model_)
            if ld.trace is not None:
                common, shape = _trace_plan(tgt, s, w, rq, o, str(ld.trace), ld.trace_speed,
                                            self.window_s, self.requests, self.replay)
            else:
                common = make_common(tgt, s, w, rq, o, count, replay=self.replay)
                convs = common.workload.conversations
                shape = (OpenLoop(convs, self.rate_f, self.requests, self.duration_s,
                                  ld.burstiness, ld.arrival, ld.max_concurrency, ld.warmup,
                                  self.think_s, w.seed)
                         if self.rate_f is not None else
                         ClosedLoop(convs, ld.concurrency or 1, self.requests, self.duration_s,
                                    ld.warmup, self.think_s, w.seed))
            common = dataclasses.replace(common, workers=self.n_workers, tokenizer=w.tokenizer,
                                         telemetry=self.g["telemetry"].spec(tgt, s.server_probe))
            if progress is not None:
                common = dataclasses.replace(common, progress=progress)
            common = with_ray(common, self.ray_address)
            return perform(RunPlan(common, shape, self.gates, self.vllm))


def run_spec(g: dict[str, Any]) -> RunSpec:
    """run's option groups -> RunSpec, every value checked before anything starts."""
    t, s, ld, w = g["target"], g["server"], g["load"], g["workload"]
    rq, vl, pr, o = g["request"], g["vllm"], g["report"], g["output"]
    concurrency, rate, trace = ld.concurrency, ld.rate, ld.trace
    if concurrency is not None and rate is not None:
        raise UsageError("give --concurrency (closed loop) or --rate (open loop), not both")
    n_workers = check_workers(ld.workers)
    ray_address = check_ray(ld.ray)
    if trace is None and (ld.trace_window is not None or ld.trace_speed != 1.0):
        raise UsageError("--trace-speed and --trace-window need --trace FILE")
    if trace is not None:
        if concurrency is not None or rate is not None or ld.duration is not None or ld.warmup:
            raise UsageError("--trace sets the load itself: drop --concurrency, --rate, "
                             "--duration and --warmup (--trace-window picks a part)")
        if not (ld.trace_speed > 0 and math.isfinite(ld.trace_speed)):
            raise UsageError(f"--trace-speed {ld.trace_speed:g}: must be a finite number above 0")
    if concurrency is not None and concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    opt.count(concurrency, "--concurrency", hi=MAX_LOAD)
    opt.count(ld.max_concurrency, "--max-concurrency")
    opt.count(ld.warmup, "--warmup", lo=0)
    rq.validate()
    w.validate()
    s.validate()
    g["telemetry"].validate()
    if vl.save_result or vl.append_result:
        # the file name is known only after the run (vLLM's pattern has the date), so check
        # the folder it goes to: --result-dir, or the folder part of --result-filename
        folder = Path(vl.result_dir) if vl.result_dir is not None else Path(".")
        # vLLM creates --result-dir; the nearest folder that exists must let us do that
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError(f"--result-dir {folder}: {existing} is a file; pick another folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"--result-dir {folder}: cannot write in {existing} (permission denied); pick another folder")
        if vl.result_filename and folder.is_dir():
            check_writable(folder / vl.result_filename, "--result-filename")
    rate_f = None
    if rate is not None:
        try:
            rate_f = float(rate)
        except ValueError:
            raise UsageError(f"--rate {rate!r}: expected a number of requests per second, or inf")
        if not rate_f > 0:
            raise UsageError("--rate must be > 0")
    if ld.arrival not in ("gamma", "poisson", "constant"):
        raise UsageError(f"--arrival {ld.arrival!r}: choose gamma, poisson or constant")
    if not ld.burstiness > 0 or not math.isfinite(ld.burstiness):
        raise UsageError(f"--burstiness {ld.burstiness:g}: must be a finite number above 0 (1 = Poisson)")
    duration_s = opt.duration(ld.duration, "--duration") if ld.duration else None
    if duration_s is not None and duration_s <= 0:
        raise UsageError("--duration must be above 0")
    requests = ld.requests
    if rate_f is not None and math.isinf(rate_f) and requests is None:
        raise UsageError("--rate inf sends everything at once: give --requests N")
    if requests is None and duration_s is None and trace is None:
        if t.url is None and rate_f is None and concurrency is None:
            # the demo on the built-in mock: a minute, not 200 requests one at a time (~4 min)
            duration_s = DEMO_RUN_S
            say(f"No --url, --requests or --duration: a {DEMO_RUN_S:g} s demo, one "
                "request at a time against the built-in mock (--requests N or "
                "--duration to change it)")
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
    for gp in pr.goodput or []:
        k, _, v = gp.partition(":")
        if k not in ("ttft", "tpot", "e2el") or not v:
            raise UsageError(f"--goodput {gp!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            slo[k] = float(v)
        except ValueError:
            raise UsageError(f"--goodput {gp!r}: {v!r} is not a number of milliseconds")
        opt.number(slo[k], f"--goodput {k}", lo=0, lo_open=True)
    pm = tuple(m.strip() for m in pr.percentile_metrics.split(",") if m.strip())
    for m in pm:
        if m not in ("ttft", "tpot", "itl", "e2el"):
            raise UsageError(f"--percentile-metrics: unknown metric {m!r}; use ttft,tpot,itl,e2el")
    try:
        mp = tuple(float(p) for p in pr.metric_percentiles.split(","))
    except ValueError:
        raise UsageError(f"--metric-percentiles {pr.metric_percentiles!r}: expected numbers like 50,90,99")
    if any(not 0 < p < 100 for p in mp):
        raise UsageError("--metric-percentiles must lie between 0 and 100")
    o.labels()
    think_s = opt.parse_think(ld.think or "0")
    from llmbench.report.vllm_json import parse_metadata
    try:
        meta = parse_metadata(vl.metadata)
    except ValueError as exc:
        raise UsageError(str(exc))
    from llmbench.analysis.slo import parse_threshold
    thresholds = [parse_threshold(x) for x in g["gates"].threshold or []]
    window_s = None
    if ld.trace_window is not None:
        from llmbench.workload.traces import parse_window
        window_s = parse_window(ld.trace_window)
    from llmbench.commands.run import Gates, VllmResult
    gates = Gates(pm, mp, slo or None, thresholds=thresholds)
    vllm = (VllmResult(vl.save_detailed, vl.append_result, vl.result_dir, vl.result_filename, meta)
            if vl.save_result or vl.append_result else None)
    return RunSpec(g, n_workers, ray_address, rate_f, duration_s, requests, think_s, gates,
                   vllm, window_s, replay_of(RUN, g))


# -- ramp ----------------------------------------------------------------------------------------
def steps_of(users: Optional[str], start: Optional[float], step: Optional[float],
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
class RampSetup:
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
    replay: Optional[dict] = None          # the options, for the run folder's config.toml
    progress: Optional[bool] = None        # the API's say on the live line (None: --progress)
    telemetry: Optional[TelemetryOpts] = None

    def plan(self, url: str, model: Optional[str], mock: Optional[dict] = None,
             seed_offset: int = 0, out: Optional[Path] = None,
             labels: Optional[dict] = None, server_pid: Optional[int] = None):
        from llmbench.commands.ramp import RampPlan
        from llmbench.load.shapes import Ramp
        tgt = make_target(self.target, self.server, url, model)
        wl = dataclasses.replace(self.workload, seed=self.workload.seed + seed_offset)
        replay = self.replay
        if replay is not None and url != self.target.url:
            # a sweep's ramp (or the demo's mock): the URL it actually used
            replay = {**replay, "values": {**replay["values"], "url": url}}
        common = make_common(tgt, self.server, wl, self.request, self.output, 2000,
                             multi_turn=True, progress=self.progress, replay=replay)
        common = dataclasses.replace(common, workers=self.workers, tokenizer=wl.tokenizer)
        if self.telemetry is not None:
            common = dataclasses.replace(common, telemetry=self.telemetry.spec(
                tgt, self.server.server_probe, pid=server_pid, pid_from="--serve"))
        common = with_ray(common, self.ray)
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
                out: Optional[Path] = None, labels: Optional[dict] = None,
                server_pid: Optional[int] = None):
        """Every repeat of the ramp against one server, into one run folder (Done);
        ``server_pid``: the server's process when sweep --serve started it."""
        from llmbench.commands.ramp import perform
        first = self.plan(url, model, mock, out=out, labels=labels, server_pid=server_pid)
        found = first.common.target.model        # asked once, when --model was not given
        return perform(first, self.repeat,
                       lambda k: self.plan(url, found, mock, k, out=out, labels=labels,
                                           server_pid=server_pid))

    def perform_here(self):
        """ramp: against --url, or (none given) the built-in mock for the time of the ramp."""
        url = self.target.url
        with MaybeMock(url) as (url_, model_):
            return self.perform(url_, self.target.model or model_,
                                mock=None if url else {"profile": "ollama"})


def ramp_setup(g: dict[str, Any], layout: Layout = RAMP) -> RampSetup:
    """The ramp's option groups (``ramp`` and ``sweep`` take them all), checked."""
    from llmbench.analysis.slo import DEFAULT_EMBEDDING_THRESHOLDS, DEFAULT_THRESHOLDS, parse_threshold
    from llmbench import wire
    target, server, r = g["target"], g["server"], g["ramp"]
    workload, request, output = g["workload"], g["request"], g["output"]
    by = r.by
    if by not in ("users", "rate"):
        raise UsageError(f"--by {by!r}: choose users or rate")
    n_workers = check_workers(r.workers)
    ray_address = check_ray(r.ray)
    url = target.url
    d = DEMO if not url else SERVER
    users = r.users
    if not url and users is None and r.start is None and r.step is None and r.up_to is None:
        users = DEMO["users"]
    steps = steps_of(users, r.start, r.step, r.up_to, by)
    hold_s = opt.duration(r.hold or d["hold"], "--hold")
    ramp_in_s = opt.duration(r.ramp_in or d["ramp_in"], "--ramp-in")
    think_s = opt.parse_think(r.think or d["think"])
    if hold_s <= 0:
        raise UsageError("--hold must be above 0")
    opt.number(r.expect_users, "--expect-users", lo=0)
    opt.count(r.repeat, "--repeat", hi=1000)
    request.validate()
    server.validate()
    g["telemetry"].validate()
    lag_limit_ms = opt.duration(r.generator_lag_limit, "--generator-lag-limit", zero_ok=False) * 1000
    embeddings = server.api is not None and server.api in wire.names() \
        and wire.get(server.api).output == "embeddings"
    defaults = DEFAULT_EMBEDDING_THRESHOLDS if embeddings else DEFAULT_THRESHOLDS
    thresholds = [parse_threshold(x) for x in (r.threshold or defaults)]
    # a rate step's arrivals come on the schedule whatever the think time: no user goes quiet
    if by == "users" and think_s[1] > 0 and hold_s < think_s[1]:
        say(f"warning: --hold {hold_s:g}s is shorter than the longest think time "
            f"({think_s[1]:g}s): some users send nothing in a hold window")
    output.labels()
    replay = replay_of(layout, g)
    if layout is not RAMP:        # a sweep's ramps replay as ramps: the ramp's options only
        ramp_fields = RAMP.fields()
        replay = {"values": {k: v for k, v in replay["values"].items() if k in ramp_fields},
                  "fields": ramp_fields}
    workload.turns = workload.turns if workload.turns is not None else d["turns"]
    workload.prompt_tokens = workload.prompt_tokens or d["prompt_tokens"]
    workload.output_tokens = workload.output_tokens or d["output_tokens"]
    workload.validate()
    if workload.prefix_hit_ratio is not None:   # warm-up and verification live in run
        raise UsageError("--prefix-hit-ratio works with llmbench run only")
    return RampSetup(target, server, workload, request, output, steps, by, ramp_in_s, hold_s,
                     think_s, thresholds, r.keep_going, lag_limit_ms, r.expect_users, r.repeat,
                     n_workers, ray_address, replay, telemetry=g["telemetry"])


# -- sweep ---------------------------------------------------------------------------------------
def _sweep_ramp(setup: RampSetup):
    """The ramp for one setting; a server the ramp cannot use (no model, wrong --model) ends
    that setting, not the sweep (its error line is printed here)."""
    def ramp_for(url: str, model: Optional[str], out: Path, labels: dict,
                 server_pid: Optional[int] = None):
        from llmbench.commands.common import Done
        try:
            return setup.perform(url, model, out=out, labels=labels, server_pid=server_pid)
        except LlmbenchError as exc:
            if exc.exit_code == EXIT_USAGE:
                raise
            print(f"error: {exc}", file=sys.stderr)
            return Done(None, exc.exit_code, None)
    return ramp_for


def _sweep_config(setup: RampSetup) -> dict:
    return {"by": setup.by, "steps": setup.steps, "ramp_in_s": setup.ramp_in_s,
            "hold_s": setup.hold_s, "think_s": list(setup.think_s),
            "thresholds": [t.text for t in setup.thresholds], "repeat": setup.repeat,
            "expect": setup.expect}


def mock_option_names() -> set[str]:
    """The options of ``llmbench mock`` (a --mock sweep's settings are mock options)."""
    from llmbench.mock_server.cli import MockOptions
    return {f.name for f in dataclasses.fields(MockOptions)}


def sweep_plan(g: dict[str, Any], progress: bool | None = None):
    """sweep's option groups -> SweepPlan, every value checked before any server starts."""
    from llmbench.commands.sweep import SweepPlan, parse_settings
    setup = ramp_setup(g, SWEEP)
    setup.progress = progress
    sw = g["sweep"]
    settings = parse_settings(sw.setting or [])
    modes = [m for m, on in (("serve", sw.serve is not None), ("before", sw.before is not None),
                             ("mock", sw.mock)) if on]
    if len(modes) != 1:
        raise UsageError("give one of --serve, --before or --mock: how each value reaches "
                         "the server")
    if sw.mock_options is not None and not sw.mock:
        raise UsageError("--mock-options go with --mock")
    if sw.mock and setup.target.url:
        raise UsageError("--mock starts its own server: drop --url")
    if not sw.mock and not setup.target.url:
        raise UsageError(f"--{modes[0]} needs --url: where the server answers, e.g. "
                         "http://127.0.0.1:11434/v1 ({NAME} and {PORT} are replaced)")
    import shlex
    try:
        extra = shlex.split(sw.mock_options or "")
    except ValueError as exc:
        raise UsageError(f"--mock-options {sw.mock_options!r}: {exc}")
    if sw.mock:
        known = mock_option_names()
        for name in settings:
            if name.replace("-", "_") not in known or name in ("host", "port"):
                raise UsageError(f"--setting {name}: not an option of llmbench mock; use one of "
                                 "its options, e.g. parallel, batch_slowdown, itl_ms")
    ready_s = opt.duration(sw.ready_timeout, "--ready-timeout", zero_ok=False)
    grace_s = opt.duration(sw.stop_grace, "--stop-grace")
    return SweepPlan(settings=settings, mode=modes[0], command=sw.serve or sw.before,
                     mock_options=extra, url=setup.target.url, model=setup.target.model,
                     api=setup.server.api, api_key=setup.server.api_key,
                     headers=setup.server.header, ready_timeout_s=ready_s, stop_grace_s=grace_s,
                     out=setup.output.out, labels=setup.output.labels(), repeat=setup.repeat,
                     expect=setup.expect, unit="users" if setup.by == "users" else "req/s",
                     ramp=_sweep_ramp(setup), config=_sweep_config(setup),
                     target_options=setup.server.target_options(),
                     replay=replay_of(SWEEP, g))


# -- probe ---------------------------------------------------------------------------------------
def probe_plan(g: dict[str, Any], progress: bool | None = None):
    """probe's option groups -> ProbePlan (the workload is counted against the backend)."""
    from llmbench.commands.common import Common
    from llmbench.commands.probe import ProbePlan
    from llmbench.load.shapes import RouterAB
    from llmbench.client.target import make_target as make
    ends, target, server, ld = g["ends"], g["target"], g["server"], g["load"]
    workload, request, output = g["workload"], g["request"], g["output"]
    steps = steps_of(ld.users, None, None, None, "users")
    n_workers = check_workers(ld.workers)
    ray_address = check_ray(ld.ray)
    if ld.rounds < 1:
        raise UsageError("--rounds must be at least 1")
    slice_seconds = opt.duration(ld.slice_s, "--slice")
    if slice_seconds <= 0:
        raise UsageError("--slice must be above 0")
    think_s = opt.parse_think(ld.think or "0")
    request.validate()
    workload.validate()
    if workload.prefix_hit_ratio is not None:   # warm-up and verification live in run
        raise UsageError("--prefix-hit-ratio works with llmbench run only")
    server.validate()
    g["telemetry"].validate()
    output.labels()
    model = target.model
    way = server.target_options()
    rt = make(ends.router, model, server.api, server.api_key, server.header, **way)
    dt = make(ends.direct, g["direct"].direct_model or model, server.api, server.api_key,
              server.header, **way)
    # the workload is counted against the backend (its /tokenize), sent through both
    common = make_common(dt, server, workload, request, output, 4000, multi_turn=True,
                         progress=progress, replay=replay_of(PROBE, g),
                         targets=("router", "direct"))
    common = Common(**{**common.__dict__, "target": rt, "workers": n_workers,
                       "tokenizer": workload.tokenizer,
                       # the backend's machine: where the compute is
                       "telemetry": g["telemetry"].spec(dt, server.server_probe)})
    common = with_ray(common, ray_address)
    shape = RouterAB(common.workload.conversations, [int(s) for s in steps],
                     slice_s=slice_seconds, rounds=ld.rounds, think_s=think_s,
                     seed=workload.seed)
    return ProbePlan(common, dt, shape)

