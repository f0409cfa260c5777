"""``llmbench ramp``: add users step by step until the thresholds break, and say why."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from llmbench.analysis import checks, outages
from llmbench.analysis import verdict as verdict_mod
from llmbench.errors import EXIT_INTERRUPTED, EXIT_THRESHOLD
from llmbench.load.harness import LiveView, PreflightError, ServerSeen, TargetSpec
from llmbench.load.monitor import CPU_LIMIT_PCT, LAG_P99_LIMIT_MS, SEND_DELAY_P99_LIMIT_MS, with_send_delay
from llmbench.analysis.metrics import summarize
from llmbench.analysis.sessions import step_sessions
from llmbench.records import definitions
from llmbench.records.record import Record
from llmbench.report import console
from llmbench.results.folder import environment
from llmbench.results.schema import Check, Run, ServerProbe, Step, held_load
from llmbench.load.shapes import Ramp, StepWindow
from llmbench.analysis.slo import HELD, Threshold, check_all, verdict_of, within_requests
from llmbench.analysis.stats import recent_p95
from llmbench.analysis.stepstats import steady_state
from llmbench.commands.common import Common, Done, failed, stops_cleanly, incomplete_line, lost_workers, print_closing, telemetry_parts, write_run, write_started, write_timeline


@dataclass
class RampPlan:
    common: Common
    shape: Ramp                        # steps, timing, think; its judge is set at the run
    thresholds: list[Threshold] = field(default_factory=list)
    stall_s: float = 1.0
    expect: float | None = None
    mock: dict[str, Any] | None = None      # the built-in mock's settings, when it was used
    repeat: dict[str, Any] | None = None    # --repeat: which repeat this is, and those done


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


def _live_line(unit: str, n_steps: int):
    """The ramp's live line, most telling first: the harness cuts it to the terminal's width,
    so what is cut at 80 columns is the least needed."""
    def line(v: LiveView) -> str:
        c, st, m = v.counters, v.live, v.monitor
        p95 = recent_p95(v.recent_ttft, v.now)
        where = f"{st.users}/{st.load:g} users" if unit == "users" else f"{st.load:g} req/s"
        parts = [f"step {0 if st.step is None else st.step + 1}/{n_steps} "
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


def _doc(r: RampPlan, started_at: float, t0_perf: float | None,
         records: list[Record], servers: Any, interrupted: bool, partial: bool,
         user_changes: list, workers: dict[str, Any] | None = None,
         telemetry: Any = None) -> Run:
    c, shape = r.common, r.shape
    steps: list[Step] = list(shape.results)
    server = servers
    tel = telemetry_parts(telemetry, steps, records,
                          steps[0].ramp_start if steps else None,
                          steps[-1].hold_end if steps else None)
    verdict = verdict_mod.explain(steps, records, unit_of(r), server.samples,
                                  planned=len(shape.steps), telemetry=tel.get("info"))
    if interrupted and all(s.held for s in steps):
        # nothing broke because the ramp was stopped, not because every step held
        best = max((s.load for s in steps), default=0)
        verdict.interrupted = True
        verdict.text = (f"Held {verdict_mod.amount(best, unit_of(r))} before the ramp was interrupted. Stopped "
                        f"after {len(steps)} of {len(shape.steps)} steps, all held." if steps
                        else "Interrupted before the first step finished.")
    lost = lost_workers(workers)
    if lost is not None:
        # the steps after the loss ran without that worker's users: not the planned load
        verdict.incomplete = True
        verdict.text = (f"{verdict.text or ''} INCOMPLETE: {lost} during the ramp; its users "
                        "stopped there, so the figures are incomplete and not a result.").strip()
    return Run(
        kind="ramp", status="partial" if partial else "complete", started_at=started_at,
        config={"target": c.target.describe(),
                "ramp": {"by": shape.by, "steps": shape.steps, "ramp_in_s": shape.ramp_in_s,
                         "hold_s": shape.hold_s, "think_s": list(shape.think_s),
                         "thresholds": [t.text for t in r.thresholds],
                         "keep_going": shape.keep_going, "seed": shape.seed, "expect": r.expect},
                "request": c.request_config(), "timeouts": c.timeouts.__dict__, "mock": r.mock},
        labels=c.labels, t0_perf=t0_perf, workload=c.workload.describe(),
        environment=environment(), steps=steps, verdict=verdict, user_changes=user_changes,
        outages=outages.of_run(records, t0_perf) if t0_perf else [],
        **checks.record_checks(records, c.params, c.target.api, c.workload),
        server_probe=ServerProbe(kind=server.kind, note=server.note, samples=len(server.samples)),
        **tel.get("body", {}),
        closed_loop_note="Virtual users wait for each reply before thinking and sending "
                         "again, so when the server slows down they send less (closed "
                         "loop)." if shape.by == "users" else None,
        workers=workers, repeat=r.repeat or None, interrupted=interrupted)


def measure(r: RampPlan, run_dir: Path | None) -> tuple[Run, int]:
    c, shape = r.common, r.shape
    shape.judge = judge(r.thresholds, r.stall_s, shape.lag_limit_ms, shape.by)
    harness = c.harness(run_dir, _live_line(shape.unit, len(shape.steps)), shape=shape)
    agents = unit_of(r) == "agents"     # sessions in the table (console.agent_ramp_row)

    def on_step(step: Step) -> None:
        harness.say(console.agent_ramp_row(step) if agents else console.ramp_row(step))
        if step.monitor.get("overloaded"):
            print("warning: " + verdict_mod.generator_sentence(step.monitor), flush=True)
        if run_dir is not None or harness.dashboard is not None:
            # every finished step is on disk at once: a killed ramp keeps its steps
            doc = _doc(r, harness.started_at, harness.t0_perf, harness.records_so_far(),
                       ServerSeen(None, None, []), False, True, [])
            data = doc.save(run_dir)
            if harness.dashboard is not None:   # its thresholds, and the verdict so far
                v = dict(data.get("verdict") or {})
                if v and all(st.held for st in doc.steps):
                    # not "stopped after k of n steps": the ramp goes on
                    v["result"] = verdict_mod.result_line(doc.steps, shape.unit)
                harness.dashboard.step(data["steps"][-1], v or None)
    shape.on_step = on_step
    if harness.dashboard is not None:
        harness.dashboard.plan(thresholds=[t.text for t in r.thresholds], repeat=r.repeat)
    from llmbench import wire
    print(console.agent_ramp_header() if agents else
          console.ramp_header(unit_of(r).capitalize() if shape.by == "users" else "Req/s",
                              wire.get(c.target.api).output), flush=True)
    outcome = harness.run(shape, [TargetSpec(c.target, server_probe=c.server_probe,
                                             salt=c.workload.salt_for("main"))])
    crashed = bool(outcome.workers and outcome.workers.get("crashed"))
    run = write_run(_doc(r, outcome.started_at, outcome.t0_perf, outcome.records,
                         outcome.server(), outcome.interrupted, outcome.interrupted or crashed,
                         outcome.live.user_changes, outcome.workers, outcome.telemetry),
                    run_dir, outcome)
    write_timeline(run_dir, outcome, outcome.records, run.steps)
    # the one rule the command line exits with (results.schema.Run.exit_code, ramp_code)
    return run, run.exit_code


def held_of(steps: Sequence[Step]) -> float:
    return held_load(steps)


def held_interval(values: Sequence[float]) -> dict[str, Any]:
    """Users held over repeats: the median repeat and the min-max range. With n repeats the
    range [min, max] holds the median of all such ramps with probability 1 - 2 x 0.5^n (an
    order-statistic interval, no assumption on the distribution): 75 % for 3, 94 % for 5."""
    xs = sorted(values)
    n = len(xs)
    return {"median": xs[(n - 1) // 2], "low": xs[0], "high": xs[-1], "values": list(values),
            "method": f"min-max over {n} repeats; covers the median ramp's users held with "
                      f"probability {1 - 2 * 0.5 ** n:.0%}" if n > 1 else "one ramp",
            "coverage": 1 - 2 * 0.5 ** n if n > 1 else None}


def _combine(runs: list[tuple[RampPlan, Run, int]], planned: int,
             run_dir: Path | None) -> tuple[Run, int]:
    """One run.json for all repeats: the steps, verdict and timeline of the median repeat (so
    ``report`` and ``compare`` read it as any ramp), and every repeat's steps under "repeats"."""
    helds = [held_of(run.steps) for _, run, _ in runs]
    iv = held_interval(helds)
    rep = helds.index(iv["median"])
    plan, run, _ = runs[rep]
    unit = unit_of(plan)
    interrupted = any(code == EXIT_INTERRUPTED for _, _, code in runs)
    line = (f"Over {len(runs)} repeats it held {', '.join(f'{h:g}' for h in helds)} {unit}: "
            f"{iv['median']:g} [{iv['low']:g}, {iv['high']:g}] (median [min, max]).")
    doc = replace(run, repeat=None, interrupted=interrupted,
                  repeat_codes=[code for _, _, code in runs])
    if doc.verdict is not None:
        doc.verdict = replace(doc.verdict, text=f"{doc.verdict.text} {line}".strip())
    doc.status = "partial" if interrupted or len(runs) < planned else run.status
    doc.repeats = {
        "planned": planned, "done": len(runs), "representative": rep + 1, "held": iv,
        "note": f"steps, verdict and timeline are those of repeat {rep + 1}, the median one",
        "runs": [{"repeat": i + 1, "seed": p.shape.seed, "workload_seed": p.common.workload.seed,
                  "status": x.status, "held": h,
                  "verdict": x.verdict.text if x.verdict is not None else None,
                  "verdict_kind": x.verdict.kind if x.verdict is not None else None,
                  "steps": [st.to_dict() for st in x.steps]}
                 for i, ((p, x, _), h) in enumerate(zip(runs, helds))]}
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
                           "held_so_far": [held_of(x.steps) for _, x, _ in runs]}
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
    print(console.verdict_text(run.verdict))
    if run.closed_loop_note and run.verdict.kind in ("queuing", "saturation"):
        print("  Note: users wait for each reply, so as the server slowed down they also sent "
              "less; a real crowd may push harder.")
    if repeat > 1 and run.repeats:
        print(f"  Users held: {(run.held_interval or {}).get('method')}.")
    if code == EXIT_THRESHOLD:
        print(f"No step held its thresholds: exit {EXIT_THRESHOLD}.")
    print_closing(run, c.workload.warnings, run.status == "partial",
                  incomplete_line(run, code)
                  or "PARTIAL RESULT: the ramp was interrupted; finished steps are kept.",
                  run_dir)
    return RampDone(run, code, run_dir)


def execute(r: RampPlan, repeat: int = 1,
            next_plan: Callable[[int], RampPlan] | None = None) -> int:
    return perform(r, repeat, next_plan).code
