"""``llmbench ramp``: add users step by step until the thresholds break, and say why."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from llmbench.analysis import abandon, checks, outages
from llmbench.analysis import classes as classes_mod
from llmbench.analysis import verdict as verdict_mod
from llmbench.analysis.judge import judge_ramp
from llmbench.errors import EXIT_INTERRUPTED, EXIT_NOT_JUDGED, EXIT_THRESHOLD
from llmbench.load.harness import LiveView, PreflightError, ServerSeen, TargetSpec
from llmbench.load.monitor import CPU_LIMIT_PCT, LAG_P99_LIMIT_MS, SEND_DELAY_P99_LIMIT_MS, with_send_delay
from llmbench.analysis.metrics import summarize
from llmbench.results.network import NetworkFloor
from llmbench.analysis.sessions import step_sessions
from llmbench.records import definitions
from llmbench.records.record import Record
from llmbench.report import console
from llmbench.results.folder import environment
from llmbench.results.schema import (Check, Findings, HeldInterval, RepeatOf, RepeatRun,
                                     Repeats, Run, RunState, ServerProbe, Step, Workers,
                                     deciding_step, held_load)
from llmbench.load.shapes import Ramp, StepWindow
from llmbench.analysis.slo import HELD, OVER, Threshold, check_all, verdict_of, within_requests
from llmbench.analysis.stats import recent_p95
from llmbench.analysis.stepstats import steady_state
from llmbench.load.shapes.pace import StepPlan
from llmbench.load.shapes.search import SearchPacer
from llmbench.results.schema import ladder
from llmbench.results.search import Search, Trial
from llmbench.commands.common import agent_preflight
from llmbench.commands.common import Common, Done, dashboard_of, failed, stops_cleanly, incomplete_line, lost_workers, print_closing, server_kind, telemetry_parts, write_run, write_started, write_timeline


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

    def pacer(self, shape: Ramp) -> SearchPacer:
        from llmbench.analysis import stepstats
        closed = shape.by == "users"
        return SearchPacer(by=shape.by, start=self.start, ramp_in_s=shape.ramp_in_s,
                           hold_s=shape.hold_s, sustain_s=self.sustain_s,
                           budget_s=self.budget_s, ceiling=self.ceiling, least=self.least,
                           aim=lambda lo, hi: stepstats.aim(lo, hi, closed),  # type: ignore[arg-type]
                           untrusted=verdict_mod.lag_explains)  # type: ignore[arg-type]

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
    thresholds: list[Threshold] = field(default_factory=list)
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


def unit_of(r: RampPlan) -> str:
    """What a step's load counts: users, req/s, or agents (--workload agent: "held 4 agents")."""
    from llmbench.workload.agents import is_agent
    convs = r.common.workload.conversations
    if r.shape.by == "users" and len(convs) and is_agent(convs[0]):
        return "agents"
    return r.shape.unit


def window_records(records: Sequence[Record], step: int, start: float, end: float) -> list[Record]:
    """A step's numbers come from the requests that started in its hold window."""
    return definitions.window(records, step, start, end)


def judge(thresholds: list[Threshold], stall_s: float = 1.0,
          send_delay_limit_ms: float = SEND_DELAY_P99_LIMIT_MS, by: str = "users"):
    """The ramp's judge: a step (``results.schema.Step``: its summary and threshold checks)
    from its records (pure); the generator check adds the step's own send delay to the loop
    monitor's verdict. Users are counted whole (``by="users"``); a rate is what it is."""
    def judge_step(w: StepWindow) -> Step:
        recs = window_records(w.records, w.index, w.hold_start, w.hold_end)
        s = summarize(recs, t0=w.hold_start, t_end=w.hold_end, stall_s=stall_s,
                      within=within_requests(thresholds))
        # the agent sessions that started in the hold, with all their calls (None: no agents)
        sessions = step_sessions(w.records, w.index, w.hold_start, w.hold_end)
        found = check_all(thresholds, s, sessions)
        down = outages.step_check(w.records, w.ramp_start, w.hold_end)
        if down is not None:
            found.append(down)
        if not recs:
            found.append(Check(threshold="requests>0", ok=False, actual=0, limit=0,
                               metric="requests", stat=None, insufficient=True,
                               reason="not enough data: no request started in the hold window",
                               text="requests>0: no request started in the hold window"))
        state = verdict_of(found)
        mon = with_send_delay(w.monitor, s.send_delay.p50, s.send_delay.p99, send_delay_limit_ms)
        load = int(w.load) if by == "users" and float(w.load).is_integer() else w.load
        return Step(index=w.index, load=load, ramp_start=w.ramp_start,
                    hold_start=w.hold_start, hold_end=w.hold_end, held=state == HELD,
                    state=state, checks=found, monitor=mon, unfinished=w.unfinished,
                    steady=steady_state(w.records, w.index, w.hold_start, w.hold_end),
                    summary=s, sessions=sessions)
    return judge_step


def _live_line(unit: str, n_steps: int | None):
    """The ramp's live line, most telling first: the harness cuts it to the terminal's width,
    so what is cut at 80 columns is the least needed. ``n_steps`` None: a search (how many
    steps it takes is what it finds out)."""
    def line(v: LiveView) -> str:
        c, st, m = v.counters, v.live, v.monitor
        p95 = recent_p95(v.recent_ttft, v.now)
        where = f"{st.users}/{st.load:g} users" if unit == "users" else f"{st.load:g} req/s"
        n = 0 if st.step is None else st.step + 1
        parts = [f"step {n}{f'/{n_steps}' if n_steps is not None else ' (search)'} "
                 f"{st.phase or 'ramp-in'} {where}"]
        if m is not None and (m.lag_p99_ms > LAG_P99_LIMIT_MS / 2
                              or m.cpu_pct > CPU_LIMIT_PCT * 0.8):
            parts.append("GEN NEAR LIMIT")
        parts += [f"TTFT p95 {console.fmt_ms(p95 * 1000 if p95 is not None else None)}",
                  f"~{v.events_last_s} tok/s", f"{c.failed} err", f"{c.in_flight} in flight",
                  f"{c.done} done"]
        if m is not None:
            parts.append(f"lag {m.lag_p99_ms:.1f}ms CPU {m.cpu_pct:.0f}%")
        return ", ".join(parts)
    return line


def search_of(r: RampPlan, steps: Sequence[Step], interrupted: bool) -> Search | None:
    """The search's raw result from its pacer (the answer is analysis.findlimit's)."""
    pacer = r.shape.pacer
    if r.find is None or not isinstance(pacer, SearchPacer):
        return None
    done = {s.index for s in steps}
    trials = [Trial(index=t.index, load=t.load, why=t.why, state=t.state, held=t.held,  # type: ignore[arg-type]
                    counted=t.counted, hold_s=t.hold_s, note=t.note)
              for t in pacer.trials if t.index is not None and t.index in done]
    stopped = pacer.stopped or "interrupted"
    if interrupted and pacer.stopped is None:
        stopped = "interrupted"
    return Search(by=pacer.by, start=pacer.start, factor=pacer.factor, ceiling=pacer.top,
                  resolution=pacer.resolution, hold_s=pacer.hold_s, sustain_s=pacer.sustain,
                  budget_s=pacer.budget_s, trials=trials, limit=pacer.limit,
                  broke_at=float(pacer.hi.load) if pacer.hi is not None else None,
                  confirmed=pacer.confirmed, stopped=stopped,  # type: ignore[arg-type]
                  elapsed_s=round(pacer.spent_s, 3))


def _doc(r: RampPlan, started_at: float, t0_perf: float | None,
         records: list[Record], servers: Any, interrupted: bool, partial: bool,
         user_changes: list, workers: dict[str, Any] | None = None,
         telemetry: Any = None, going_on: bool = False,
         network: NetworkFloor | None = None) -> Run:
    c, shape = r.common, r.shape
    steps: list[Step] = list(shape.results)
    server = servers
    search = search_of(r, steps, interrupted)
    judged = ladder(steps, search)
    tel = telemetry_parts(telemetry, steps, records,
                          steps[0].ramp_start if steps else None,
                          steps[-1].hold_end if steps else None)
    # --isolate: each class judged alone at its load of the first step that broke
    isolation = (classes_mod.isolation(judged, shape.isolated, unit_of(r), shape.isolation_note)
                 if r.scenario is not None and shape.isolate else None)
    policy = c.params.abandon
    if policy is None and r.scenario is not None:
        # --abandon set for some classes only (their options): the first one's policy names it
        policy = next((cp.common.params.abandon for cp in r.scenario.classes
                       if cp.common.params.abandon is not None), None)
    gave_up = abandon.abandonment(policy, records, server.samples, t0_perf, server.kind)
    identity = tel.get("body", {}).get("server")
    verdict, search = judge_ramp(
        judged, records, unit_of(r), server.samples,
        planned=None if search is not None else len(shape.steps), telemetry=tel.get("info"),
        going_on=going_on, network=network,
        search=search, interrupted=interrupted, lost=lost_workers(workers),
        # a server that keeps decoding for closed connections: what users who stay get
        release=gave_up.release.text if gave_up is not None and gave_up.release.ok is False
        else None, scenario=r.scenario is not None, isolation=isolation,
        server_kind=server_kind(server.kind, identity) or getattr(identity, "kind", None) or (
            # the probe looked and knew none of its kinds (llama-cpp-python's own server, say):
            # no advice naming settings such a server does not have
            "unknown" if c.server_probe == "auto" and server.note else None))
    return Run(
        RunState(kind="ramp", status="partial" if partial else "complete",
                 started_at=started_at, labels=c.labels, t0_perf=t0_perf),
        config={"target": c.target.describe(),
                "ramp": {"by": shape.by, "steps": shape.steps, "ramp_in_s": shape.ramp_in_s,
                         "hold_s": shape.hold_s, "think_s": list(shape.think_s),
                         "thresholds": [t.text for t in r.thresholds],
                         "keep_going": shape.keep_going, "seed": shape.seed, "expect": r.expect,
                         "join": shape.join, **shape.describe_trace(),
                         **({"find": r.find.describe(shape.pacer)}  # type: ignore[arg-type]
                            if r.find is not None else {})},
                "request": c.request_config(), "timeouts": c.timeouts.__dict__, "mock": r.mock,
                **({"scenario": r.scenario.describe()} if r.scenario is not None else {})},
        workload=c.workload.describe(),
        environment=environment(), steps=steps, verdict=verdict, search=search,
        findings=Findings(
            user_changes=user_changes,
            outages=outages.of_run(records, t0_perf) if t0_perf else [],
            **checks.record_checks(records, c.params, c.target.api, c.workload,
                                   server_kind(server.kind,
                                               tel.get("body", {}).get("server"))),
            server_probe=ServerProbe(kind=server.kind, note=server.note,
                                     samples=len(server.samples)),
            **tel.get("body", {}),
            closed_loop_note="Virtual users wait for each reply before thinking and sending "
                             "again, so when the server slows down they send less (closed "
                             "loop)." if shape.by == "users" else None,
            workers=Workers.of(workers),
            repeat=RepeatOf.from_dict(r.repeat) if r.repeat else None,
            abandonment=gave_up, isolation=isolation, network=network,
            cache_resets=r.reset.recorded() if r.reset is not None else []),
        interrupted=interrupted)


def broken_step(steps: Sequence[Step]) -> Step | None:
    """The step --isolate runs each class alone at: the first that broke after the last that
    held (a step with too few requests broke nothing)."""
    step = deciding_step(steps)
    return step if step is not None and step.state == OVER else None


def _class_judges(r: RampPlan) -> None:
    """--scenario: the ramp's judge per class (each its own thresholds, on its own records),
    the step's from theirs, and the judge of each class run alone (--isolate)."""
    shape = r.shape
    per = {cp.name: judge(cp.thresholds, r.stall_s, shape.lag_limit_ms, shape.by)
           for cp in r.scenario.classes}
    shape.judge = classes_mod.judge(judge([], r.stall_s, shape.lag_limit_ms, shape.by), per,
                                    shape.loads)
    def broken(results: list[Any]) -> Step | None:
        pacer = shape.pacer
        if isinstance(pacer, SearchPacer):
            # a search: the least load that broke (the bracket's top), not the last step run
            return pacer.hi if pacer.hi is not None and pacer.hi.state == OVER else None  # type: ignore[return-value]
        return broken_step(results)
    shape.broken = broken
    shape.isolation_judge = classes_mod.isolation_judge(per)


def plan_line(index: int, plan: StepPlan, pacer: Any, unit: str) -> str | None:
    """What a search's next step is for, said before it runs; a fixed ramp says only that a
    step is held longer (``pace.FixedSteps``)."""
    lo = pacer.lo.load if getattr(pacer, "lo", None) is not None else None
    hi = pacer.hi.load if getattr(pacer, "hi", None) is not None else None
    what = f"{plan.load:g} {'user' if unit == 'users' and plan.load == 1 else unit}"
    if plan.why == "longer" and plan.extend:
        cap = getattr(pacer, "max_hold_factor", 4.0) * getattr(pacer, "hold_s", plan.hold_s)
        return (f"-- step {index + 1}: {what}, too few requests to judge: held "
                f"{plan.hold_s:g} s more (at most {cap:g} s in all)")
    if plan.why == "grow":
        why = "the first step" if index == 0 else "growing until a step breaks"
    elif plan.why == "aim":
        why = (f"aimed where the threshold is crossed, between {lo:g} (held) and {hi:g} "
               "(broke)")
    elif plan.why == "bisect":
        why = (f"halfway between {lo:g} (held) and {hi:g} (broke)" if lo is not None else
               f"below {hi:g}, which broke")
    elif plan.why == "repeat":
        why = "again: the last step had not settled"
    elif plan.why == "confirm":
        why = f"the limit found, held {plan.hold_s:g} s to confirm it"
    elif plan.why == "longer":
        why = "held longer: too few requests to judge"
    else:
        return None
    return f"-- step {index + 1}: {what}, {why}"


def intro_lines(r: RampPlan) -> list[str]:
    """What the ramp does, said before its table: the search's plan, and how users join."""
    shape, out = r.shape, []
    pacer = shape.pacer
    if isinstance(pacer, SearchPacer):
        from llmbench.analysis.findlimit import duration
        unit = shape.unit
        res = "1 user" if shape.by == "users" else "5 % of the rate"
        first = f"{pacer.start:g} {'user' if unit == 'users' and pacer.start == 1 else unit}"
        out.append(f"Searching for the limit: from {first}, doubling until a step "
                   f"breaks (at most {pacer.top:g}), then narrowing to {res}; each step "
                   f"{duration(shape.ramp_in_s)} in, {duration(shape.hold_s)} held; the limit "
                   f"then held {duration(pacer.sustain)} to confirm it"
                   + (f"; budget {duration(pacer.budget_s)}" if pacer.budget_s else "") + ".")
    if shape.join == "spread" and shape.by == "users":
        out.append(console.join_sentence(shape.join, agents=unit_of(r) == "agents"))
    out += shape.trace_lines()
    return out


def measure(r: RampPlan, run_dir: Path | None) -> tuple[Run, int]:
    c, shape = r.common, r.shape
    if r.scenario is not None:
        _class_judges(r)
        targets = r.scenario.targets(c.server_probe)
    else:
        shape.judge = judge(r.thresholds, r.stall_s, shape.lag_limit_ms, shape.by)
        targets = [TargetSpec(c.target, server_probe=c.server_probe,
                              salt=c.workload.salt_for("main"),
                              preflight_extra=agent_preflight(c.target, c.params,
                                                              c.workload.conversations))]
    if r.find is not None:
        shape.pacer = r.find.pacer(shape)
        shape.steps = []
    harness = c.harness(run_dir, _live_line(shape.unit, None if r.find is not None
                                            else len(shape.steps)), shape=shape)
    shape.pace()                  # the fixed list's pacer, made now; a search's is set above
    pacer = shape.pacer

    def on_plan(index: int, plan: StepPlan) -> None:
        line = plan_line(index, plan, pacer, shape.unit)
        if line:
            say(line)
    shape.on_plan = on_plan
    agents = unit_of(r) == "agents"     # sessions in the table (console.agent_ramp_row)
    from llmbench.report import screen
    size = screen.terminal()
    width = size[0] if size is not None else None

    r.table_rows = 0

    def say(line: str) -> None:
        harness.say(line)
        r.table_rows += screen.rows_of(line, width)

    dashboard = dashboard_of(harness)
    between: list[Any] = []             # the network floor after each step (client/floor.py)
    measuring: list[Any] = []

    def on_step(step: Step) -> None:
        if floor_so_far is not None:    # measured off the loop while the next step starts
            measuring.append(c.floor_later(f"after step {step.index}", between))
        # a busy machine or llmbench is the row's marker ("machine busy"), said in words once
        # at the end (console.busy_line), not under every row
        say(console.agent_ramp_row(step) if agents else console.ramp_row(step))
        for row in console.class_rows(step):
            say(row)
        if run_dir is not None or dashboard is not None:
            # every finished step is on disk at once: a killed ramp keeps its steps
            doc = _doc(r, harness.started_at, harness.t0_perf, harness.records_so_far(),
                       ServerSeen(None, None, []), False, True, [], going_on=True,
                       network=floor_so_far)
            data = doc.save(run_dir)
            if dashboard is not None:   # its thresholds, and the verdict so far
                dashboard.step(data["steps"][-1], data.get("verdict") or None)
    shape.on_step = on_step
    shape.before_step = r.reset.before_step if r.reset is not None else None
    if r.scenario is not None and shape.isolate:
        def on_isolated(alone: Any) -> None:
            say(console.isolated_row(alone))
        shape.on_isolated = on_isolated
    if dashboard is not None:
        dashboard.plan(thresholds=[t.text for t in r.thresholds], repeat=r.repeat)
    from llmbench import wire
    for line in intro_lines(r):
        print(line, flush=True)
    if r.scenario is not None:
        print("Traffic classes: " + ", ".join(
            f"{cp.name} ({cp.traffic.load_text()})" for cp in r.scenario.classes)
            + (f"; growing {r.scenario.grow}, the others fixed" if r.scenario.grow else ""),
            flush=True)
    say(console.agent_ramp_header() if agents else
        console.ramp_header(unit_of(r).capitalize() if shape.by == "users" else "Req/s",
                            wire.get(c.target.api).output))
    before = c.floor("before")          # the network's round trip (client/floor.py)
    floor_so_far = NetworkFloor.of([before]) if before is not None else None
    outcome = harness.run(shape, targets)
    after = c.floor("after") if before is not None else None
    for t in measuring:
        t.join(12.0)                    # each of its steps has a 5 s deadline
    network = NetworkFloor.of([f for f in (before, *list(between), after) if f is not None]) \
        if before is not None else None
    crashed = bool(outcome.workers and outcome.workers.get("crashed"))
    run = write_run(_doc(r, outcome.started_at, outcome.t0_perf, outcome.records,
                         outcome.server(), outcome.interrupted, outcome.interrupted or crashed,
                         outcome.live.user_changes, outcome.workers, outcome.telemetry,
                         network=network),
                    run_dir, outcome)
    write_timeline(run_dir, outcome, outcome.records, run.steps)
    # the one rule the command line exits with (results.schema.Run.exit_code, ramp_code)
    return run, run.exit_code


def held_of(steps: Sequence[Step]) -> float:
    return held_load(steps)


def run_held(run: Run) -> float:
    """A ramp's answer as one number: the search's limit, or the most that held (0: none)."""
    if run.search is not None:
        return run.held or 0.0
    return held_load(run.steps)


def held_interval(values: Sequence[float]) -> HeldInterval:
    """Users held over repeats: the median repeat and the min-max range. With n repeats the
    range [min, max] holds the median of all such ramps with probability 1 - 2 x 0.5^n (an
    order-statistic interval, no assumption on the distribution): 75 % for 3, 94 % for 5."""
    xs = sorted(values)
    n = len(xs)
    return HeldInterval(median=xs[(n - 1) // 2], low=xs[0], high=xs[-1], values=list(values),
                        method=f"min-max over {n} repeats; covers the median ramp's users held "
                               f"with probability {1 - 2 * 0.5 ** n:.0%}" if n > 1 else "one ramp",
                        coverage=1 - 2 * 0.5 ** n if n > 1 else None)


def _combine(runs: list[tuple[RampPlan, Run, int]], planned: int,
             run_dir: Path | None) -> tuple[Run, int]:
    """One run.json for all repeats: the steps, verdict and timeline of the median repeat (so
    ``report`` and ``compare`` read it as any ramp), and every repeat's steps under "repeats"."""
    helds = [run_held(run) for _, run, _ in runs]
    iv = held_interval(helds)
    rep = helds.index(iv.median)
    plan, run, _ = runs[rep]
    unit = unit_of(plan)
    interrupted = any(code == EXIT_INTERRUPTED for _, _, code in runs)
    doc = replace(run, findings=replace(run.findings, repeat=None), interrupted=interrupted,
                  repeat_codes=[code for _, _, code in runs],
                  verdict=verdict_mod.over_repeats(run.verdict, helds, iv, unit))
    doc.state = replace(run.state, status="partial" if interrupted or len(runs) < planned
                        else run.status)
    doc.findings.repeats = Repeats(
        planned=planned, done=len(runs), representative=rep + 1, held=iv,
        note=f"steps, verdict and timeline are those of repeat {rep + 1}, the median one",
        runs=[RepeatRun(repeat=i + 1, seed=p.shape.seed, workload_seed=p.common.workload.seed,
                        status=x.status, held=h,
                        verdict=x.verdict.text if x.verdict is not None else None,
                        verdict_kind=x.verdict.kind if x.verdict is not None else None,
                        steps=list(x.steps), search=x.search)
              for i, ((p, x, _), h) in enumerate(zip(runs, helds))])
    if doc.search is not None and len(runs) > 1:
        # the limit's interval over the repeats (each a whole search), as --repeat gives
        doc.search = replace(doc.search, interval=[float(iv.low or 0), float(iv.high or 0)],
                             interval_method=f"the limits of {len(runs)} searches (min-max: "
                                             + iv.method.split("; ", 1)[-1] + ")")
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
                           "held_so_far": [run_held(x) for _, x, _ in runs]}
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
    from llmbench.report.screen import EVIDENCE, KEEP, NOTE, Part
    head = console.verdict_parts(run.verdict)
    if run.search is not None:
        head += [Part(line, EVIDENCE) for line in console.search_lines(run.search, r.shape.unit)]
    if run.findings.abandonment is not None:
        gave_up = console.abandonment_lines(run.findings.abandonment)
        head.append(Part("  " + gave_up.replace("\n", "\n  ")))
    head += [Part(line, KEEP) for line in console.marks_lines(run.steps, run.verdict,
                                                               unit_of(r))]
    if run.findings.closed_loop_note and run.verdict.kind in ("queuing", "saturation"):
        head.append(Part("  Note: users wait for each reply, so as the server slowed down they "
                         "also sent less; a real crowd may push harder.", NOTE))
    if repeat > 1 and run.findings.repeats:
        method = run.held_interval.method if run.held_interval else None
        head.append(Part(f"  Users held: {method}.", EVIDENCE))
    if code == EXIT_THRESHOLD:
        head.append(Part(f"No step held its thresholds: exit {EXIT_THRESHOLD}."))
    elif code == EXIT_NOT_JUDGED:
        head.append(Part(f"No step could be judged, even held longer: exit {EXIT_NOT_JUDGED}. "
                         "Hold longer (--hold), think less (--think) or start with more users."))
    print_closing(run, r.scenario.warnings if r.scenario is not None else c.workload.warnings,
                  run.status == "partial",
                  incomplete_line(run, code)
                  or "PARTIAL RESULT: the ramp was interrupted; finished steps are kept.",
                  run_dir, head=head, verbose=c.watch.verbose, mlflow=c.watch.mlflow,
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


def execute(r: RampPlan, repeat: int = 1,
            next_plan: Callable[[int], RampPlan] | None = None) -> int:
    return perform(r, repeat, next_plan).code


from typing import TYPE_CHECKING  # noqa: E402  (the spec, for the functions below)

if TYPE_CHECKING:
    from llmbench.commands.ramp_spec import RampOpts, RampSpec


def perform_spec(spec: RampSpec, progress: bool | None = None) -> Any:
    """Against ``url``, or (none given) the built-in mock for the time of the ramp."""
    from llmbench.commands.local import with_local_server
    from llmbench.commands.spec import MaybeMock
    prepared(spec)
    spec = with_local_server(spec)      # no --url: a server on this machine, if any
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
    from llmbench.commands.ramp_spec import RampSpec
    from llmbench.commands.reset_spec import step_resets
    from llmbench.commands.spec import (check_ray, make_common, make_target, replay_of,
                                        warn_short_hold, with_ray)
    spec: Any = opts.resolved()
    tgt = make_target(spec, url, model)
    wl = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    replay = replay_of(opts, only=[f.name for f in dataclasses.fields(RampSpec)])
    if url != opts.url:  # type: ignore[attr-defined]
        # a sweep's ramp (or the demo's mock): the URL it actually used
        replay = {**replay, "values": {**replay["values"], "url": url}}
    # --scenario: each class builds its own conversations (_with_classes); --trace: the
    # recording's are sent (_with_trace); the command's own would never be, so one is
    # built (its options checked), not 2,000
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
    return plan


def _with_trace(opts: RampOpts, common: Any, tgt: Any, multiples: list[float]) -> Any:
    """ramp --trace: (common with the recording's workload, the trace, the steps in users,
    the hold). A recorded session is a user: --users 1,2 replays the recording once, then
    twice over, so a step's users are its multiple x the recording's sessions; the hold is
    as given, else the recording's length at --trace-speed."""
    import dataclasses
    from llmbench.commands.options import UsageError
    from llmbench.commands.spec import MAX_LOAD
    from llmbench.workload import ServerRef, load_tokenizer
    from llmbench.workload.traces import check_replay, trace_workload
    spec: Any = opts
    ref = ServerRef(tgt.server_root, tgt.model,
                    {k: v for k, v in tgt.request_headers().items() if k != "content-type"},
                    tgt.net)
    tok = load_tokenizer(spec.tokenizer, server=ref)
    tr, wl = trace_workload(str(spec.trace), tok, common.workload.seed,
                            reserve=max(x.tokens for x in common.workload.salts.values()))
    check_replay(tr, spec.trace_speed)
    if not tr.items:
        raise UsageError(f"--trace {spec.trace}: no requests to replay")
    n = len(tr.items)
    steps = [m * n for m in multiples]
    if steps and max(steps) > MAX_LOAD:
        raise UsageError(f"--users {max(multiples):g} x {n} recorded sessions is over "
                         f"{MAX_LOAD:,} users a step: lower --users")
    wl.salts = common.workload.salts       # a trace's prompts get the run's salt in front
    hold_s = opts.hold if opts.hold is not None else \
        max(i.due_s[-1] for i in tr.items) / spec.trace_speed + 1.0
    return dataclasses.replace(common, workload=wl), tr, steps, hold_s


def _with_classes(opts: RampOpts, plan: Any, spec: Any, tgt: Any, seed_offset: int,
                  progress: bool | None) -> None:
    """--scenario: each class planned as this ramp with its options over the command's
    (commands.scenario), the ramp's shape made theirs (load.shapes.classes)."""
    import dataclasses
    from llmbench.commands.options import UsageError
    from llmbench.commands import scenario as sc
    from llmbench.commands.spec import make_common
    from llmbench.analysis.slo import parse_threshold
    scenario = sc.load(spec, opts.scenario)
    common = plan.common

    def build(tc: Any, _options: dict[str, Any]) -> tuple[Any, tuple[float, float]]:
        cs = sc.class_spec(spec, scenario, tc)
        mine = make_common(tgt, dataclasses.replace(cs, seed=cs.seed + seed_offset), 2000,
                           multi_turn=True, progress=progress)
        # the run's target, output and telemetry; the class's workload and requests
        c = dataclasses.replace(common, workload=mine.workload, params=mine.params,
                                timeouts=mine.timeouts, count_tokens=mine.count_tokens)
        return c, (cs.think if cs.think is not None else opts.timing()[2])

    def gates(tc: Any) -> list[Any]:
        if tc.thresholds is None:
            return opts.gates()
        return sc.check_thresholds(scenario, tc, tc.thresholds, parse_threshold)
    sp = sc.plan(scenario, opts.grow, opts.isolate, build, gates,
                 workers=getattr(common, "workers", 1))
    # the workload run.json describes is the one sent: the first class's (each class's
    # own is in config.scenario)
    plan.common = dataclasses.replace(common, workload=sp.classes[0].common.workload)
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
    from llmbench.commands.options import UsageError
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
        # the file read and every class's options checked before anything starts
        # (values, the files they name, thresholds): no prompt built, no server asked
        from llmbench.analysis.slo import parse_threshold
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
    first = ramp_plan(spec, url, model, mock, out=out, labels=labels, progress=progress,
                      server_pid=server_pid)
    found = first.common.target.model        # asked once, when --model was not given
    return perform(first, spec.repeat,
                   lambda k: ramp_plan(spec, url, found, mock, k, out=out, labels=labels,
                                       progress=progress, server_pid=server_pid))
