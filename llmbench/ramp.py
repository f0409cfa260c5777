"""``llmbench ramp``: add users step by step until the thresholds break, and say why."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checks
from . import timeline as timeline_mod
from . import verdict as verdict_mod
from .client import RequestParams, Timeouts
from .load.monitor import CPU_LIMIT_PCT, LAG_P99_LIMIT_MS
from .load.session import Session
from .load.users import RampPlan, StepResult, run_ramp
from .report import console
from .report.auto import write_report
from .results import SCHEMA_VERSION, clean_nan, environment, new_run_dir, write_json
from .exitcodes import EXIT_THRESHOLD
from .runner import (EXIT_EXPECTATION, EXIT_INTERRUPTED, EXIT_OK, EXIT_OVERLOADED, Harness,
                     PreflightError, report_failed, write_started)
from .target import Target
from .workload import Workload


@dataclass
class RampRun:
    target: Target
    workload: Workload
    plan: RampPlan
    params: RequestParams = field(default_factory=RequestParams)
    timeouts: Timeouts = field(default_factory=Timeouts)
    expect: float | None = None
    out: Path | None = Path("results")
    label: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    progress: bool | None = None
    served_by_header: str | None = None
    count_tokens: Any = None
    mock: dict[str, Any] | None = None      # the built-in mock's settings, when it was used
    server_probe: str = "auto"


def _live_line(state: dict[str, Any], monitor_latest: Any, unit: str, n_steps: int):
    """The ramp's live line, most telling first: the runner cuts it to the terminal's width,
    so what is cut at 80 columns is the least needed."""
    def line(session: Session, events_last_s: int) -> str:
        c = session.counters
        p95 = session.ttft_p95_recent()
        step = state.get("step")
        phase = state.get("phase") or ("hold" if state.get("hold_start") else "ramp-in")
        load = state.get("load", 0)
        where = (f"{state.get('users', 0)}/{load:g} users" if unit == "users"
                 else f"{load:g} req/s")
        parts = [f"step {0 if step is None else step + 1}/{n_steps} {phase} {where}"]
        m = monitor_latest()
        near = m is not None and (m.lag_p99_ms > LAG_P99_LIMIT_MS / 2
                                  or m.cpu_pct > CPU_LIMIT_PCT * 0.8)
        if near:
            parts.append("GEN NEAR LIMIT")
        parts += [f"TTFT p95 {console.fmt_ms(p95 * 1000 if p95 is not None else None)}",
                  f"~{events_last_s} tok/s", f"{c.failed} err", f"{c.in_flight} in flight",
                  f"{c.done} done"]
        if m is not None:
            parts.append(f"lag {m.lag_p99_ms:.1f}ms CPU {m.cpu_pct:.0f}%")
        return ", ".join(parts)
    return line


async def _ramp(r: RampRun, run_dir: Path | None) -> tuple[dict[str, Any], int]:
    plan = r.plan
    unit = "users" if plan.by == "users" else "req/s"
    max_users = int(max(plan.steps)) if plan.by == "users" else 256
    harness = Harness(r.target, r.params, r.timeouts, run_dir, max_connections=max_users + 16,
                      count_tokens=r.count_tokens, served_by_header=r.served_by_header,
                      progress=r.progress, server_probe=r.server_probe)
    state: dict[str, Any] = {}
    done_steps: list[StepResult] = []

    def on_step(step: StepResult) -> None:
        done_steps.append(step)
        if harness._show_progress() and sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K")
        print(console.ramp_row(step.as_dict()), flush=True)
        if step.monitor.get("overloaded"):
            print("warning: " + verdict_mod.generator_sentence(step.monitor), flush=True)
        if run_dir is not None:
            _write(partial=True)

    records_holder: dict[str, Any] = {}

    def _write(partial: bool) -> dict[str, Any]:
        session = records_holder.get("session")
        records = session.records if session is not None else []
        steps = [s.as_dict() for s in done_steps]
        verdict = verdict_mod.explain(steps, records, unit, harness.server_samples,
                                      planned=len(plan.steps))
        if harness.interrupted and isinstance(verdict, dict) \
                and all(s.get("held") for s in steps):
            # nothing broke because the ramp was stopped, not because every step held
            best = max((s["load"] for s in steps), default=0)
            verdict = {**verdict, "interrupted": True, "result": (
                f"Held {best:g} {unit} before the ramp was interrupted. Stopped after "
                f"{len(steps)} of {len(plan.steps)} steps, all held." if steps
                else "Interrupted before the first step finished.")}
        run = {
            "schema_version": SCHEMA_VERSION, "kind": "ramp",
            "status": "partial" if partial else "complete",
            "started_at": harness.t0_epoch, "t0_perf": harness.t0_perf,
            "labels": r.labels,
            "config": {
                "target": r.target.describe(),
                "ramp": {"by": plan.by, "steps": plan.steps, "ramp_in_s": plan.ramp_in_s,
                         "hold_s": plan.hold_s, "think_s": list(plan.think_s),
                         "thresholds": [t.text for t in plan.thresholds],
                         "keep_going": plan.keep_going, "seed": plan.seed,
                         "expect": r.expect},
                "request": {"stream": r.params.stream, "temperature": r.params.temperature,
                            "ignore_eos": r.params.ignore_eos,
                            "max_tokens_field": r.params.max_tokens_field,
                            "extra_body_keys": sorted(r.params.extra_body)},
                "timeouts": r.timeouts.__dict__,
                "mock": r.mock,
            },
            "workload": r.workload.describe(),
            "environment": environment(),
            "steps": steps,
            "verdict": verdict,
            "user_changes": state.get("user_changes", []),
            "output_length": checks.as_dict(records, r.params.ignore_eos, r.target.api),
            "not_streamed": checks.not_streamed(records, r.params.stream),
            "connection_resends": checks.resends(records),
            "server_probe": {"kind": harness.server_kind, "note": harness.server_note,
                             "samples": len(harness.server_samples)},
            "closed_loop_note": "Virtual users wait for each reply before thinking and sending "
                                "again, so when the server slows down they send less (closed loop)."
                                if plan.by == "users" else None,
        }
        if run_dir is not None:
            write_json(run_dir / "run.json", clean_nan(run))
        return run

    async def body(session: Session) -> list[StepResult]:
        records_holder["session"] = session
        return await run_ramp(session, r.workload.conversations, plan, harness.monitor, on_step,
                              state)

    print(console.ramp_header("Users" if plan.by == "users" else "Req/s"), flush=True)
    _, session = await harness.execute(
        body, _live_line(state, lambda: harness.monitor.latest, unit, len(plan.steps)))
    records_holder["session"] = session
    run = _write(partial=harness.interrupted)
    if run_dir is not None and session.records:
        t_end = max(rec.done for rec in session.records)
        rows = timeline_mod.build(session.records, harness.t0_perf, t_end,
                                  state.get("user_changes", []), harness.monitor.samples,
                                  run["steps"], server=harness.server_samples)
        with open(run_dir / "timeline.jsonl", "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(clean_nan(row)) + "\n")
    steps = run["steps"]
    held = max((s["load"] for s in steps if s["held"]), default=0)
    reached_top = bool(steps) and all(s["held"] for s in steps) and len(steps) == len(plan.steps)
    broke = next((s for s in steps if not s["held"]), None)
    # A ramp is meant to break at some step: that is its answer, exit 0. It fails as a gate when
    # it held fewer than --expect-users (1), or, without --expect-users, when its first step
    # did not hold: no load level met the thresholds (99, k6's code for failed thresholds).
    # Only a step the load generator's own lag could have broken is "not trustworthy" (4).
    code = EXIT_OK
    if harness.interrupted:
        code = EXIT_INTERRUPTED
    elif broke is not None and run["verdict"]["kind"] == "load_generator":
        code = EXIT_OVERLOADED
    elif r.expect is not None:
        if held < r.expect and not reached_top:
            code = EXIT_EXPECTATION
    elif steps and not steps[0]["held"]:
        code = EXIT_THRESHOLD
    return run, code


def execute(r: RampRun) -> int:
    run_dir = new_run_dir(r.out, "ramp", r.label) if r.out else None
    write_started(run_dir, "ramp", r.target,
                  {"ramp": {"by": r.plan.by, "steps": r.plan.steps, "hold_s": r.plan.hold_s}},
                  r.labels)
    try:
        run, code = asyncio.run(_ramp(r, run_dir))
    except PreflightError as exc:
        return report_failed(exc, run_dir, "ramp", r.target)
    print()
    print(console.verdict_text(run["verdict"]))
    if run.get("closed_loop_note") and run["verdict"]["kind"] in ("queuing", "saturation"):
        print("  Note: users wait for each reply, so as the server slowed down they also sent "
              "less; a real crowd may push harder.")
    for w in r.workload.warnings:
        print(f"note: {w}")
    for w in checks.notes(run):
        print(f"note: {w}")
    if code == EXIT_THRESHOLD:
        print(f"Thresholds failed at the first step: exit {EXIT_THRESHOLD}.")
    if run["status"] == "partial":
        print("PARTIAL RESULT: the ramp was interrupted; finished steps are kept.")
    if run_dir is not None:
        write_report(run_dir)
        print(f"Results: {run_dir}")
    return code
