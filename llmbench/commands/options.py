"""The commands' help panels, and the value checks their options use (``duration``, ``count``,
``number``, ``seconds``, ``parse_think``, ``parse_labels``), re-exported from llmbench/options.py,
the bottom layer the mock's options use too (so ``opt.duration`` still reads). The commands'
options are their specs' typed fields: llmbench/commands/fields.py (how one is declared),
groups.py (the options the load commands share), run_spec.py, ramp_spec.py, ...
"""

from __future__ import annotations

from llmbench.errors import UsageError  # noqa: F401  (re-exported: opt.UsageError)
from llmbench.options import (  # noqa: F401  (re-exported: the machinery's old home)
    MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, Field, GroupDefaults, Layout, Opt, OptionGroup, _opt,
    coerce, count, duration, group_defaults, hints, number, parse_labels, parse_think, seconds,
    whole)

# Help panels: grouped the same way in every command, each narrow enough that rich never cuts
# an option name at 80 columns (tests/e2e/test_cli_help.py).
P_TARGET, P_LOAD, P_STEPS, P_GATES = "Target", "Load", "Steps", "Pass/fail"
P_WORKLOAD, P_REQUEST, P_OUTPUT, P_VLLM = "Workload", "Request", "Output", "vLLM result JSON"
P_NET = "Network"
