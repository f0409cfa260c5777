"""The commands' help panels and the kinds of option only the commands have (token lengths,
thresholds), on the declarations of llmbench/options.py (``Spec``, ``option``, the kinds, the
value checks ``duration``, ``count``, ``number`` ...), re-exported here: the bottom layer the
mock's options use too. The commands' options are their specs' typed fields: groups.py (the
options the load commands share), run_spec.py, ramp_spec.py, sweep_spec.py, probe_spec.py,
report.py.
"""

from __future__ import annotations

from typing import Any, List

from llmbench.errors import UsageError  # noqa: F401  (re-exported: opt.UsageError)
from llmbench.options import (  # noqa: F401  (re-exported)
    FLAG, FLOAT, INT, MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, NAMES, PAIRS, PATH, PERCENTILES,
    REQUIRED, SAME, SECONDS, SECONDS_ABOVE_0, SPAN, TEXT, TEXTS, Kind, Problems, Spec, count, duration, problem,
    number, opt_of, option, parse_labels, parse_think, seconds, whole)

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
    if isinstance(v, Scenario):
        return v
    if isinstance(v, Path):
        return v
    return Path(TEXT.parse(v, flag))


def _scenario_cli(v: Any) -> Any:
    from llmbench.workload.scenario import Scenario
    return None if isinstance(v, Scenario) else str(v)     # a typed value has no flag form


def _thresholds(v: Any, flag: str) -> list[Any]:
    """Threshold objects or their texts -> [Threshold] (analysis.slo's grammar)."""
    from llmbench.analysis.slo import Threshold, ThresholdError, parse_threshold
    items = v if isinstance(v, (list, tuple)) else [v]
    try:
        return [x if isinstance(x, Threshold) else parse_threshold(TEXT.parse(x, flag))
                for x in items]
    except ThresholdError as exc:
        raise UsageError(str(exc)) from None


TOKENS = Kind(str, _tokens, lambda v: str(v) if isinstance(v, int) else f"{v[0]}-{v[1]}",
              doc="int | tuple[int, int]")
THRESHOLDS = Kind(List[str], _thresholds, lambda v: [t.text for t in v],
                  doc="list[Threshold | str]")
# --abandon after=2s (repeatable, or comma-joined): the command line's texts -> one Abandon
ABANDON = Kind(List[str], _abandon, lambda v: [v.text()], doc="Abandon | str")
SCENARIO = Kind(str, _scenario, _scenario_cli, doc="Path | Scenario")
