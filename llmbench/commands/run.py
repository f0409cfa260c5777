"""``llmbench run``: one load level, vLLM-style numbers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmbench.analysis import finish
from llmbench.errors import EXIT_THRESHOLD
from llmbench.load.harness import LiveView, PreflightError, TargetSpec
from llmbench.report import outcome as shown, vllm_json
from llmbench.results import writer
from llmbench.results.schema import Run
from llmbench.load.shapes import ClosedLoop, OpenLoop
from llmbench.load.shapes.trace import TraceReplay
from llmbench.commands import prefix
from llmbench.commands.common import agent_preflight
from llmbench.commands.common import Common, Done, failed, stops_cleanly, write_started


@dataclass
class VllmResult:
    """vLLM's --save-result file: where, and with what."""

    detailed: bool = False               # ... with the per-request arrays (and reply texts)
    append: bool = False
    result_dir: Path | None = None
    filename: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass
class Gates:
    """What the summary is measured and judged by."""

    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    goodput_slo_ms: dict[str, float] | None = None
    stall_s: float = 1.0
    thresholds: list[Any] = field(default_factory=list)     # slo.Threshold, checked at the end


@dataclass
class RunPlan:
    common: Common
    shape: ClosedLoop | OpenLoop | TraceReplay
    gates: Gates = field(default_factory=Gates)
    vllm: VllmResult | None = None       # None: no vLLM result file


def _live(v: LiveView) -> str:
    c = v.counters
    return (f"in flight {c.in_flight:4d}  done {c.done:6d}  failed {c.failed:4d}  "
            f"~{v.events_last_s:5d} tok/s")


def measure(plan: RunPlan, run_dir: Path | None) -> tuple[Run, int, Any]:
    """Run the shape; the Run written (run.json), its exit code and the outcome."""
    c = plan.common
    harness = c.harness(run_dir, _live, keep_texts=plan.vllm is not None and plan.vllm.detailed,
                        shape=plan.shape)
    prefix_before = warm_failed = None
    if c.workload.prefix is not None:          # --prefix-hit-ratio: warm the cache, then count
        warm_failed = prefix.warm_up(c)
        prefix_before = prefix.scrape_counters(c)[1]
    before = c.floor("before")          # the network's round trip (client/floor.py)
    outcome = harness.run(plan.shape, [TargetSpec(
        c.target, server_probe=c.server_probe, salt=c.workload.salt_for("main"),
        preflight_extra=agent_preflight(c.target, c.params, c.workload.conversations))])
    floors = [before, c.floor("after")] if before is not None else None
    counted = ((prefix_before, prefix.scrape_counters(c), warm_failed)
               if c.workload.prefix is not None else None)
    run = writer.final(finish.run(plan, outcome, floors, counted), run_dir, outcome.write_error)
    writer.timeline(run_dir, finish.timeline, outcome)
    # the one rule the command line exits with (results.schema.Run.exit_code)
    return run, run.exit_code, (outcome, harness.texts)


def partial_line(run: Run, what: str, code: int) -> str:
    return shown.incomplete_line(run, code) or (
        f"PARTIAL RESULT: the {what} was interrupted; the numbers cover what finished.")


def _vllm_result(plan: RunPlan, run: Run, records: list, texts: dict[str, str]
                 ) -> tuple[Path, dict[str, Any]]:
    v = plan.vllm
    assert v is not None
    c, shape = plan.common, plan.shape
    date = time.strftime("%Y%m%d-%H%M%S")
    label = c.labels.get("name")
    rate = shape.rate if isinstance(shape, OpenLoop) else None      # closed loop: vLLM's "inf"
    max_conc = (shape.max_concurrency if isinstance(shape, OpenLoop)
                else getattr(shape, "concurrency", None))
    assert run.summary is not None
    result = vllm_json.build(
        run.summary, records, backend=c.target.api, model_id=c.target.model,
        tokenizer_id=c.workload.tokenizer, label=label, request_rate=rate,
        burstiness=getattr(shape, "burstiness", 1.0), max_concurrency=max_conc,
        percentile_metrics=plan.gates.percentile_metrics,
        metric_percentiles=plan.gates.metric_percentiles,
        goodput=bool(plan.gates.goodput_slo_ms), detailed=v.detailed, metadata=v.metadata,
        texts=texts, date=date)
    name = v.filename or vllm_json.default_file_name(label, c.target.api, rate, max_conc,
                                                     c.target.model, date)
    path = Path(v.result_dir) / name if v.result_dir else Path(name)
    return path, result


@stops_cleanly("run")
def perform(plan: RunPlan) -> Done:
    """The run command: measure, print, report; its run.json, exit code and folder."""
    c = plan.common
    run_dir = c.run_dir("run")
    load = finish.load_config(plan.shape)
    write_started(run_dir, "run", c.target,
                  {"load": {k: load[k] for k in ("concurrency", "rate", "max_concurrency",
                                                 "requests", "duration_s", "warmup")}}, c.labels,
                  c.replay)
    try:
        run, code, (outcome, texts) = measure(plan, run_dir)
    except PreflightError as exc:
        return failed(exc, run_dir, "run", c.target)
    shape = plan.shape
    shown.show_run(run, plan.gates.percentile_metrics, plan.gates.metric_percentiles,
                   (shape.max_concurrency if isinstance(shape, OpenLoop) else None)
                   or load["concurrency"], load["rate"])
    if plan.vllm is None:
        # the report reads the run folder: a long run's records need not sit beside it
        outcome.records.clear()
    shown.print_closing(run, c.workload.warnings, run.status == "partial",
                        partial_line(run, "run", code),
                        run_dir, mlflow=c.mlflow)
    if plan.vllm is not None:
        path, result = _vllm_result(plan, run, outcome.records, texts)
        vllm_json.write(path, result, plan.vllm.append)
        print(f"vLLM result JSON: {path}" + (" (appended)" if plan.vllm.append else ""))
    if code == EXIT_THRESHOLD:
        print(f"Thresholds failed: exit {EXIT_THRESHOLD}.")
    return Done(run, code, run_dir)


# -- run --scenario: the crowd of traffic classes at one load -----------------------------------
@dataclass
class ClassRunPlan:
    """``run --scenario``: the scenario's classes (commands.scenario's plan) as one step of the
    ramp's class crowd (``shape``: a ClassRamp of one load, no ramp-in, held for the run's
    duration), each class judged on its own requests by its own thresholds (the command's
    ``thresholds`` for a class with none)."""

    common: Common
    shape: Any                           # load.shapes.classes.ClassRamp
    scenario: Any                        # commands.scenario.ScenarioPlan
    thresholds: list[Any] = field(default_factory=list)
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    stall_s: float = 1.0


def measure_classes(plan: ClassRunPlan, run_dir: Path | None) -> tuple[Run, int]:
    """The crowd held once, judged as the ramp judges a step of classes (commands.ramp's class
    judges): the whole crowd's summary, each class's, every class's checks."""
    from llmbench.commands.ramp import RampPlan
    c, shape = plan.common, plan.shape
    finish.ramp_judges(RampPlan(c, shape, [], stall_s=plan.stall_s, scenario=plan.scenario))
    harness = c.harness(run_dir, _live, shape=shape)
    outcome = harness.run(shape, plan.scenario.targets(c.server_probe))
    run = writer.final(finish.classes_run(plan, outcome), run_dir, outcome.write_error)
    writer.timeline(run_dir, finish.timeline, outcome, shape.results)
    return run, run.exit_code


@stops_cleanly("run")
def perform_classes(plan: ClassRunPlan) -> Done:
    """``run --scenario``: measure, print (the whole crowd's numbers, then each class's row
    and every class's thresholds), report."""
    c = plan.common
    run_dir = c.run_dir("run")
    load = finish.class_config(plan)
    write_started(run_dir, "run", c.target,
                  {"load": {k: load[k] for k in ("concurrency", "rate", "duration_s")}},
                  c.labels, c.replay)
    print("Traffic classes: " + ", ".join(
        f"{cp.name} ({cp.traffic.load_text()})" for cp in plan.scenario.classes)
        + f"; held {plan.shape.hold_s:g} s", flush=True)
    try:
        run, code = measure_classes(plan, run_dir)
    except PreflightError as exc:
        return failed(exc, run_dir, "run", c.target)
    shown.show_classes_run(run, plan.percentile_metrics, plan.metric_percentiles, load,
                           plan.shape, c.target.api)
    shown.print_closing(run, plan.scenario.warnings, run.status == "partial",
                        partial_line(run, "run", code), run_dir)
    if code == EXIT_THRESHOLD:
        print(f"Thresholds failed: exit {EXIT_THRESHOLD}.")
    return Done(run, code, run_dir)
