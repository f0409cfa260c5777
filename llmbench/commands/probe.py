"""``llmbench probe``: preflight both paths, alternate slices, write the run folder."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmbench.analysis import finish
from llmbench.load.harness import PreflightError, TargetSpec
from llmbench.report import outcome as shown, wiring
from llmbench.results.writer import RunFolder
from llmbench.load.shapes.router import RouterAB
from llmbench.client.target import Target
from llmbench.commands.common import Common, Done, failed, folder_of, interrupted


@dataclass
class ProbePlan:
    """A router probe ready to run: the router, a backend and the steps."""
    common: Common                  # common.target is the router
    direct: Target
    shape: RouterAB                 # steps, slices, rounds; its judge is set at the run
    bootstrap: int = 1000
    targets: list[TargetSpec] = field(default_factory=list)     # the router, then direct
    folder: RunFolder | None = None

    def __post_init__(self) -> None:
        c = self.common
        self.targets = self.targets or targets(c, self.direct)
        self.folder = self.folder or folder_of(c, "probe", {
            "router": c.target.describe(), "direct": self.direct.describe(),
            "steps": self.shape.steps})


def targets(c: Common, direct: Target) -> list[TargetSpec]:
    probe = c.server_probe
    return [TargetSpec(c.target, "router", path="router", run_id="rt",
                       server_probe="off" if probe == "off" else "auto",
                       server_file="router_server.jsonl", strict=True, who="the router",
                       flag="--router", salt=c.workload.salt_for("router"),
                       hints={502: " (the router cannot reach its backend)",
                              503: " (the router has no healthy backend)",
                              404: " (model name not known there? use --direct-model if the "
                                   "names differ)"}),
            TargetSpec(direct, "direct", path="direct", run_id="dr", server_probe=probe,
                       server_file="server.jsonl", strict=True, who="the direct backend",
                       flag="--direct", salt=c.workload.salt_for("direct"),
                       hints={404: " (model name not known there? use --direct-model if the "
                                   "names differ)"})]


def perform(plan: ProbePlan) -> Done:
    """The probe command: its run.json, exit code and folder (left as results.writer.RunFolder
    promises, however it ends)."""
    assert plan.folder is not None
    with plan.folder as folder:
        try:
            outcome = wiring.measure_probe(plan, folder.path)
        except PreflightError as exc:
            return failed(exc, folder, plan.common.target)
        run = finish.probe(plan, outcome)
        folder.whole(run)
        return Done(run, shown.close_probe(plan, run, folder.path), folder.path)
    return interrupted(folder)


from typing import TYPE_CHECKING, Any  # noqa: E402  (the spec, for the functions below)

if TYPE_CHECKING:
    from llmbench.specs.probe import ProbeSpec


def plan_of(spec: ProbeSpec, progress: bool | None = None) -> Any:
    """The probe's plan: its workload counted by the backend (its /tokenize), sent both ways."""
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
