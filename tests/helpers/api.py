"""Runs in this process through the public API (``llmbench.run``, ``ramp``, ``probe``), for the
tests that need a run's numbers or folder and not the command line's wording, exit codes or
signals (issue 25: each CLI child process costs a fresh interpreter and its imports).

The API raises where the command line exits with 3, 5 or 6, on an interruption, a lost worker
and a failed run (llmbench/api.py), and returns a Run otherwise. ``run_exit_code`` and
``ramp_exit_code`` give, for a Run it returned, the code the command line exits with: the one
rule both use, ``Run.exit_code``, so a test that asserted ``returncode == 0`` on the command
line asserts the same of its in-process run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import llmbench
from llmbench.results.schema import Run

__all__ = ["SMALL_AGENT", "probe", "ramp_exit_code", "records", "run_exit_code", "run_json"]

# A small agent workload for the tests that watch sessions go by (the live view, the dashboard,
# the metrics port, a sweep): 4 calls with 150 ms tool gaps, tiny prompts and replies, counted
# by the approximate tokenizer (no download); a test overrides what it needs
SMALL_AGENT: dict[str, Any] = dict(
    workload_type="agent", agent_steps="4", agent_tool_latency="150ms",
    agent_system_tokens="20", agent_task_tokens="20", agent_result_tokens="10",
    agent_call_tokens="5", agent_answer_tokens="5", tokenizer="approx")


def run_exit_code(run: Run) -> int:
    """``llmbench run``'s code for a run the API returned: the one rule (``Run.exit_code``)."""
    return run.exit_code


def ramp_exit_code(run: Run) -> int:
    """``llmbench ramp``'s code for a ramp the API returned: the one rule (``Run.exit_code``:
    the step its verdict explains, the first that broke after the last that held)."""
    return run.exit_code


def run_json(run: Run) -> dict[str, Any]:
    """run.json as written in the run's folder (not the API's view of it)."""
    assert run.path is not None
    return json.loads((Path(run.path) / "run.json").read_text())


def records(run: Run) -> list[dict[str, Any]]:
    """requests.jsonl of the run's folder, one dict a line."""
    assert run.path is not None
    text = (Path(run.path) / "requests.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def probe(router: str, direct: str, out: Path, model: str = "mock", **options: Any) -> Run:
    """``llmbench probe`` with the defaults of tests/integration/test_probe.py's ``probe``:
    2 s slices, 2 rounds, 20 prompt and 10 output tokens, 3 turns. (The API names --slice
    ``slice_s``.)"""
    defaults = dict(slice_s="2s", rounds=2, prompt_tokens=20, output_tokens=10, turns=3)
    return llmbench.probe(router=router, direct=direct, model=model, out=out,
                          **{**defaults, **options})
