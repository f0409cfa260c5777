"""``llmbench run``: one load level, vLLM-style numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmbench.analysis import finish
from llmbench.load.harness import PreflightError, TargetSpec
from llmbench.report import outcome as shown, wiring
from llmbench.results.writer import RunFolder
from llmbench.load.shapes import ClosedLoop, OpenLoop
from llmbench.load.shapes.trace import TraceReplay
from llmbench.commands.common import (Common, Done, agent_preflight, failed, folder_of,
                                      interrupted)

if TYPE_CHECKING:
    from llmbench.specs.run import RunSpec


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
    """A run ready to start: its shape, gates, targets and folder."""
    common: Common
    shape: ClosedLoop | OpenLoop | TraceReplay
    gates: Gates = field(default_factory=Gates)
    vllm: VllmResult | None = None       # None: no vLLM result file
    targets: list[TargetSpec] = field(default_factory=list)     # the one server it loads
    folder: RunFolder | None = None

    def __post_init__(self) -> None:
        c = self.common
        if not self.targets:
            self.targets = [TargetSpec(c.target, server_probe=c.server_probe,
                                       salt=c.workload.salt_for("main"),
                                       preflight_extra=agent_preflight(c))]
        if self.folder is None:
            load = finish.load_config(self.shape)
            self.folder = folder_of(c, "run", {"load": {k: load[k] for k in (
                "concurrency", "rate", "max_concurrency", "requests", "duration_s", "warmup")}})


def perform(plan: RunPlan) -> Done:
    """The run command: measure, finish, save, print and report; its run.json, exit code and
    folder (left as results.writer.RunFolder promises, however it ends)."""
    assert plan.folder is not None
    with plan.folder as folder:
        try:
            m = wiring.measure_run(plan, folder.path)
        except PreflightError as exc:
            return failed(exc, folder, plan.common.target)
        run = folder.final(finish.run(plan, m.outcome, m.floors, m.prefix),
                           m.outcome.write_error, finish.timeline, m.outcome)
        return Done(run, shown.close_run(plan, run, m.outcome.records, m.texts, folder.path),
                    folder.path)
    return interrupted(folder)


# -- run --scenario: the crowd of traffic classes at one load -----------------------------------
@dataclass
class ClassRunPlan:
    """``run --scenario``: the scenario's classes (commands.scenario's plan) as one step of the
    ramp's class crowd (``shape``: a ClassRamp of one load, no ramp-in, held for the run's
    duration), each class judged on its own requests by its own thresholds (the command's
    for a class with none)."""

    common: Common
    shape: Any                           # load.shapes.classes.ClassRamp
    scenario: Any                        # commands.scenario.ScenarioPlan
    # the percentiles shown and the stall gap (each class's thresholds are the scenario's)
    gates: Gates = field(default_factory=Gates)
    ramp: Any = None            # the crowd as a ramp of one step, judged as the ramp does
    targets: list[TargetSpec] = field(default_factory=list)
    folder: RunFolder | None = None

    def __post_init__(self) -> None:
        from llmbench.commands.ramp import RampPlan
        c = self.common
        self.ramp = RampPlan(c, self.shape, [], stall_s=self.gates.stall_s,
                             scenario=self.scenario)
        self.targets = self.scenario.targets(c.server_probe)
        load = finish.class_config(self)
        self.folder = folder_of(c, "run", {"load": {k: load[k] for k in (
            "concurrency", "rate", "duration_s")}})


def perform_classes(plan: ClassRunPlan) -> Done:
    """``run --scenario``: measure, finish, save, print (the whole crowd's numbers, then each
    class's row and every class's thresholds), report."""
    assert plan.folder is not None
    with plan.folder as folder:
        print("Traffic classes: " + ", ".join(
            f"{cp.name} ({cp.traffic.load_text()})" for cp in plan.scenario.classes)
            + f"; held {plan.shape.hold_s:g} s", flush=True)
        try:
            outcome = wiring.measure_classes(plan, folder.path)
        except PreflightError as exc:
            return failed(exc, folder, plan.common.target)
        run = folder.final(finish.classes_run(plan, outcome), outcome.write_error,
                           finish.timeline, outcome, plan.shape.results)
        return Done(run, shown.close_classes(plan, run, folder.path), folder.path)
    return interrupted(folder)


def perform_spec(spec: RunSpec, progress: bool | None = None) -> Any:
    """The run (a Done); no --url: the server on this machine, else the built-in mock."""
    from llmbench.specs.run import DEMO_RUN_S
    from llmbench.commands.spec import (MaybeMock, check_ray, make_common, make_target, prepare,
                                        replay_of, say, with_ray)
    from llmbench.commands.local import with_local_server
    spec = with_local_server(spec)
    if spec.scenario is not None:
        return _perform_spec_classes(spec, progress)
    ray_address = check_ray(spec.ray)
    spec._check_result_dir()
    prepare(spec)
    requests, duration_s = spec.size()
    if requests is None and duration_s == DEMO_RUN_S and spec.duration is None:
        # the demo on the built-in mock: a minute, not 200 requests one at a time (~4 min)
        say(f"No --url, --requests or --duration: a {DEMO_RUN_S:g} s demo, one "
            "request at a time against the built-in mock (--requests N or "
            "--duration to change it)")
    gates = Gates(tuple(spec.percentile_metrics), tuple(spec.metric_percentiles),  # type: ignore[arg-type]
                  spec.goodput or None, thresholds=list(spec.threshold or []))  # type: ignore[arg-type]
    vllm = (VllmResult(spec.save_detailed, spec.append_result,
                       Path(spec.result_dir) if spec.result_dir is not None else None,
                       spec.result_filename, spec.vllm_metadata())
            if spec.save_result or spec.append_result else None)
    replay = replay_of(spec)
    count = (requests or 1000) + spec.warmup
    think_s = spec.think or (0.0, 0.0)
    with MaybeMock(spec.url, demo=spec.demo) as (url_, model_):
        tgt = make_target(spec, url_, spec.model or model_)
        if spec.trace is not None:
            common, shape = _trace_plan(tgt, spec, replay)
        else:
            common = make_common(tgt, spec, count, replay=replay)
            convs = common.workload.conversations
            shape = (OpenLoop(convs, spec.rate, requests, duration_s, spec.burstiness,
                              spec.arrival, spec.max_concurrency, spec.warmup, think_s,
                              spec.seed)
                     if spec.rate is not None else
                     ClosedLoop(convs, spec.concurrency or 1, requests, duration_s,
                                spec.warmup, think_s, spec.seed))
        common = with_ray(_watched(common, spec, tgt, progress), ray_address)
        return perform(RunPlan(common, shape, gates, vllm))


def _watched(common: Common, spec: Any, tgt: Any, progress: bool | None) -> Common:
    """The run's common part with the server's machine sampled (what the server is, issue 39)
    and --progress as the caller asked."""
    import dataclasses
    common = dataclasses.replace(common, telemetry=spec.telemetry_spec(tgt, spec.server_probe))
    if progress is not None:
        common = dataclasses.replace(
            common, watch=dataclasses.replace(common.watch, progress=progress))
    return common


def _perform_spec_classes(spec: RunSpec, progress: bool | None) -> Any:
    """run --scenario: its ``ClassRunPlan``, built and performed."""
    import dataclasses
    from llmbench.specs.options import UsageError
    from llmbench.specs.run import DEMO_RUN_S
    from llmbench.commands.spec import (MaybeMock, check_ray, make_common, make_target, prepare,
                                        replay_of, say)
    from llmbench.specs.thresholds import parse_threshold
    from llmbench.commands import scenario as sc
    from llmbench.commands.ramp import plan_classes
    from llmbench.load.shapes import Ramp
    ray_address = check_ray(spec.ray)
    if ray_address is not None:
        raise UsageError("--scenario: traffic classes run in one process; drop --ray")
    prepare(spec)
    scenario = sc.load(spec, spec.scenario)
    for tc in scenario.classes:   # every class's options, files, thresholds: before any build
        sc.check_class(spec, scenario, tc, parse_threshold)
    by, load = spec.scenario_load(scenario)
    hold_s = spec.duration if spec.duration is not None else DEMO_RUN_S
    if spec.duration is None:
        say(f"--scenario with no --duration: the crowd is held {hold_s:g} s")
    think_s = spec.think or (0.0, 0.0)
    replay = replay_of(spec)
    with MaybeMock(spec.url, demo=spec.demo) as (url_, model_):
        tgt = make_target(spec, url_, spec.model or model_)
        common = _watched(make_common(tgt, spec, 1, replay=replay), spec, tgt, progress)
        sp = plan_classes(spec, scenario, tgt, common, think_s, list(spec.threshold or []),
                          progress=progress, steps=False)
        first = sp.classes[0].common
        common = dataclasses.replace(common, workload=first.workload)
        base = Ramp(first.workload.conversations, [load], by=by, ramp_in_s=0.0,
                    hold_s=hold_s, think_s=think_s, burstiness=spec.burstiness,
                    drain_s=max(spec.timeout_first_token, 30.0), seed=spec.seed)
        return perform_classes(ClassRunPlan(common, sp.shape(base), sp, Gates(
            tuple(spec.percentile_metrics), tuple(spec.metric_percentiles))))  # type: ignore[arg-type]


def _trace_plan(tgt: Any, spec: RunSpec, replay: dict[str, Any]) -> tuple[Any, Any]:
    """run --trace: the plan's common part with the trace's workload, and the replay shape."""
    import dataclasses
    from llmbench.commands.spec import make_common, trace_of
    from llmbench.workload.traces import PrefixAim
    aim = None
    w = spec
    if w.prefix_hit_ratio is not None:
        aim = PrefixAim(w.prefix_hit_ratio, w.cache_block_tokens, w.prefixes)
        w = dataclasses.replace(w, prefix_hit_ratio=None)   # the trace, not a synthetic set
    common = make_common(tgt, w, 1, replay=replay)  # groups checked, params built
    tr, wl = trace_of(w, tgt, common, w.seed, spec.trace_window, spec.requests, aim)
    common = dataclasses.replace(common, workload=wl)
    return common, TraceReplay(tr.items, spec.trace_speed, tr.describe(), w.seed)
