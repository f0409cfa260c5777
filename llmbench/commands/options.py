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
    REQUIRED, SAME, SECONDS, SECONDS_ABOVE_0, SPAN, TEXT, TEXTS, Kind, Spec, count, duration,
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
