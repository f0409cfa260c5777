"""What the commands' wiring shares, with no Typer in it: the plan's pieces (the target, the
workload and requests against it, the built-in mock when there is no --url), for each
command's ``perform_spec``, which the command line and the Python API both call
(docs/architecture-notes.md). Nothing here exits the process: a bad value is a ``UsageError``,
an unusable server a ``ServerUnreachable`` (llmbench/specs/errors.py ``translate``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from llmbench.errors import UsageError, failure


def say(message: str) -> None:
    """A note for the user, on stderr (stdout is for results)."""
    print(message, file=sys.stderr, flush=True)


# -- pieces every command uses --------------------------------------------------------------
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


# -- the plan's pieces ------------------------------------------------------------------------
def make_target(spec: Any, url: str, model: str | None) -> Any:
    """The target; waits for a starting server (--wait-ready) and, without --model, asks the
    server for the one model it serves."""
    from llmbench.servers.discover import DiscoverError, pick_model, wait_ready as wait
    from llmbench.client.target import make_target as make
    probe = make(url, model or "?", spec.api, spec.api_key, spec.header, **spec.target_options())
    try:
        wait_s = getattr(spec, "wait_ready", None)
        if wait_s:
            wait(probe, wait_s)
        if model:
            return probe
        name = pick_model(probe)
    except DiscoverError as exc:
        raise failure(str(exc), exc.exit_code)
    say(f"note: no --model given; the server serves one model: {name}")
    return dataclasses.replace(probe, model=name)


@contextlib.contextmanager
def building(show: bool = True, every_s: float = 1.0, quiet_s: float = 1.0):
    """While the workload is built: its progress (``workload.progress.PROGRESS``) on stderr
    once a stage has taken ``quiet_s``, redrawn in place each ``every_s`` on a terminal, a line
    each 10 s elsewhere (a log), so no minute passes in silence before the load starts."""
    from llmbench.workload import progress as prog
    if not show:
        yield
        return
    stop = threading.Event()
    tty = sys.stderr.isatty()

    def draw() -> None:
        drawn, last_line = False, 0.0
        while not stop.wait(every_s):
            p = prog.PROGRESS
            now = time.monotonic()
            text = p.text(now)
            if text is None or now - p.started < quiet_s:
                if drawn and tty:
                    sys.stderr.write("\r\x1b[K")
                    drawn = False
                continue
            if tty:
                width = shutil.get_terminal_size((80, 24)).columns - 1
                sys.stderr.write("\r\x1b[K" + text[:width])
                drawn = True
            elif now - last_line >= 10 * every_s:
                sys.stderr.write(text + "\n")
                last_line = now
            sys.stderr.flush()
        if drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
    t = threading.Thread(target=draw, name="llmbench-building", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=2.0)


def make_common(tgt: Any, spec: Any, n: int, multi_turn: bool | None = None,
                progress: bool | None = None, replay: dict[str, Any] | None = None,
                targets: tuple[str, ...] = ("main",)) -> Any:
    """The plan's common part from the spec (the workload is built against ``tgt``, with a
    salt for each of the harness's ``targets``)."""
    from llmbench.commands.common import Common, Watch
    agents = getattr(spec, "workload_type", "chat") == "agent"
    check_api_features(tgt.api, spec, agents)
    from llmbench import wire
    w = spec
    if wire.get(tgt.api).output == "embeddings":
        # an input has no conversation to continue, and no reply length to ask for
        w = dataclasses.replace(w, turns=1, output_tokens=None)
    params, timeouts = spec.build_request(api=tgt.api)
    if getattr(spec, "otlp", None) is not None or getattr(spec, "traceparent", None) == "on":
        # a trace id per request (records/trace.py); sent as traceparent unless --no-traceparent
        params = dataclasses.replace(params, trace_ids=True,
                                     traceparent=spec.traceparent != "off")
    if not wire.get(tgt.api).streams and params.stream:
        # embeddings are never streamed: TTFT would be E2EL, so it is not shown as one
        params = dataclasses.replace(params, stream=False)
    with building(not spec.quiet and progress is not False and spec.progress is not False):
        if agents:
            wl, tok = w.build(n, target=tgt, multi_turn=multi_turn, targets=targets, agent=spec,
                              tools=spec.agents()[0])
        else:
            wl, tok = w.build(n, target=tgt, multi_turn=multi_turn, targets=targets)
    if replay is not None:
        replay = {**replay, "salt": wl.describe_salt()}     # config.toml names it
    quiet = spec.quiet
    watch = Watch(progress=False if quiet else (spec.progress if progress is None else progress),
                  quiet=quiet, verbose=spec.verbose,
                  metrics_at=None if spec.metrics_port is None else (spec.metrics_host,
                                                                     spec.metrics_port),
                  dashboard_at=spec.dashboard_at(), dashboard_linger_s=spec.linger_s(),
                  otlp=getattr(spec, "otlp", None), mlflow=getattr(spec, "mlflow", None))
    return Common(target=tgt, workload=wl, params=params, timeouts=timeouts,
                  count_tokens=tok.count, served_by_header=spec.served_by_header,
                  server_probe=spec.server_probe, out=Path(spec.out), labels=spec.labels(),
                  replay=replay, workers=getattr(spec, "workers", 1), tokenizer=spec.tokenizer,
                  network_floor=getattr(spec, "network_floor", "auto"), watch=watch)


def check_api_features(api: str, spec: Any, agents: bool = False) -> None:
    """What the workload and requests ask of the API, refused before anything is sent when the
    API cannot carry it (one line naming the flag and the APIs that can)."""
    from llmbench import wire
    fmt = wire.get(api)
    for asked, feature, why in (
            (agents, "tools", "--workload agent: --api {} has no tools, and agent sessions "
             "call them"),
            (spec.images is not None, "images", "--images: --api {} sends text only"),
            (spec.tools is not None, "tools", "--tools: --api {} has no tools"),
            (spec.response_format is not None, "structured",
             "--response-format: --api {} has no response format")):
        if asked and not getattr(fmt, feature):
            able = ", ".join(f.name for f in map(wire.get, wire.names()) if getattr(f, feature))
            raise UsageError(f"{why.format(api)}; use one of {able}")
    if spec.responses_state != "client" and api != "responses":
        raise UsageError(f"--responses-state server: --api {api} keeps no conversation; "
                         "use --api responses")
    if spec.batch_size > 1 and fmt.output != "embeddings":
        raise UsageError(f"--batch-size {spec.batch_size}: batches are for --api embeddings; "
                         f"--api {api} sends one prompt per request")


def warn_short_hold(workload: Any, hold_s: float) -> None:
    """A ramp step's sessions are those that started in its hold window (analysis.sessions),
    and the drain waits for them; a hold shorter than a typical session still counts them,
    but few start in it. Said once, with the figure."""
    from llmbench.workload.agents import is_agent
    gaps = [sum(st.gap_s for st in c.plan.steps) for c in workload.conversations[:200]
            if is_agent(c)]
    if not gaps:
        return
    typical = sorted(gaps)[len(gaps) // 2]
    if hold_s < typical:
        say(f"warning: --hold {hold_s:g}s is shorter than a typical session's tool time alone "
            f"({typical:.0f} s): a step counts the sessions that start in its hold window, so "
            f"few will; hold longer (e.g. --hold {max(60, int(typical * 3)):d}s)")


def prepare(spec: Any) -> None:
    """What a spec's check could not look at without touching the machine, before anything
    starts: the network options' files (made this process's), --tools and --response-format
    read and checked."""
    spec.net()
    spec.agents()


class MaybeMock:
    """No --url: start the built-in mock (Ollama-like queueing) in a child process."""

    def __init__(self, url: str | None, demo: bool = False) -> None:
        self.url = url
        self.demo = demo
        self.proc = None

    def __enter__(self):
        if self.url:
            return self.url, None
        from llmbench.mock_server import MockProcess, make_config
        cfg = make_config("ollama")
        self.proc = MockProcess(cfg).__enter__()
        # one line within 80 columns: a URL of the mock, and why it is the mock
        why = "--demo" if self.demo else "No server found"
        say(f"{why}: the built-in mock (ollama profile) at {self.proc.url}")
        return self.proc.url + "/v1", cfg.models[0]

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.__exit__(*exc)


def trace_of(spec: Any, tgt: Any, common: Any, seed: int, window_s: Any = None,
             limit: int | None = None, aim: Any = None) -> tuple[Any, Any]:
    """--trace: the recording (counted as ``tgt`` counts) and the workload sent of it."""
    from llmbench.specs.groups import tokenizer_for
    from llmbench.workload.traces import check_replay, trace_workload
    tr, wl = trace_workload(str(spec.trace), tokenizer_for(spec.tokenizer, tgt), seed, window_s,
                            limit, aim, reserve=max(x.tokens for x in common.workload.salts.values()))
    check_replay(tr, spec.trace_speed)     # a replay that ends within 30 days, or one line
    wl.salts = common.workload.salts       # a trace's prompts get the run's salt in front
    return tr, wl


def replay_of(spec: Any, only: Sequence[str] | None = None) -> dict[str, Any]:
    """The options to write into the run folder's config.toml (llmbench.specs.config);
    ``only``: these options (a sweep's ramps replay as ramps)."""
    values, fields = spec.cli_values(), type(spec).cli_fields()
    if only is not None:
        values = {k: v for k, v in values.items() if k in only}
        fields = {k: v for k, v in fields.items() if k in only}
    return {"values": values, "fields": fields}
