"""``llmbench ramp``: add users step by step until the thresholds break, and say why."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from llmbench.analysis import finish
from llmbench.load.harness import PreflightError, TargetSpec
from llmbench.report import outcome as shown, wiring
from llmbench.results.writer import RunFolder
from llmbench.load.shapes import Ramp
from llmbench.load.shapes.search import SearchPacer
from llmbench.commands.common import (Common, Done, agent_preflight, failed, folder_of,
                                      interrupted)

if TYPE_CHECKING:
    from llmbench.specs.ramp import RampOpts, RampSpec


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
    """A ramp ready to run: its shape, thresholds and where it writes."""
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
    table_rows: int = 0                     # the terminal rows its table took (RampTable)
    reset: Any = None                       # --reset-cache: specs.reset.StepResets
    targets: list[TargetSpec] = field(default_factory=list)    # set by ``planned``
    folder: RunFolder | None = None                            # set by ``planned``


def planned(r: RampPlan) -> RampPlan:
    """The plan made whole once its shape is final: the servers it loads, its run folder."""
    c = r.common
    r.targets = (r.scenario.targets(c.server_probe) if r.scenario is not None else
                 [TargetSpec(c.target, server_probe=c.server_probe,
                             salt=c.workload.salt_for("main"), preflight_extra=agent_preflight(c))])
    r.folder = folder_of(c, "ramp", {"ramp": {"by": r.shape.by, "steps": r.shape.steps,
                                              "hold_s": r.shape.hold_s}})
    return r


def perform(r: RampPlan, repeat: int = 1,
            next_plan: Callable[[int], RampPlan] | None = None) -> Done:
    """The ramp command: ``repeat`` whole ramps into one run folder (``next_plan(k)`` builds
    repeat k with fresh conversations and seeds), printed and reported as ``ramp`` does; the
    folder is left as results.writer.RunFolder promises, however it ends."""
    assert r.folder is not None
    with r.folder as folder:
        plans: list[RampPlan] = []          # each repeat's, its Run in folder.runs
        for k in range(repeat):
            plan = r if k == 0 or next_plan is None else next_plan(k)
            if repeat > 1:
                plan.repeat = {"index": k + 1, "of": repeat,
                               "held_so_far": [finish.run_held(x) for x in folder.runs]}
                print(f"\n-- repeat {k + 1} of {repeat} (seed {plan.shape.seed}) --", flush=True)
            try:
                outcome, network = wiring.measure_ramp(plan, folder.path)
            except PreflightError as exc:
                if not plans:
                    return failed(exc, folder, r.common.target)
                print(f"error: repeat {k + 1}: {r.common.target.redact(str(exc))}; keeping "
                      f"the {len(plans)} repeat(s) done", file=sys.stderr)
                break
            run = folder.final(finish.ramp(plan, outcome, network), outcome.write_error,
                               finish.timeline, outcome, plan.shape.results)
            plans.append(plan)
            if repeat > 1 and folder.path is not None and \
                    (folder.path / "timeline.jsonl").exists():
                os.replace(folder.path / "timeline.jsonl",
                           folder.path / f"timeline-repeat{k + 1}.jsonl")
            if run.state.interrupted and run.state.status != "failed":
                break           # Ctrl-C: the repeats done are the result (exit 130)
        run = folder.combined(*finish.repeats(list(zip(plans, folder.runs)), repeat)) \
            if repeat > 1 else folder.runs[0]
        return Done(run, shown.close_ramp(plans[-1], run, repeat, folder.path),
                        folder.path)
    return interrupted(folder)


def perform_spec(spec: RampSpec, progress: bool | None = None) -> Any:
    """The ramp (a Done); no --url: the server on this machine, else the built-in mock."""
    from llmbench.commands.local import with_local_server
    from llmbench.commands.spec import MaybeMock
    prepared(spec)
    spec = with_local_server(spec)
    with MaybeMock(spec.url, demo=spec.demo) as (url_, model_):
        return perform_at(spec, url_, spec.model or model_,
                          mock=None if spec.url else {"profile": "ollama"}, progress=progress)


def find_plan(spec: RampOpts) -> Any:
    """The search's plan (ramp.FindPlan), or None for the fixed steps."""
    if not spec.searching():
        return None
    return FindPlan(start=spec.start or 1.0, ceiling=spec.up_to,
                    sustain_s=spec.sustain, budget_s=spec.budget)  # type: ignore[arg-type]


def ramp_plan(opts: RampOpts, url: str, model: str | None, mock: dict[str, Any] | None = None,
              seed_offset: int = 0, out: Path | None = None, labels: dict[str, str] | None = None,
              progress: bool | None = None, server_pid: int | None = None) -> Any:
    """The ramp's plan against ``url``: repeat ``seed_offset`` (fresh conversations);
    ``server_pid``: the server's process when sweep --serve started it."""
    import dataclasses
    from llmbench.specs.ramp import RampSpec
    from llmbench.specs.reset import step_resets
    from llmbench.commands.spec import (check_ray, make_common, make_target, replay_of,
                                        warn_short_hold, with_ray)
    spec: Any = opts.resolved()
    tgt = make_target(spec, url, model)
    wl = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    replay = replay_of(opts, only=[f.name for f in dataclasses.fields(RampSpec)])
    if url != opts.url:  # type: ignore[attr-defined]
        # a sweep's ramp (or the demo's mock): the URL it actually used
        replay = {**replay, "values": {**replay["values"], "url": url}}
    # with --scenario (each class's, _with_classes) or --trace (the recording's, _with_trace)
    # the command's own conversations are never sent: one is built (options checked), not 2,000
    own = opts.scenario is None and getattr(opts, "trace", None) is None
    common = make_common(tgt, wl, 2000 if own else 1,
                         multi_turn=True, progress=progress, replay=replay)
    ramp_in_s, hold_s, think_s = opts.timing()
    if getattr(opts, "workload_type", "chat") == "agent":
        warn_short_hold(common.workload, hold_s)
    # the server's machine and what the server is (TelemetryOpts: ramp's and sweep's)
    common = dataclasses.replace(common, telemetry=spec.telemetry_spec(
        tgt, spec.server_probe, pid=server_pid, pid_from="--serve"))
    common = with_ray(common, check_ray(opts.ray))
    if out is not None or labels is not None:
        common = dataclasses.replace(common, out=out or common.out,
                                     labels=common.labels if labels is None else labels)
    find = find_plan(opts)
    steps = [] if find is not None else opts.steps()
    trace = None
    if getattr(opts, "trace", None) is not None:
        common, trace, steps, hold_s = _with_trace(opts, common, tgt, steps)
    shape = Ramp(common.workload.conversations, steps,
                 by=opts.by, join=opts.join,
                 ramp_in_s=ramp_in_s, hold_s=hold_s, think_s=think_s,
                 keep_going=opts.keep_going,
                 drain_s=max(spec.timeout_first_token, 30.0), seed=wl.seed,
                 lag_limit_ms=opts.generator_lag_limit * 1000)  # type: ignore[operator]
    if trace is not None:
        shape.trace, shape.trace_speed = trace.items, opts.trace_speed  # type: ignore[attr-defined]
    plan = RampPlan(common, shape, opts.gates(), expect=opts.expect_users, mock=mock,
                    find=find, reset=step_resets(opts, tgt, mock=mock is not None))
    if opts.scenario is not None:
        _with_classes(opts, plan, spec, tgt, seed_offset, progress)
    return planned(plan)


def _with_trace(opts: RampOpts, common: Any, tgt: Any, multiples: list[float]) -> Any:
    """ramp --trace: (common with the recording's workload, the trace, the steps in users,
    the hold). A recorded session is a user: --users 1,2 replays the recording once, then
    twice over, so a step's users are its multiple x the recording's sessions; the hold is
    as given, else the recording's length at --trace-speed."""
    import dataclasses
    from llmbench.specs.options import MAX_LOAD, UsageError
    from llmbench.commands.spec import trace_of
    spec: Any = opts
    tr, wl = trace_of(spec, tgt, common, common.workload.seed)
    if not tr.items:
        raise UsageError(f"--trace {spec.trace}: no requests to replay")
    n = len(tr.items)
    steps = [m * n for m in multiples]
    if steps and max(steps) > MAX_LOAD:
        raise UsageError(f"--users {max(multiples):g} x {n} recorded sessions is over "
                         f"{MAX_LOAD:,} users a step: lower --users")
    hold_s = opts.hold if opts.hold is not None else \
        max(i.due_s[-1] for i in tr.items) / spec.trace_speed + 1.0
    return dataclasses.replace(common, workload=wl), tr, steps, hold_s


def plan_classes(spec: Any, scenario: Any, tgt: Any, common: Any, think_s: tuple[float, float],
                 gates: list[Any], seed_offset: int = 0, progress: bool | None = None,
                 grow: str | None = None, isolate: bool = False, steps: bool = True) -> Any:
    """--scenario: each class planned with its options over the command's (commands.scenario:
    the run's target, output and telemetry; the class's workload and requests), its own
    think time and thresholds, else the command's ``think_s`` and ``gates``."""
    import dataclasses
    from llmbench.commands import scenario as sc
    from llmbench.commands.spec import make_common
    from llmbench.specs.thresholds import parse_threshold

    def build(tc: Any, _options: dict[str, Any]) -> tuple[Any, tuple[float, float]]:
        cs = sc.class_spec(spec, scenario, tc)
        mine = make_common(tgt, dataclasses.replace(cs, seed=cs.seed + seed_offset), 2000,
                           multi_turn=True, progress=progress)
        c = dataclasses.replace(common, workload=mine.workload, params=mine.params,
                                timeouts=mine.timeouts, count_tokens=mine.count_tokens)
        return c, (cs.think if cs.think is not None else think_s)

    def gates_of(tc: Any) -> list[Any]:
        if tc.thresholds is None:
            return list(gates)
        return sc.check_thresholds(scenario, tc, tc.thresholds, parse_threshold)
    return sc.plan(scenario, grow, isolate, build, gates_of,
                   workers=getattr(common, "workers", 1), steps=steps)


def _with_classes(opts: RampOpts, plan: Any, spec: Any, tgt: Any, seed_offset: int,
                  progress: bool | None) -> None:
    """--scenario: each class planned as this ramp with its options over the command's
    (``plan_classes``), the ramp's shape made theirs (load.shapes.classes)."""
    import dataclasses
    from llmbench.specs.options import UsageError
    from llmbench.commands import scenario as sc
    scenario = sc.load(spec, opts.scenario)
    sp = plan_classes(spec, scenario, tgt, plan.common, opts.timing()[2], opts.gates(),
                      seed_offset, progress, opts.grow, opts.isolate)
    # the workload run.json describes is the one sent: the first class's (each class's
    # own is in config.scenario)
    plan.common = dataclasses.replace(plan.common, workload=sp.classes[0].common.workload)
    _check_floors(opts, scenario, plan.shape.steps)
    if opts.by == "users" and opts.grow is None and plan.find is not None:
        # the search's lightest step carries every class's floor (min_users): it starts
        # there at least, and never steps below
        plan.find.least = float(scenario.least_users)
        plan.find.start = max(plan.find.start, plan.find.least)
        if plan.find.ceiling is not None and plan.find.ceiling < plan.find.least:
            raise UsageError(f"--up-to {plan.find.ceiling:g}: below the classes' floors "
                             f"(min_users add up to {plan.find.least:g}); raise --up-to")
    plan.scenario = sp
    plan.shape = sp.shape(plan.shape)


def _check_floors(spec: RampOpts, scenario: Any, steps: Sequence[float]) -> None:
    """A fixed step of the whole crowd below the share classes' floors (min_users) would
    not be the step's users: one line."""
    from llmbench.specs.options import UsageError
    if spec.by != "users" or spec.grow is not None:
        return
    least = scenario.least_users
    low = [x for x in steps if x < least]
    if low:
        floors = " + ".join(f"{c.name} {c.min_users}" for c in scenario.classes
                            if c.share is not None and c.min_users)
        raise UsageError(f"--users {low[0]:g}: below the classes' floors (min_users: "
                         f"{floors} = {least}); start the steps at {least} or more")


def prepared(opts: RampOpts) -> None:
    """The checks that read files or the machine, and the warning a hold shorter than
    the think time earns, before anything starts."""
    from llmbench.commands.spec import check_ray, prepare, say
    check_ray(opts.ray)
    prepare(opts)
    if opts.scenario is not None:
        # every class's options checked (values, the files they name, thresholds), no server asked
        from llmbench.specs.thresholds import parse_threshold
        from llmbench.commands import scenario as sc
        spec: Any = opts.resolved()
        scenario = sc.load(spec, opts.scenario)
        scenario.check_grow(opts.grow)
        for tc in scenario.classes:
            sc.check_class(spec, scenario, tc, parse_threshold)
        if not opts.searching():
            _check_floors(opts, scenario, opts.steps())
    ramp_in_s, hold_s, think_s = opts.timing()
    longest, whose = think_s[1], ""
    if opts.scenario is not None:
        # each class thinks its own (its "think" option), else the command's
        from llmbench.options import parse_think
        longest = -1.0
        for tc in scenario.classes:
            v = dict(tc.options).get("think")
            t = parse_think(str(v), f"{tc.name}: think")[1] if v is not None else think_s[1]
            if t > longest or (t == longest and not whose):
                longest, whose = t, f"{tc.name}'s, " if v is not None else ""
    # a rate step's arrivals come on the schedule whatever the think time
    if opts.by == "users" and longest > 0 and hold_s < longest:
        say(f"warning: --hold {hold_s:g}s is shorter than the longest think time "
            f"({whose}{longest:g}s): some users send nothing in a hold window")


def perform_at(spec: RampOpts, url: str, model: str | None, mock: dict[str, Any] | None = None,
               out: Path | None = None, labels: dict[str, str] | None = None,
               progress: bool | None = None, server_pid: int | None = None) -> Any:
    """Every repeat of the ramp against one server, into one run folder (Done);
    ``server_pid``: the server's process when sweep --serve started it."""
    def plan(model: str | None, seed_offset: int = 0) -> Any:
        return ramp_plan(spec, url, model, mock, seed_offset, out=out, labels=labels,
                         progress=progress, server_pid=server_pid)
    first = plan(model)
    found = first.common.target.model        # asked once, when --model was not given
    return perform(first, spec.repeat, lambda k: plan(found, k))
