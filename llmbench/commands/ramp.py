"""``llmbench ramp``: add users step by step until the thresholds break, and say why."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from llmbench.analysis import finish
from llmbench.errors import EXIT_INTERRUPTED
from llmbench.load.harness import PreflightError, TargetSpec
from llmbench.report import outcome as shown
from llmbench.results import writer
from llmbench.results.schema import Run
from llmbench.load.shapes import Ramp
from llmbench.load.shapes.search import SearchPacer
from llmbench.commands.common import agent_preflight
from llmbench.commands.common import Common, Done, dashboard_of, failed, stops_cleanly, write_started


@dataclass
class FindPlan:
    """``ramp --find``: search for the limit instead of stepping through a list. ``start``
    the first step (1 user), ``ceiling`` the most it may ask (--up-to; None: the search's
    default), ``sustain_s`` the confirmation hold (None: one more hold), ``budget_s`` the
    search's wall time cap."""

    start: float = 1.0
    ceiling: float | None = None
    sustain_s: float | None = None
    budget_s: float | None = None
    least: float = 1.0          # the lightest step (users): a scenario's floors added up

    def describe(self, pacer: SearchPacer | None = None) -> dict[str, Any]:
        p = pacer
        return {"start": self.start, "ceiling": p.top if p is not None else self.ceiling,
                "factor": p.factor if p is not None else 2.0,
                "sustain_s": p.sustain if p is not None else self.sustain_s,
                "budget_s": self.budget_s}


@dataclass
class RampPlan:
    common: Common
    shape: Ramp                        # steps, timing, think; its judge is set at the run
    thresholds: list[Any] = field(default_factory=list)
    stall_s: float = 1.0
    expect: float | None = None
    mock: dict[str, Any] | None = None      # the built-in mock's settings, when it was used
    repeat: dict[str, Any] | None = None    # --repeat: which repeat this is, and those done
    find: FindPlan | None = None            # --find: the search, instead of the fixed steps
    # --scenario: the traffic classes (commands.scenario); ``shape`` is then their ClassRamp
    scenario: Any = None
    # the rows the steps table took on the terminal (its header, rows and plan lines), so the
    # closing block is cut to the rows left under it (report.screen)
    table_rows: int = 0
    reset: Any = None                       # --reset-cache: commands.reset_spec.StepResets


RampDone = Done     # what a finished ramp leaves (``sweep`` and the API read it)


def measure(r: RampPlan, run_dir: Path | None) -> tuple[Run, int]:
    c, shape = r.common, r.shape
    finish.ramp_judges(r)
    if r.scenario is not None:
        targets = r.scenario.targets(c.server_probe)
    else:
        targets = [TargetSpec(c.target, server_probe=c.server_probe,
                              salt=c.workload.salt_for("main"),
                              preflight_extra=agent_preflight(c.target, c.params,
                                                              c.workload.conversations))]
    if r.find is not None:
        shape.pacer = finish.search_pacer(r.find, shape)
        shape.steps = []
    harness = c.harness(run_dir, shown.ramp_live_line(shape.unit, None if r.find is not None
                                            else len(shape.steps)), shape=shape)
    shape.pace()                  # the fixed list's pacer, made now; a search's is set above
    table = shown.RampTable(r, harness, run_dir, dashboard_of(harness), finish.unit_of(r))
    shape.on_plan, shape.on_step = table.on_plan, table.on_step
    shape.before_step = r.reset.before_step if r.reset is not None else None
    if r.scenario is not None and shape.isolate:
        shape.on_isolated = table.on_isolated
    table.begin(c.target.api)
    before = c.floor("before")          # the network's round trip (client/floor.py)
    table.floor = finish.network_of([before])
    between: list[Any] = []             # the network floor after each step (client/floor.py)
    measuring: list[Any] = []
    if before is not None:              # measured off the loop while the next step starts
        table.after_step = lambda step: measuring.append(
            c.floor_later(f"after step {step.index}", between))
    outcome = harness.run(shape, targets)
    after = c.floor("after") if before is not None else None
    for t in measuring:
        t.join(12.0)                    # each of its steps has a 5 s deadline
    network = finish.network_of([before, *between, after])
    run = writer.final(finish.ramp_of(r, outcome, network), run_dir, outcome.write_error)
    writer.timeline(run_dir, finish.timeline, outcome, run.steps)
    # the one rule the command line exits with (results.schema.Run.exit_code, ramp_code)
    return run, run.exit_code


def _combine(runs: list[tuple[RampPlan, Run, int]], planned: int,
             run_dir: Path | None) -> tuple[Run, int]:
    """One run.json for all repeats: the steps, verdict and timeline of the median repeat (so
    ``report`` and ``compare`` read it as any ramp), and every repeat's steps under "repeats"."""
    doc, rep = finish.repeats(runs, planned, EXIT_INTERRUPTED)
    if run_dir is not None:
        doc.save(run_dir)
        chosen = run_dir / f"timeline-repeat{rep + 1}.jsonl"
        if chosen.exists():
            (run_dir / "timeline.jsonl").write_bytes(chosen.read_bytes())
    return doc, doc.exit_code


@stops_cleanly("ramp")
def perform(r: RampPlan, repeat: int = 1,
            next_plan: Callable[[int], RampPlan] | None = None) -> RampDone:
    """The ramp command: ``repeat`` whole ramps into one run folder (``next_plan(k)`` builds
    repeat k with fresh conversations and seeds), printed and reported as ``ramp`` does."""
    c = r.common
    run_dir = c.run_dir("ramp")
    write_started(run_dir, "ramp", c.target,
                  {"ramp": {"by": r.shape.by, "steps": r.shape.steps, "hold_s": r.shape.hold_s}},
                  c.labels, c.replay)
    runs: list[tuple[RampPlan, Run, int]] = []
    for k in range(repeat):
        plan = r if k == 0 or next_plan is None else next_plan(k)
        if repeat > 1:
            plan.repeat = {"index": k + 1, "of": repeat,
                           "held_so_far": [finish.run_held(x) for _, x, _ in runs]}
            print(f"\n-- repeat {k + 1} of {repeat} (seed {plan.shape.seed}) --", flush=True)
        try:
            run, code = measure(plan, run_dir)
        except PreflightError as exc:
            if not runs:
                return failed(exc, run_dir, "ramp", c.target)
            print(f"error: repeat {k + 1}: {c.target.redact(str(exc))}; keeping the "
                  f"{len(runs)} repeat(s) done", file=sys.stderr)
            break
        runs.append((plan, run, code))
        if repeat > 1 and run_dir is not None and (run_dir / "timeline.jsonl").exists():
            os.replace(run_dir / "timeline.jsonl", run_dir / f"timeline-repeat{k + 1}.jsonl")
        if code == EXIT_INTERRUPTED:
            break
    if repeat > 1:
        run, code = _combine(runs, repeat, run_dir)
    else:
        _, run, code = runs[0]
    print()
    assert run.verdict is not None
    head = shown.ramp_head(run, r.shape.unit, finish.unit_of(r), repeat, code)
    warnings = r.scenario.warnings if r.scenario is not None else c.workload.warnings
    shown.print_closing(run, warnings, run.status == "partial",
                        shown.incomplete_line(run, code)
                        or "PARTIAL RESULT: the ramp was interrupted; finished steps are kept.",
                        run_dir, head=head, verbose=c.verbose, mlflow=c.mlflow,
                        # the last repeat's table is the one on screen
                        rows_used=runs[-1][0].table_rows + 1 + _board_row())
    return RampDone(run, code, run_dir)


def _board_row() -> int:
    """The row the live board leaves blank under the table when it clears itself from a
    terminal (rich's transient Live ends on a new line): counted, so the answer still fits."""
    try:
        return 1 if sys.stderr.isatty() else 0
    except (AttributeError, ValueError):
        return 0
