"""``llmbench run``'s load: closed loop (``concurrency``), open loop (``rate``,
``max_concurrency``), a trace replayed on its timestamps, or traffic classes (``scenario``);
how many requests or how long. A group of RunSpec's (``RunSpec(load=RunLoad(...))``); its
rules together with the other groups' are RunSpec's (llmbench/specs/run.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from llmbench.specs.groups import Seconds
from llmbench.specs.options import (FLOAT, INT, P_LOAD, SECONDS, Kind, Span, Spec, UsageError,
                                    Workers, option, ray, scenario as scenario_option, think,
                                    trace as trace_option, trace_speed as trace_speed_option,
                                    workers)


def _rate(v: Any, flag: str) -> float:
    try:
        rate = float(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None
    except ValueError:
        rate = None
    if rate is None:
        raise UsageError(f"{flag} {v!r}: expected a number of requests per second, or inf")
    if not rate > 0:
        raise UsageError(f"{flag} must be > 0")
    return rate


def _window(v: Any, flag: str) -> tuple[float, float]:
    if isinstance(v, (tuple, list)) and len(v) == 2:
        v = "-".join("" if math.isinf(x) else repr(float(x)) for x in v)
    from llmbench.workload.files import DatasetError
    from llmbench.workload.traces import parse_window
    try:
        return parse_window(str(v))
    except DatasetError as exc:
        raise UsageError(str(exc)) from None


RATE = Kind(str, _rate, lambda v: f"{v!r}", doc="float (requests/s; inf: all at once)")
WINDOW = Kind(str, _window, lambda v: "-".join("" if math.isinf(x) else repr(x) for x in v),
              doc="tuple[float, float] (seconds)")


@dataclasses.dataclass(kw_only=True)
class RunLoadOpts(Spec):
    """How much load a run sends: users, a rate, how many requests or how long."""
    # other tools' names for the same thing are accepted (vLLM's --request-rate and
    # --num-prompts, GuideLLM's --max-seconds, k6's --vus); the ones that mean something else,
    # or that would not fit the help at 80 columns, are refused naming ours (cli/foreign.py)
    concurrency: int | None = option("Closed loop: N requests in flight.", P_LOAD, "--concurrency", "--vus", kind=INT)
    rate: float | str | None = option("Open loop: requests per second (or inf).", P_LOAD, "--rate", "--request-rate", kind=RATE)
    burstiness: float = option("Gamma shape of the gaps: 1 = Poisson, <1 burstier.", P_LOAD, kind=FLOAT, default=1.0)
    arrival: str = option("gamma | poisson | constant", P_LOAD, default="gamma")
    max_concurrency: int | None = option("Open loop: cap on requests in flight.", P_LOAD, kind=INT)
    requests: int | None = option("How many requests (default 200 unless --duration; with no --url, 60 s of requests).", P_LOAD, "--requests", "--num-prompts", kind=INT)
    duration: Seconds | None = option("Stop starting requests after this long, e.g. 60s.", P_LOAD, "--duration", "--max-seconds", kind=SECONDS)
    warmup: int = option("Requests sent first and not counted.", P_LOAD, kind=INT, default=0)
    think: Span | None = think("0")
    workers: Workers = workers()
    ray: str | None = ray()
    trace: Path | str | None = trace_option("Replay a trace on its own timestamps: Mooncake JSONL, Azure CSV, or JSONL with timestamp (ms) and lengths or messages.", P_LOAD)
    trace_speed: float = trace_speed_option(P_LOAD)
    trace_window: tuple[float, float] | str | None = option("--trace: only this part, from its first request, e.g. 10m-20m.", P_LOAD, kind=WINDOW, metavar="START-END")
    scenario: Any = scenario_option("Traffic classes at one load: a TOML, YAML or JSON file of classes (as ramp --scenario's); the shares split --concurrency's users (or --rate), held for --duration (default 60s), each class judged on its own requests by its own thresholds.", P_LOAD)


RunLoad = RunLoadOpts
