"""The one assembler: every ``Run`` is built here, from the plan and the harness's outcome
(issue 44 §2). A command is wiring (spec -> plan -> harness -> ``finish`` -> save -> render);
what its result holds, and which analysis makes each part, is decided in this module only.

- ``run`` / ``classes_run``: ``llmbench run`` (one load level; ``--scenario``'s crowd of
  traffic classes held once, judged as one step of the ramp's class crowd).
- ``ramp`` (with ``search_of``, ``step_judge``, ``ramp_judges``, ``repeats``): a ramp's steps,
  its verdict, its search, its repeats.
- ``probe`` (with ``probe_judge``): the router's overhead, step by step.
- ``sweep_started`` / ``sweep_begun`` / ``sweep_setting`` / ``sweep_answer``: a sweep's
  document, each setting's result, its answer and exit code (``sweep_kept``: --resume).

The plans are read by attribute (commands' RunPlan, RampPlan, ProbePlan, SweepPlan: a layer
above this one, so they are not imported); ``outcome`` is the harness's ``load.harness.Outcome``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from llmbench.analysis import abandon, checks, metrics, outages, prefix_hit, slo
from llmbench.analysis import telemetry as tm
from llmbench.analysis import timeline as timeline_mod
from llmbench.analysis import verdict as verdict_mod
from llmbench.analysis.judge import judge_ramp
from llmbench.analysis.sessions import step_sessions, summarize_sessions
from llmbench.analysis.percentile import percentile
from llmbench.analysis.stepstats import steady_state
from llmbench.client.request import choose_transport, stamp_clock
from llmbench.errors import (EXIT_EXPECTATION, EXIT_INTERRUPTED, EXIT_NOT_JUDGED, EXIT_OK,
                             EXIT_OVERLOADED, EXIT_THRESHOLD, EXIT_UNREACHABLE)
from llmbench.load.monitor import (SEND_DELAY_P99_LIMIT_MS, busy, with_clock, with_freezes,
                                   with_send_delay)
from llmbench.load.shapes import ClosedLoop, OpenLoop, StepWindow
from llmbench.load.shapes.trace import TraceReplay
from llmbench.load.shapes.router import ProbeWindow
from llmbench.load.shapes.search import SearchPacer
from llmbench.records import definitions
from llmbench.results.folder import environment
from llmbench.results.network import NetworkFloor
from llmbench.results.latencies import read_jsonl
from llmbench.results.schema import (Backends, Check, Findings, HeldInterval, ProbeStep,
                                     RepeatOf, RepeatRun, Repeats, Router, RouterCounters, Run,
                                     RunState, ServerDifference, ServerProbe, ServerState, Step,
                                     StepBrief, Sweep,
                                     SweepSetting, Workers, deciding_step, held_load, ladder)
from llmbench.results.run import RunKind
from llmbench.results.search import Search, Trial
from llmbench.results.telemetry import ServerIdentity

CLOSED_LOOP_NOTE = ("Virtual users wait for each reply before thinking and sending again, so "
                    "when the server slows down they send less (closed loop).")


# -- the parts every result shares ----------------------------------------------------------------

def request_config(c: Any) -> dict[str, Any]:
    """run.json's config "request": how each request was asked (a plan's common part)."""
    p = c.params
    return {"stream": p.stream, "temperature": p.temperature, "ignore_eos": p.ignore_eos,
            "max_tokens_field": p.max_tokens_field, "extra_body_keys": sorted(p.extra_body),
            # which HTTP client sent the requests (LLMBENCH_TRANSPORT): a comparison of two
            # runs should know if it changed
            "transport": choose_transport(c.target.base_url),
            **({"abandon": p.abandon.text()} if p.abandon is not None else {})}


def _run(kind: RunKind, c: Any, outcome: Any, partial: bool, *, head: dict[str, Any],
         tail: dict[str, Any] | None = None, **parts: Any) -> Run:
    """A Run's state, config (``head``, how each request was asked and its timeouts, then
    ``tail``), workload and environment, with the clock the token stamps came from
    (client.rxstamp: the kernel's receive time, or the time the event loop read them)."""
    return Run(RunState(kind=kind, status="partial" if partial else "complete",
                        started_at=outcome.started_at, labels=c.labels, t0_perf=outcome.t0_perf,
                        interrupted=outcome.interrupted),
               config={**head, "request": request_config(c), "timeouts": c.timeouts.__dict__,
                       **(tail or {})},
               workload=c.workload.describe(),
               environment={**environment(), "stamp_clock": stamp_clock(c.target.base_url)},
               **parts)


def telemetry_parts(telemetry: Any, steps: list[Step], records: Any, start: float | None,
                    end: float | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The server's machine in the Run: each step's figures (set on the steps' ``telemetry``),
    what the verdict reads (the identity and meta), and the Findings' parts: the whole run's
    (``run_telemetry``) and what the server is (``server``); (None, {}) when nothing was
    sampled. ``end`` None: the last request's end."""
    if telemetry is None:
        return None, {}
    if end is None and len(records):
        end = float(records.col("done").max())
    for st, t in zip(steps, tm.for_steps(steps, telemetry.samples, records)):
        if t is not None:
            st.telemetry = t
    ident = tm.server_identity(telemetry.identity, telemetry.meta)
    return ({"identity": ident, "meta": telemetry.meta},
            {"server": ServerIdentity.from_dict(ident) if ident else None,
             "run_telemetry": tm.run_section(telemetry.samples, telemetry.meta, telemetry.notes,
                                             start, end, records)})


def server_kind(probe_kind: str | None, identity: Any = None) -> str | None:
    """What the server is, for the checks that read its kind (the prompt cache's, for what
    Ollama does not report): the server probe's finding, or the identity's when that names
    Ollama (the probe off, or a router in front of it)."""
    if probe_kind != "ollama" and getattr(identity, "kind", None) == "ollama":
        return "ollama"
    return probe_kind


def _crashed(outcome: Any) -> bool:
    """A worker process died: the run is missing its share of the load."""
    return bool(outcome.workers and outcome.workers.get("crashed"))


def network_of(floors: list[Any]) -> NetworkFloor | None:
    """The network's round trip over a run (client.floor's measurements, the first taken before
    the load; None there: not measured, --network-floor off or a loopback address)."""
    if not floors or floors[0] is None:
        return None
    return NetworkFloor.of([f for f in floors if f is not None])


def timeline(outcome: Any, steps: Sequence[Step] = ()) -> list[dict[str, Any]]:
    """timeline.jsonl's rows: the run's per-second state, rebuilt from its records (pure)."""
    records = outcome.records
    if not len(records):
        return []
    return timeline_mod.build(records, outcome.t0_perf, float(records.col("done").max()),
                              outcome.live.user_changes, outcome.monitor, list(steps),
                              server=outcome.server().samples)


# -- llmbench run ---------------------------------------------------------------------------------

# beyond this p99 a trace's replay did not keep up: the server saw a gentler load than the
# trace's. The same 10 ms the loop monitor judges the generator by (DESIGN.md, scale).
BEHIND_P99_MS = 10.0


def dispatch_lag(records: Sequence[Any]) -> dict[str, Any]:
    """``run --trace``: start - scheduled of every request (its client queue,
    records/definitions.py), in ms (scheduled: its time in the trace)."""
    lags = [definitions.client_queue(r.scheduled, r.start) * 1000.0 for r in records
            if not r.warmup and r.start]
    if not lags:
        return {"requests": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "behind": False}
    p50, p99 = percentile(lags, 50), percentile(lags, 99)
    return {"requests": len(lags), "p50_ms": round(p50 or 0.0, 3),
            "p99_ms": round(p99 or 0.0, 3), "max_ms": round(max(lags), 3),
            "behind": bool(p99 is not None and p99 > BEHIND_P99_MS),
            "behind_threshold_ms": BEHIND_P99_MS}



def load_config(shape: Any) -> dict[str, Any]:
    """run.json's config "load" of a run's shape (ClosedLoop, OpenLoop or TraceReplay)."""
    if isinstance(shape, TraceReplay):
        tr = shape.describe_trace
        return {"concurrency": None, "rate": None, "arrival": "trace", "max_concurrency": None,
                "requests": tr.get("requests"), "duration_s": None, "warmup": 0,
                "think_s": [0.0, 0.0], "seed": shape.seed,
                "trace": {**tr, "speed": shape.speed}}
    rate = shape.rate if isinstance(shape, OpenLoop) else None
    return {"concurrency": shape.concurrency if isinstance(shape, ClosedLoop) else None,
            "rate": rate, "burstiness": getattr(shape, "burstiness", 1.0),
            "arrival": getattr(shape, "arrival", "gamma"),
            "max_concurrency": getattr(shape, "max_concurrency", None),
            "requests": shape.requests, "duration_s": shape.duration_s, "warmup": shape.warmup,
            "think_s": list(shape.think_s), "seed": shape.seed}


def run(plan: Any, outcome: Any, floors: list[Any] | None = None,
        prefix: tuple[Any, Any, Any] | None = None) -> Run:
    """``llmbench run``'s result: the summary, sessions and thresholds of its records, its
    monitor, checks, server and optional parts. ``floors``: the network's round trip before
    and after (client.floor); ``prefix``: (counters before, (kind, counters after), the warm-up's
    failures) for --prefix-hit-ratio."""
    c, g = plan.common, plan.gates
    extra: dict[str, Any] = {}
    if floors:
        extra["network"] = NetworkFloor.of(floors)
    records = outcome.records
    percentiles = sorted(set(metrics.DEFAULT_PERCENTILES) | set(g.metric_percentiles))
    summary = metrics.summarize(records, t0=outcome.result, goodput_slo_ms=g.goodput_slo_ms,
                                stall_s=g.stall_s, percentiles=percentiles,
                                within=slo.within_requests(g.thresholds))
    # agent sessions (None: no request belonged to one), over the run's duration
    sessions = summarize_sessions(records, window_s=summary.duration or None)
    threshold_results = slo.check_all(g.thresholds, summary, sessions)
    if isinstance(plan.shape, TraceReplay):
        extra["trace"] = {**plan.shape.describe_trace, "speed": plan.shape.speed,
                          "dispatch_lag": dispatch_lag(records)}
    if prefix is not None:
        before, (kind, after), warm_failed = prefix
        report = prefix_hit.verify(records, c.workload.prefix, before, after, kind)
        report["warmup_failed"] = warm_failed
        extra["prefix_cache"] = report
    if outcome.workers is not None:
        extra["workers"] = Workers.of(outcome.workers)
    mon = with_freezes(with_send_delay(busy(outcome.monitor), summary.send_delay.p50,
                                       summary.send_delay.p99),
                       outcome.monitor, records, outcome.t0_perf)
    mon = with_clock(mon, stamp_clock(c.target.base_url))
    return _one_level(c, outcome, outcome.interrupted or _crashed(outcome),
                      load_config(plan.shape), {"goodput_slo_ms": g.goodput_slo_ms},
                      summary, mon, c.params.abandon, thresholds=threshold_results,
                      sessions=sessions, **extra)


def _one_level(c: Any, outcome: Any, partial: bool, load: dict[str, Any], more: dict[str, Any],
               summary: Any, mon: dict[str, Any], policy: Any, kind_known: bool = True,
               **parts: Any) -> Run:
    """The Run of one load level (``run``, ``run --scenario``): its config's "load" and what
    follows "timeouts" (``more``), who gave up (--abandon's ``policy``), the server's machine
    over the whole run (first request's dispatch to the last one's end), the server's kind for
    the checks (unless not ``kind_known``), and the command's own ``parts``."""
    records, server = outcome.records, outcome.server()
    # vLLM's max_concurrent_requests is kept as vLLM defines it; this is the true peak
    summary.peak_in_flight_requests = metrics.peak_in_flight(records)
    _, tel = telemetry_parts(outcome.telemetry, [], records, outcome.t0_perf, None)
    kind = server_kind(server.kind, tel.get("server")) if kind_known else None
    return _run(
        "run", c, outcome, partial, head={"target": c.target.describe(), "load": load},
        tail=more,
        summary=summary,
        findings=Findings(
            monitor={**mon, "samples": [s.__dict__ for s in outcome.monitor]},
            outages=outages.of_run(records, outcome.t0_perf),
            **checks.record_checks(records, c.params, c.target.api, c.workload, kind),
            server_probe=ServerProbe(kind=server.kind, note=server.note,
                                     samples=len(server.samples),
                                     view=verdict_mod.server_view(server.samples)),
            abandonment=abandon.abandonment(policy, records, server.samples, outcome.t0_perf,
                                            server.kind),
            **tel, **parts))


def class_config(plan: Any) -> dict[str, Any]:
    """run.json's config "load" of ``run --scenario`` (a ClassRamp of one load)."""
    shape = plan.shape
    return {"concurrency": int(shape.steps[0]) if shape.by == "users" else None,
            "rate": shape.steps[0] if shape.by == "rate" else None,
            "burstiness": shape.burstiness, "arrival": "gamma", "max_concurrency": None,
            "requests": None, "duration_s": shape.hold_s, "warmup": 0,
            "think_s": list(shape.think_s), "seed": shape.seed, "classes": True}


def classes_run(plan: Any, outcome: Any) -> Run:
    """``run --scenario``'s result: the crowd held once, judged as the ramp judges a step of
    classes (``ramp_judges``): the whole crowd's summary, each class's, every class's checks."""
    c, shape = plan.common, plan.shape
    records = outcome.records
    step = shape.results[0] if shape.results else None
    if step is not None:
        summary, checks_, classes, mon = step.summary, step.checks, step.classes, step.monitor
    else:
        # stopped before the hold ended: what finished, unjudged (the run is partial)
        summary = metrics.summarize(records, stall_s=plan.gates.stall_s)
        checks_, classes, mon = [], {}, busy(outcome.monitor)
    return _one_level(c, outcome, outcome.interrupted or step is None,
                      class_config(plan), {"scenario": plan.scenario.describe()},
                      summary, mon, _class_policy(plan.scenario), kind_known=False,
                      thresholds=checks_, classes=classes)


def _class_policy(scenario: Any) -> Any:
    """--abandon set for some classes only (their options): the first one's policy names it."""
    return next((cp.common.params.abandon for cp in scenario.classes
                 if cp.common.params.abandon is not None), None)


# -- llmbench ramp --------------------------------------------------------------------------------

def unit_of(r: Any) -> str:
    """What a step's load counts: users, req/s, or agents (--workload agent: "held 4 agents")."""
    from llmbench.workload.agents import is_agent
    convs = r.common.workload.conversations
    if r.shape.by == "users" and len(convs) and is_agent(convs[0]):
        return "agents"
    return r.shape.unit


def step_judge(thresholds: list[Any], stall_s: float = 1.0,
               send_delay_limit_ms: float = SEND_DELAY_P99_LIMIT_MS,
               by: str = "users", clock: str | None = None) -> Callable[[StepWindow], Step]:
    """The ramp's judge: a step (``results.schema.Step``: its summary and threshold checks)
    from its records (pure); the generator check adds the step's own send delay to the loop
    monitor's verdict. Users are counted whole (``by="users"``); a rate is what it is."""
    def judge_step(w: StepWindow) -> Step:
        # a step's numbers come from the requests that started in its hold window
        recs = definitions.window(w.records, w.index, w.hold_start, w.hold_end)
        s = metrics.summarize(recs, t0=w.hold_start, t_end=w.hold_end, stall_s=stall_s,
                              within=slo.within_requests(thresholds))
        # the agent sessions that started in the hold, with all their calls (None: no agents)
        sessions = step_sessions(w.records, w.index, w.hold_start, w.hold_end)
        found = slo.check_all(thresholds, s, sessions)
        down = outages.step_check(w.records, w.ramp_start, w.hold_end)
        if down is not None:
            found.append(down)
        if not recs:
            found.append(Check(threshold="requests>0", ok=False, actual=0, limit=0,
                               metric="requests", stat=None, insufficient=True,
                               reason="not enough data: no request started in the hold window",
                               text="requests>0: no request started in the hold window"))
        state = slo.verdict_of(found)
        mon = with_send_delay(w.monitor, s.send_delay.p50, s.send_delay.p99, send_delay_limit_ms)
        if clock is not None:               # where its stamps may still be late
            mon = with_clock(mon, clock)
        load = int(w.load) if by == "users" and float(w.load).is_integer() else w.load
        return Step(index=w.index, load=load, ramp_start=w.ramp_start,
                    hold_start=w.hold_start, hold_end=w.hold_end, held=state == slo.HELD,
                    state=state, checks=found, monitor=mon, unfinished=w.unfinished,
                    steady=steady_state(w.records, w.index, w.hold_start, w.hold_end),
                    summary=s, sessions=sessions)
    return judge_step


def ramp_judges(r: Any) -> None:
    """The judges set on a ramp's shape: one judge for a ramp; for --scenario the ramp's judge
    per class (each its own thresholds, on its own records), the step's from theirs, and the
    judge of each class run alone (--isolate)."""
    shape = r.shape
    clock = stamp_clock(r.common.target.base_url)
    if r.scenario is None:
        shape.judge = step_judge(r.thresholds, r.stall_s, shape.lag_limit_ms, shape.by, clock)
        if r.find is not None:          # a search's step ends its hold once settled
            from llmbench.analysis import settle
            shape.settle = settle.settler(r.thresholds)
        return
    per = {cp.name: step_judge(cp.thresholds, r.stall_s, shape.lag_limit_ms, shape.by)
           for cp in r.scenario.classes}
    from llmbench.analysis import classes as classes_mod  # traffic classes only: 25 ms
    shape.judge = classes_mod.judge(step_judge([], r.stall_s, shape.lag_limit_ms, shape.by,
                                               clock),
                                    per, shape.loads)

    def broken(results: list[Any]) -> Step | None:
        """The step --isolate runs each class alone at, if it broke."""
        pacer = shape.pacer
        # a search: the least load that broke (the bracket's top), not the last step run
        step = pacer.hi if isinstance(pacer, SearchPacer) else deciding_step(results)
        return step if step is not None and step.state == slo.OVER else None  # type: ignore[return-value]
    shape.broken = broken
    shape.isolation_judge = classes_mod.isolation_judge(per)


def search_pacer(find: Any, shape: Any) -> SearchPacer:
    """``ramp --find``'s pacer (commands.ramp.FindPlan): a search for the limit instead of the
    fixed list of steps."""
    from llmbench.analysis import stepstats
    closed = shape.by == "users"
    return SearchPacer(by=shape.by, start=find.start, ramp_in_s=shape.ramp_in_s,
                       hold_s=shape.hold_s, sustain_s=find.sustain_s,
                       budget_s=find.budget_s, ceiling=find.ceiling, least=find.least,
                       aim=lambda lo, hi: stepstats.aim(lo, hi, closed),  # type: ignore[arg-type]
                       untrusted=verdict_mod.lag_explains)  # type: ignore[arg-type]


def _trial(t: Any, shape: Any) -> Trial:
    """A search's step as run.json keeps it; a search that settles its steps says how each
    hold ended (analysis.settle), and a step settled early had that much of its hold."""
    from llmbench.analysis.findlimit import duration
    from llmbench.analysis.settle import FULL
    hold_s, ended, why = t.hold_s, None, None
    if getattr(shape, "settle", None) is not None and getattr(shape, "by", "") == "users":
        got = shape.settled.get(t.index)
        if got is not None:
            ended, why = got.ended, got.text
            hold_s = round(got.after_s, 3) if t.why != "longer" else hold_s
        else:
            ended, why = FULL, f"held the full {duration(t.hold_s)}: not settled sooner"
    return Trial(index=t.index, load=t.load, why=t.why, state=t.state, held=t.held,
                 counted=t.counted, hold_s=hold_s, note=t.note, ended=ended, ended_why=why)


def search_of(r: Any, steps: Sequence[Step], interrupted: bool) -> Search | None:
    """The search's raw result from its pacer (the answer is analysis.findlimit's)."""
    pacer = r.shape.pacer
    if r.find is None or not isinstance(pacer, SearchPacer):
        return None
    done = {s.index for s in steps}
    trials = [_trial(t, r.shape) for t in pacer.trials if t.index is not None and t.index in done]
    stopped = pacer.stopped or "interrupted"
    if interrupted and pacer.stopped is None:
        stopped = "interrupted"
    return Search(by=pacer.by, start=pacer.start, factor=pacer.factor, ceiling=pacer.top,
                  resolution=pacer.resolution, hold_s=pacer.hold_s, sustain_s=pacer.sustain,
                  budget_s=pacer.budget_s, trials=trials, limit=pacer.limit,
                  broke_at=float(pacer.hi.load) if pacer.hi is not None else None,
                  confirmed=pacer.confirmed, stopped=stopped,  # type: ignore[arg-type]
                  elapsed_s=round(pacer.spent_s, 3))


def ramp(r: Any, outcome: Any, network: NetworkFloor | None = None,
         going_on: bool = False) -> Run:
    """A ramp's result from the harness's outcome: its steps as judged, its verdict and
    search, and every part of the run. ``going_on``: the steps so far (``outcome`` holds the
    records so far), written after each step while the ramp goes on: a partial result."""
    c, shape = r.common, r.shape
    t0_perf, records, server = outcome.t0_perf, outcome.records, outcome.server()
    interrupted, workers = outcome.interrupted, Workers.of(outcome.workers)
    partial = going_on or interrupted or _crashed(outcome)
    steps: list[Step] = list(shape.results)
    search = search_of(r, steps, interrupted)
    judged = ladder(steps, search)
    info, tel = telemetry_parts(outcome.telemetry, steps, records,
                                steps[0].ramp_start if steps else None,
                                steps[-1].hold_end if steps else None)
    # --isolate: each class judged alone at its load of the first step that broke
    isolation = None
    if r.scenario is not None and shape.isolate:
        from llmbench.analysis import classes as classes_mod
        isolation = classes_mod.isolation(judged, shape.isolated, unit_of(r), shape.isolation_note)
    policy = c.params.abandon
    if policy is None and r.scenario is not None:
        policy = _class_policy(r.scenario)
    gave_up = abandon.abandonment(policy, records, server.samples, t0_perf, server.kind)
    identity = tel.get("server")
    verdict, search = judge_ramp(
        judged, records, unit_of(r), server.samples,
        planned=None if search is not None else len(shape.steps), telemetry=info,
        going_on=going_on, network=network, search=search, interrupted=interrupted,
        lost=workers.lost() if workers is not None else None,
        # a server that keeps decoding for closed connections: what users who stay get
        release=gave_up.release.text if gave_up is not None and gave_up.release.ok is False
        else None, scenario=r.scenario is not None, isolation=isolation,
        server_kind=server_kind(server.kind, identity) or getattr(identity, "kind", None) or (
            # the probe looked and knew none of its kinds (llama-cpp-python's own server, say):
            # no advice naming settings such a server does not have
            "unknown" if c.server_probe == "auto" and server.note else None))
    return _run(
        "ramp", c, outcome, partial,
        head={"target": c.target.describe(),
              "ramp": {"by": shape.by, "steps": shape.steps, "ramp_in_s": shape.ramp_in_s,
                       "hold_s": shape.hold_s, "think_s": list(shape.think_s),
                       "thresholds": [t.text for t in r.thresholds],
                       "keep_going": shape.keep_going, "seed": shape.seed,
                       "expect": r.expect, "join": shape.join, **shape.describe_trace(),
                       **({"find": r.find.describe(shape.pacer)}  # type: ignore[arg-type]
                          if r.find is not None else {})}},
        tail={"mock": r.mock,
              **({"scenario": r.scenario.describe()} if r.scenario is not None else {})},
        steps=steps, verdict=verdict, search=search,
        findings=Findings(
            user_changes=outcome.live.user_changes,
            outages=outages.of_run(records, t0_perf) if t0_perf else [],
            **checks.record_checks(records, c.params, c.target.api, c.workload,
                                   server_kind(server.kind, identity)),
            server_probe=ServerProbe(kind=server.kind, note=server.note,
                                     samples=len(server.samples)),
            **tel,
            closed_loop_note=CLOSED_LOOP_NOTE if shape.by == "users" else None,
            workers=workers,
            repeat=RepeatOf.from_dict(r.repeat) if r.repeat else None,
            abandonment=gave_up, isolation=isolation, network=network,
            cache_resets=r.reset.recorded() if r.reset is not None else []))


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


def repeats(runs: list[tuple[Any, Run]], planned: int) -> tuple[Run, int]:
    """One result for all repeats (``ramp --repeat``): the steps, verdict and timeline of the
    median repeat (so ``report`` and ``compare`` read it as any ramp), every repeat's steps
    under "repeats"; and the index of that median repeat (its timeline is the run's)."""
    helds = [run_held(x) for _, x in runs]
    codes = [x.exit_code for _, x in runs]
    iv = held_interval(helds)
    rep = helds.index(iv.median)
    plan, chosen = runs[rep]
    unit = unit_of(plan)
    interrupted = EXIT_INTERRUPTED in codes
    doc = replace(chosen, findings=replace(chosen.findings, repeat=None),
                  verdict=verdict_mod.over_repeats(chosen.verdict, helds, iv, unit))
    doc.state = replace(chosen.state, status="partial" if interrupted or len(runs) < planned
                        else chosen.status, interrupted=interrupted, repeat_codes=codes)
    doc.findings.repeats = Repeats(
        planned=planned, done=len(runs), representative=rep + 1, held=iv,
        note=f"steps, verdict and timeline are those of repeat {rep + 1}, the median one",
        runs=[RepeatRun(repeat=i + 1, seed=p.shape.seed, workload_seed=p.common.workload.seed,
                        status=x.status, held=h,
                        verdict=x.verdict.text if x.verdict is not None else None,
                        verdict_kind=x.verdict.kind if x.verdict is not None else None,
                        steps=list(x.steps), search=x.search)
              for i, ((p, x), h) in enumerate(zip(runs, helds))])
    if doc.search is not None and len(runs) > 1:
        # the limit's interval over the repeats (each a whole search), as --repeat gives
        doc.search = replace(doc.search, interval=[float(iv.low or 0), float(iv.high or 0)],
                             interval_method=f"the limits of {len(runs)} searches (min-max: "
                                             + iv.method.split("; ", 1)[-1] + ")")
    return doc, rep


# -- llmbench probe -------------------------------------------------------------------------------

def probe_judge(plan: Any) -> Callable[[ProbeWindow], ProbeStep]:
    """The probe's judge: a step's router-minus-direct overheads from its slices (pure)."""
    from llmbench.analysis.router_ab import evaluate_step

    def judge(w: ProbeWindow) -> ProbeStep:
        step = evaluate_step(w.index, w.users, w.records, w.active_s, plan.bootstrap,
                             plan.shape.seed, w.slices)
        step.monitor = w.monitor
        return step
    return judge


def probe(plan: Any, outcome: Any) -> Run:
    """``llmbench probe``'s result: its steps, the router's bound and its backends."""
    from llmbench.analysis.backends import backends, router_counters, unidentified_sentence
    from llmbench.analysis.router_ab import router_bound
    c, shape = plan.common, plan.shape
    steps = outcome.result or shape.results
    records = outcome.records
    # the direct backend's machine over the whole probe, and what the backend is
    _, tel = telemetry_parts(outcome.telemetry, [], records, outcome.t0_perf, None)
    done = _run(
        "probe", c, outcome, outcome.interrupted or _crashed(outcome),
        head={"router": c.target.describe(), "direct": plan.direct.describe(),
              "steps": shape.steps, "slice_s": shape.slice_s, "rounds": shape.rounds,
              "think_s": list(shape.think_s), "seed": shape.seed},
        findings=Findings(
            router=Router(
                steps=list(steps), bound=router_bound(steps),
                backends=Backends.of(backends([r for r in records if r.path == "router"])),
                # the router's own per-backend in-flight counts (NOMYO): the spread when no
                # reply names its backend
                counters=RouterCounters.of(router_counters(outcome.server("router").samples)),
                server_probes={name: ServerProbe(kind=s.kind, note=s.note,
                                                 samples=len(s.samples))
                               for name, s in outcome.servers.items()}),
            **checks.record_checks(records, c.params, c.target.api, c.workload),
            server_probe=None, **tel, workers=Workers.of(outcome.workers)))
    if done.findings.router.backends is None:
        # what the missing backend names mean for the spread and the overhead
        done.findings.router.unidentified = unidentified_sentence(done.findings.router.counters)
    return done


# -- llmbench sweep -------------------------------------------------------------------------------

# the numbers each setting is compared on, at the common load (keys of a step summary)
AT_LOAD = ("p95_ttft_ms", "median_ttft_ms", "median_itl_ms", "p95_itl_ms", "output_throughput",
           "request_throughput", "failed", "requests")


def server_state(ramp_dir: Path, run: Run) -> ServerState | None:
    """The server's own view during the ramp (its probe's samples in server.jsonl): the most
    it ran and kept waiting at once, its slots, KV cache and memory."""
    probe = run.findings.server_probe or ServerProbe()
    rows = [r for r in read_jsonl(ramp_dir / "server.jsonl") if isinstance(r, dict)]
    if not probe.kind or not rows:
        return ServerState(kind=None, note=probe.note) if probe.note else None

    def most(key: str) -> float | None:
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return max(vals) if vals else None
    models = sorted({m for r in rows for m in (r.get("models_loaded") or [])})
    return ServerState(kind=probe.kind, samples=len(rows), max_running=most("running"),
                       max_waiting=most("waiting"), slots=most("slots"),
                       max_kv_cache_usage=most("kv_cache_usage"),
                       max_vram_bytes=most("vram_bytes"), max_ram_bytes=most("ram_bytes"),
                       preemptions=most("preemptions"), models_loaded=models or None)


def sweep_setting(res: SweepSetting, code: int, run_dir: Path | None, run: Run | None,
                  sweep_dir: Path, interrupted_code: int) -> None:
    """A sweep setting's result, set on ``res``, from its ramp's ``code``, folder ``run_dir``
    and ``run`` (None when the ramp did not start)."""
    from llmbench.analysis.sweep_judge import NOT_JUDGED, judged
    res.exit_code = code
    if run_dir is not None:
        res.run_dir = os.path.relpath(run_dir, sweep_dir)
    if not isinstance(run, Run):         # a ramp's Done holds its Run (or None)
        res.status = "interrupted" if code == interrupted_code else "ramp_failed"
        res.error = f"the ramp did not start (exit {code}; see the error above)"
        return
    steps = run.ladder()
    reps = run.findings.repeats
    res.held_interval = run.held_interval
    res.held = res.held_interval.median if res.held_interval else run_held(run)
    res.search = run.search
    v = run.verdict
    status = "interrupted" if code == interrupted_code else "complete"
    if status == "complete" and steps and not reps and not judged(steps):
        # every step had too few requests: "held 0" would rank it last, as if it broke
        status, res.held = NOT_JUDGED, None
    elif status == "interrupted" and not any(s.held for s in steps):
        # stopped before any step held: no answer, not "held 0" (as if every step broke)
        res.held = None
    res.status = status
    res.verdict, res.verdict_kind, res.knee = ((v.text, v.kind, v.knee) if v is not None
                                               else (None, None, None))
    res.steps = [StepBrief(load=st.load, held=st.held, summary=st.summary.slim(AT_LOAD))
                 for st in steps]
    if run_dir is not None:
        res.server_state = server_state(run_dir, run)
    if run.findings.server is not None and run.findings.server.data:
        # what the server said it was (version, parallel settings): compared across settings
        res.server = run.findings.server



def sweep_begun(doc: Sweep, setting: dict[str, str], name: str, log: str) -> SweepSetting:
    """A setting's result from the moment its server starts ("starting"), in the document."""
    res = SweepSetting(setting=setting, name=name, status="starting", log=log)
    doc.results.append(res)
    return res


def sweep_kept(before: dict[int, SweepSetting], sweep_dir: Path) -> dict[int, SweepSetting]:
    """The settings' results of a resumed sweep (by point of its grid) that are kept, not run
    again: those whole, their ramp run to its end (complete, or every step with too few
    requests: running it again asks the same) and their run folder read back complete.
    Failed, interrupted, partial or missing ones run again."""
    from llmbench.analysis.sweep_judge import NOT_JUDGED

    def whole(r: SweepSetting) -> bool:
        if r.status not in ("complete", NOT_JUDGED) or not r.run_dir:
            return False
        try:
            return Run.load(sweep_dir / r.run_dir).status == "complete"
        except Exception:  # noqa: BLE001 - a folder that does not read back is not complete
            return False
    return {i: r for i, r in before.items() if whole(r)}


def sweep_started(plan: Any, points: list[dict[str, str]]) -> Sweep:
    """sweep.json from the first moment: the settings, the grid, status "running"."""
    return Sweep(status="running", started_at=time.time(),
               settings=plan.settings, grid=points, labels=plan.labels,
               config=plan.describe(), unit=plan.unit, results=[],
               environment=environment(), pid=os.getpid())


def sweep_resumed(doc: Sweep) -> Sweep:
    """A sweep's document taken up again (--resume): running, its answer to be made anew."""
    doc.status, doc.pid, doc.results = "running", os.getpid(), []
    doc.resumed_at = [*(doc.resumed_at or []), time.time()]
    doc.answer = doc.best = doc.interrupted = doc.finished_at = None
    doc.exit_code_saved = doc.common_load = doc.tie_break = None
    return doc


def tie_break(sweep_dir: Path, results: Sequence[Any], load: float | None) -> dict[Any, Any]:
    """For the settings that held the most (when more than one did): each pair's TTFT p95,
    ITL p50 and output tok/s at the common load with the intervals of their changes
    (``compare.at_load``), read back from the ramps' folders."""
    measured = [r for r in results if r.held is not None and r.run_dir]
    if load is None or not measured:
        return {}
    top = max(r.held for r in measured if r.held is not None)
    tied = [r for r in measured if r.held == top]
    if top == 0 or len(tied) < 2:
        return {}
    from llmbench.analysis.compare import Loaded, at_load
    runs = []
    for r in tied:
        assert r.run_dir is not None
        loaded = Run.load(sweep_dir / r.run_dir)
        runs.append(Loaded(r.name, sweep_dir / r.run_dir, loaded, loaded.latencies()))
    return {(a.name, b.name): at_load(a, b, load)
            for i, a in enumerate(runs) for b in runs[i + 1:]}


def server_differences(results: Sequence[Any]) -> list[ServerDifference]:
    """Each setting's server against the first one's, as far as the servers said what they
    were: the setting should be among what differed (a server that ignored it shows here)."""
    known = [r for r in results if r.server is not None]
    out = []
    for r in known[1:]:
        text = tm.identity_diff(r.server, known[0].server, (r.name, known[0].name))
        if text:
            out.append(ServerDifference(setting=r.name, against=known[0].name,
                                        text=text + "."))   # "parallel=4 ran ...; parallel=1 ..."
    return out


def sweep_answer(doc: Sweep, sweep_dir: Path, unit: str, interrupted: bool,
                 expect: float | None) -> int:
    """The sweep's answer set on its document, and its exit code (``expect``: --expect-users)."""
    from llmbench.analysis.sweep_judge import answer, common_load
    results = doc.results
    load = common_load(results)
    doc.common_load = load
    for r in results:
        r.at_common_load = next((s for s in r.steps or [] if s.load == load), None)
        r.finished = True
    pairs = tie_break(sweep_dir, results, load)
    doc.tie_break = [{"base": a, "other": b, "load": load,
                      "metrics": {k: asdict(e) for k, e in m.items()}}
                     for (a, b), m in pairs.items()]
    text, best = answer(results, unit, pairs, load)
    if interrupted:
        text = f"Interrupted after {len(results)} of {len(doc.grid or [])} settings. " + text
    doc.server_differences = server_differences(results)
    doc.answer, doc.best = text, best.setting if best else None
    doc.status = "partial" if interrupted else "complete"
    doc.interrupted, doc.finished_at = interrupted, time.time()
    doc.exit_code_saved = sweep_exit_code(results, expect, interrupted)
    return doc.exit_code_saved


def sweep_exit_code(results: Sequence[SweepSetting], expect: float | None,
                    interrupted: bool) -> int:
    """As ramp's, over the settings, as docs/commands.md ("llmbench sweep") lists them: a
    setting that failed is in the answer and the page, not in the code."""
    from llmbench.analysis.sweep_judge import NOT_JUDGED
    measured = [r for r in results if r.held is not None]
    if interrupted:
        return EXIT_INTERRUPTED
    if not measured:
        # ramps that ran and had too few requests everywhere reached their servers, but
        # nothing was judged: no answer (the answer's line says what to change)
        return EXIT_NOT_JUDGED if any(r.status == NOT_JUDGED for r in results) \
            else EXIT_UNREACHABLE
    if any(r.exit_code == EXIT_OVERLOADED for r in measured):
        return EXIT_OVERLOADED
    if expect is not None and max(r.held or 0 for r in measured) < expect:
        return EXIT_EXPECTATION
    if all(r.exit_code == EXIT_THRESHOLD for r in measured):
        return EXIT_THRESHOLD
    return EXIT_OK
