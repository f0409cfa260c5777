"""``llmbench probe``: preflight both paths, alternate slices, write the run folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmbench.analysis import finish
from llmbench.load.harness import PreflightError, TargetSpec
from llmbench.report import outcome as shown
from llmbench.results import writer
from llmbench.results.schema import Run
from llmbench.load.shapes.router import RouterAB
from llmbench.client.target import Target
from llmbench.commands.common import Common, Done, dashboard_of, failed, stops_cleanly, write_started


@dataclass
class ProbePlan:
    common: Common                  # common.target is the router
    direct: Target
    shape: RouterAB                 # steps, slices, rounds; its judge is set at the run
    bootstrap: int = 1000


def targets(plan: ProbePlan) -> list[TargetSpec]:
    c = plan.common
    probe = c.server_probe
    return [TargetSpec(c.target, "router", path="router", run_id="rt",
                       server_probe="off" if probe == "off" else "auto",
                       server_file="router_server.jsonl", strict=True, who="the router",
                       flag="--router", salt=c.workload.salt_for("router"),
                       hints={502: " (the router cannot reach its backend)",
                              503: " (the router has no healthy backend)",
                              404: " (model name not known there? use --direct-model if the "
                                   "names differ)"}),
            TargetSpec(plan.direct, "direct", path="direct", run_id="dr", server_probe=probe,
                       server_file="server.jsonl", strict=True, who="the direct backend",
                       flag="--direct", salt=c.workload.salt_for("direct"),
                       hints={404: " (model name not known there? use --direct-model if the "
                                   "names differ)"})]


def measure(plan: ProbePlan, run_dir: Path | None) -> tuple[Run, bool]:
    c, shape = plan.common, plan.shape
    harness = c.harness(run_dir, shown.probe_live_line(len(shape.steps)), shape=shape)
    shape.judge = finish.probe_judge(plan)
    shape.on_step = shown.probe_on_step(harness, dashboard_of(harness))
    print(shown.PROBE_HEADER, flush=True)
    outcome = harness.run(shape, targets(plan))
    run = finish.probe(plan, outcome)
    writer.whole(run, run_dir)
    return run, outcome.interrupted


@stops_cleanly("probe")
def perform(plan: ProbePlan) -> Done:
    """The probe command: its run.json, exit code and folder."""
    c = plan.common
    run_dir = c.run_dir("probe")
    write_started(run_dir, "probe", c.target,
                  {"router": c.target.describe(), "direct": plan.direct.describe(),
                   "steps": plan.shape.steps}, c.labels, c.replay)
    try:
        run, interrupted = measure(plan, run_dir)
    except PreflightError as exc:
        return failed(exc, run_dir, "probe", c.target)
    shown.show_probe(run)
    # interrupted: 130; a lost worker's users are missing from the slices after it died, never
    # a pass (Run.exit_code, the one rule)
    code = run.exit_code
    shown.print_closing(run, c.workload.warnings, run.status == "partial",
                        shown.incomplete_line(run, code)
                        or "PARTIAL RESULT: the probe was interrupted; finished steps are kept.",
                        run_dir)
    return Done(run, code, run_dir)


from typing import TYPE_CHECKING, Any  # noqa: E402  (the spec, for the functions below)

if TYPE_CHECKING:
    from llmbench.specs.probe import ProbeSpec


def plan_of(spec: ProbeSpec, progress: bool | None = None) -> Any:
    """The probe's plan (the workload is counted against the backend)."""
    import dataclasses
    from llmbench.specs.ramp import steps_of
    from llmbench.commands.spec import check_ray, make_common, prepare, replay_of, with_ray
    from llmbench.client.target import make_target as make
    ray_address = check_ray(spec.ray)
    prepare(spec)
    way = spec.target_options()
    rt = make(spec.router, spec.model, spec.api, spec.api_key, spec.header, **way)
    direct = spec.direct
    if direct is None:              # the backend on this machine (commands.local)
        from llmbench.commands.local import local_server
        direct = local_server(spec.direct_model or spec.model, True, "--direct").url
    dt = make(direct, spec.direct_model or spec.model, spec.api, spec.api_key,
              spec.header, **way)
    # the workload is counted against the backend (its /tokenize), sent through both
    common = make_common(dt, spec, 4000, multi_turn=True, progress=progress,
                         replay=replay_of(spec), targets=("router", "direct"))
    # the backend's machine is sampled: where the compute is
    common = with_ray(dataclasses.replace(
        common, target=rt, telemetry=spec.telemetry_spec(dt, spec.server_probe)),
        ray_address)
    steps = steps_of(spec.users, None, None, None, "users")  # type: ignore[arg-type]
    shape = RouterAB(common.workload.conversations, [int(s) for s in steps],
                     slice_s=spec.slice_s, rounds=spec.rounds, think_s=spec.think or (0.0, 0.0),
                     seed=spec.seed)
    return ProbePlan(common, dt, shape)


def perform_spec(spec: ProbeSpec, progress: bool | None = None) -> Any:
    """The probe's plan, run (a Done)."""
    return perform(plan_of(spec, progress))
