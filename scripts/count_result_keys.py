"""How often code outside the results contract reads a run, step, check or verdict by string key
(issue 38: "run/step/check/verdict keys are read by string 241 times in 20 files").

  python scripts/count_result_keys.py            # the total and the count per file
  python scripts/count_result_keys.py --list     # ... and every read, file:line key

A read is, in the AST of every module of the layers above the results contract (analysis,
report, commands, cli, api: the only ones that may hold a run, tests/unit/test_architecture.py's
LAYERS), ``x["key"]``
(loaded, not assigned), ``x.get("key")``, or ``"key" in x``, where ``key`` is one of the keys
run.json gives a run, a step, a check or a verdict (KEYS below: those of every saved folder
and every key the commands write). It counts what a reader does with a dict; a key that other
dicts share (``kind``, ``status``, ``error``) is counted wherever it is read, so the figure is an
upper bound. ``--groups`` leaves out reads of the command's option groups (``g["server"]``,
``self.g["load"]``: llmbench/commands/spec.py's dict of option groups, whose names happen to be
run keys), which are no run data at all.
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUN = {"schema_version", "kind", "status", "started_at", "t0_perf", "labels", "config",
       "workload", "environment", "monitor", "summary", "outages", "thresholds", "server_probe",
       "trace", "prefix_cache", "workers", "steps", "verdict", "user_changes",
       "closed_loop_note", "repeat", "repeats", "pid", "error", "note", "rebuilt_at",
       "connection_resends", "not_streamed", "output_length", "router_bound"}
STEP = {"index", "load", "ramp_start", "hold_start", "hold_end", "held", "state", "checks",
        "unfinished", "steady"}
CHECK = {"threshold", "ok", "actual", "limit", "metric", "stat", "op", "reason",
         "insufficient", "outage"}
VERDICT = {"result", "evidence", "advice", "knee", "drifting", "steady_note", "compared",
           "ttft_p95_ms", "itl_median_ms", "itl_p50_ms", "itl_p95_ms", "itl_grew", "ttft_grew",
           "served_at_once", "server", "slots_estimate", "generator_cause", "interrupted",
           "incomplete"}
KEYS = RUN | STEP | CHECK | VERDICT
ABOVE = ("analysis", "report", "commands", "cli", "api")


def _groups(node: ast.AST) -> bool:
    """``g`` or ``self.g``: the option groups of llmbench/commands/spec.py."""
    return (isinstance(node, ast.Name) and node.id == "g") or (
        isinstance(node, ast.Attribute) and node.attr == "g")


def reads(path: Path, skip_groups: bool = False) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            s = node.slice
            if skip_groups and _groups(node.value):
                continue
            if isinstance(s, ast.Constant) and isinstance(s.value, str):
                key = s.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            key = node.args[0].value
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], (ast.In, ast.NotIn))
              and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
            key = node.left.value
        if key in KEYS:
            out.append((node.lineno, key))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--groups", action="store_true",
                    help="leave out reads of the option groups (commands/spec.py's g[...])")
    a = ap.parse_args()
    per_file = collections.Counter()
    found = []
    for path in sorted((ROOT / "llmbench").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1].removesuffix(".py") not in ABOVE:
            continue
        for line, key in reads(path, a.groups):
            per_file[str(rel)] += 1
            found.append((str(rel), line, key))
    for f, n in per_file.most_common():
        print(f"{n:5d}  {f}")
    if a.list:
        for f, line, key in found:
            print(f"{f}:{line}  {key}")
    print(f"{sum(per_file.values())} reads in {len(per_file)} files")


if __name__ == "__main__":
    main()
