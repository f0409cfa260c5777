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
from llmbench.specs.options import (  # noqa: F401  (re-exported)
    ABANDON, P_GATES, P_LOAD, P_NET, P_OUTPUT, P_REQUEST, P_STEPS, P_TARGET, P_VLLM, P_WORKLOAD,
    SCENARIO, TOKENS)
from llmbench.options import (  # noqa: F401  (re-exported)
    FLAG, FLOAT, INT, MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, NAMES, PAIRS, PATH, PERCENTILES,
    REQUIRED, SAME, SECONDS, SECONDS_ABOVE_0, SPAN, TEXT, TEXTS, Kind, Problems, Spec, count, duration, problem,
    number, opt_of, option, parse_labels, parse_think, seconds, whole)

def _thresholds(v: Any, flag: str) -> list[Any]:
    """Threshold objects or their texts -> [Threshold] (analysis.slo's grammar)."""
    from llmbench.analysis.slo import Threshold, ThresholdError, parse_threshold
    items = v if isinstance(v, (list, tuple)) else [v]
    try:
        return [x if isinstance(x, Threshold) else parse_threshold(TEXT.parse(x, flag))
                for x in items]
    except ThresholdError as exc:
        raise UsageError(str(exc)) from None


THRESHOLDS = Kind(List[str], _thresholds, lambda v: [t.text for t in v],
                  doc="list[Threshold | str]")
