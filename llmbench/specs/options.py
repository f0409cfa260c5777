"""The declarations the specs share (llmbench/specs/): the help panels, the kinds of option
only the load commands have (token lengths, users, thresholds...), and the options several
commands declare (--think, --workers, --trace...), on the bottom layer's ``Spec`` and
``option`` (llmbench/options.py), re-exported here. Plain data: nothing here reads a file or
the network, and nothing above results/ is imported (tests/unit/test_architecture.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, List, Literal

from llmbench.errors import UsageError  # noqa: F401  (re-exported)
from llmbench.options import (  # noqa: F401  (re-exported)
    FLAG, FLOAT, INT, MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, NAMES, PAIRS, PATH, PERCENTILES,
    REQUIRED, SAME, SECONDS, SECONDS_ABOVE_0, SPAN, TEXT, TEXTS, Kind, Problems, Spec, count,
    duration, number, opt_of, option, parse_labels, parse_think, problem, seconds, whole)

Span = tuple[float, float] | float | timedelta | str      # (5, 10) seconds, 3, "5s-10s"
Workers = int | Literal["auto"] | str                     # 4, "auto"


# more streams than any one machine (or cluster) opens: a typo, not a plan. Refused, so that
# --users 1e308 or --concurrency 10**12 is one line, not a run that allocates forever.
MAX_LOAD = 1_000_000


# Help panels: grouped the same way in every command, each narrow enough that rich never cuts
# an option name at 80 columns (tests/e2e/test_cli_help.py).
P_TARGET, P_LOAD, P_STEPS, P_GATES = "Target", "Load", "Steps", "Pass/fail"
P_WORKLOAD, P_REQUEST, P_OUTPUT, P_VLLM = "Workload", "Request", "Output", "vLLM result JSON"
P_NET = "Network"


def _tokens(v: Any, flag: str) -> int | tuple[int, int]:
    """N or LO-HI tokens: 16, '16', (64, 256), '64-256' -> 16 or (64, 256)."""
    from llmbench.workload import parse_range
    from llmbench.workload.files import DatasetError
    text = "-".join(map(str, v)) if isinstance(v, (tuple, list)) else TEXT.parse(v, flag)
    try:
        lo, hi = parse_range(text, flag)
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    return lo if lo == hi else (lo, hi)


def _abandon(v: Any, flag: str) -> Any:
    """'after=2s', 'share=0.2,after-tokens=20' (or a list of them, or an Abandon) -> Abandon
    (client.abandon's grammar; one line naming the flag otherwise)."""
    from llmbench.client.abandon import Abandon, parse_abandon
    if isinstance(v, Abandon):
        return v
    if isinstance(v, (list, tuple)):
        return parse_abandon([TEXT.parse(x, flag) for x in v], flag)
    return parse_abandon(TEXT.parse(v, flag), flag)


def _scenario(v: Any, flag: str) -> Any:
    """A scenario file's path (read when the plan is built: commands.scenario), or a Scenario
    (workload.scenario) given from Python."""
    from pathlib import Path
    from llmbench.workload.scenario import Scenario
    if isinstance(v, (Scenario, Path)):
        return v
    return Path(TEXT.parse(v, flag))


def _scenario_cli(v: Any) -> Any:
    from llmbench.workload.scenario import Scenario
    return None if isinstance(v, Scenario) else str(v)     # a typed value has no flag form


TOKENS = Kind(str, _tokens, lambda v: str(v) if isinstance(v, int) else f"{v[0]}-{v[1]}",
              doc="int | tuple[int, int]")
ABANDON = Kind(List[str], _abandon, lambda v: [v.text()], doc="Abandon | str")
SCENARIO = Kind(str, _scenario, _scenario_cli, doc="Path | Scenario")


def _thresholds(v: Any, flag: str) -> list[Any]:
    """Threshold objects or their texts -> [Threshold] (specs/thresholds.py's grammar)."""
    from llmbench.specs.thresholds import Threshold, ThresholdError, parse_threshold
    items = v if isinstance(v, (list, tuple)) else [v]
    try:
        return [x if isinstance(x, Threshold) else parse_threshold(TEXT.parse(x, flag))
                for x in items]
    except ThresholdError as exc:
        raise UsageError(str(exc)) from None


THRESHOLDS = Kind(List[str], _thresholds, lambda v: [t.text for t in v],
                  doc="list[Threshold | str]")


def check_workers(value: Any, flag: str = "--workers") -> int | str:
    """--workers N|auto: 1 (the default) runs in this process, as without the option."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
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


WORKERS = Kind(str, check_workers, str, doc='int | "auto"')


def _users(v: Any, flag: str) -> list[float]:
    """--users 1,2,4 or [1, 2, 4] -> [1, 2, 4]: whole numbers as ints (users), others as
    floats (a rate ramp's requests/s); their checks: ``steps_of``."""
    text = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else TEXT.parse(v, flag)
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected numbers like 1,2,4,8")
    return [int(x) if x.is_integer() else x for x in out]


USERS_KIND = Kind(str, _users, lambda v: ",".join(f"{x:g}" for x in v), doc="list[int]")


def think(default: Any = None) -> Any:
    return option("Pause between a user's turns, e.g. 5s-10s; 0 allowed.", P_LOAD, kind=SPAN,
                  default=default)


def scenario(help_text: str, panel: str) -> Any:
    """--scenario, declared once for run and ramp (the same file format; what the classes'
    shares split is the command's own, so each says it in its help)."""
    return option(help_text, panel, kind=SCENARIO, metavar="FILE")


def trace(help_text: str, panel: str) -> Any:
    """--trace FILE, declared once for run (replayed on its timestamps) and ramp (replayed at
    growing multiples): each says what it does with it."""
    return option(help_text, panel, kind=PATH, metavar="FILE")


def trace_speed(panel: str) -> Any:
    return option("--trace: 2 replays twice as fast (recorded times and gaps halved).", panel,
                  kind=FLOAT, default=1.0)


def workers() -> Any:
    return option("Worker processes sharing the load (auto: from the streams and cores).", P_LOAD,
                  kind=WORKERS, default="1", metavar="N|auto")


def ray() -> Any:
    return option("Run the workers as Ray actors over a cluster's nodes (auto: RAY_ADDRESS, else local Ray).", P_LOAD, "--ray", metavar="auto|ADDR")


def users(default: Any = None) -> Any:
    return option("Steps of users, e.g. 1,2,4,8.", P_STEPS, kind=USERS_KIND, default=default)


def thresholds() -> Any:
    return option("Gate, e.g. 'ttft.p95_all<=2s' (repeatable).", P_GATES, "--threshold",
                  kind=THRESHOLDS, metavar="EXPR")
