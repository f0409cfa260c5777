"""``llmbench probe``: preflight both paths, alternate slices, write the run folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmbench.analysis import checks
from llmbench.analysis.backends import backends, router_counters, unidentified_sentence
from llmbench.load.harness import LiveView, PreflightError, TargetSpec, release_signals
from llmbench.analysis.router_ab import evaluate_step, router_bound
from llmbench.report.console import fmt_ms
from llmbench.results.folder import environment
from llmbench.results.schema import (Backends, Findings, ProbeStep, Router, RouterCounters, Run,
                                     RunState, ServerProbe, Workers)
from llmbench.load.shapes.router import ProbeWindow, RouterAB
from llmbench.analysis.stats import recent_p95
from llmbench.client.target import Target
from llmbench.errors import EXIT_NOT_JUDGED
from llmbench.commands.common import Common, Done, dashboard_of, failed, stops_cleanly, incomplete_line, print_closing, telemetry_parts, write_started


@dataclass
class ProbePlan:
    common: Common                  # common.target is the router
    direct: Target
    shape: RouterAB                 # steps, slices, rounds; its judge is set at the run
    bootstrap: int = 1000


# the probe's table fits 80 columns: each overhead (router minus direct, ms) as its point
# estimate, marked * when real (its 95 % interval excludes zero, and it is at least 1 ms or
# 2 %); the intervals themselves are under the table for TTFT p50, and all of them in
# run.json and report.html
OVERHEADS = (("ttft_p50", "+TTFT50", 9), ("ttft_p95", "+TTFT95", 9), ("e2el_p50", "+E2EL50", 9),
             ("itl_p50", "+ITL50", 8))


def _row(step: ProbeStep) -> str:
    def ov(m: str) -> str:
        o = step.overhead(m)
        if o.overhead_ms is None or not o.ci_ms:
            return "-"
        return f"{o.overhead_ms:+.1f}{'*' if o.significant else ' '}"
    r, d = step.router, step.direct
    cells = " ".join(f"{ov(m):>{w}}" for m, _, w in OVERHEADS)
    tok = f"{r.output_throughput or 0:.0f}/{d.output_throughput or 0:.0f}"
    return (f"{step.users:>5} {fmt_ms(r.ttft.median):>8} {fmt_ms(d.ttft.median):>8} {cells} "
            f"{tok:>11} {f'{r.failed or 0}/{d.failed or 0}':>5}")


HEADER = (f"{'Users':>5} {'R TTFT50':>8} {'D TTFT50':>8} "
          + " ".join(f"{h:>{w}}" for _, h, w in OVERHEADS)
          + f" {'R/D tok/s':>11} {'Err':>5}")


def interval_line(steps: list[ProbeStep]) -> str | None:
    """The TTFT p50 overhead's 95 % intervals, one clause a step, under the table."""
    parts = []
    for st in steps:
        o = st.overhead("ttft_p50")
        if o.ci_ms:
            lo, hi = o.ci_ms
            parts.append(f"{st.users:g} users [{lo:+.1f}, {hi:+.1f}]")
    return ("TTFT p50 overhead, 95 % interval (ms): " + "; ".join(parts) + ".") if parts else None


def implausible_line(steps: list[ProbeStep], backends: Backends | None) -> str | None:
    """A router faster than the direct path, beyond noise, with one backend behind it (or none
    seen): a router adds work, so that figure is not its overhead; said once, with the
    likeliest reasons. Several backends may really serve faster (the load is spread)."""
    if backends is not None and len(backends.backends) > 1:
        return None
    faster = [(st, st.overhead("ttft_p50")) for st in steps]
    faster = [(st, o) for st, o in faster
              if o.significant and o.overhead_ms is not None and o.overhead_ms < 0]
    if not faster:
        return None
    st, o = min(faster, key=lambda x: x[1].overhead_ms)
    at = ", ".join(f"{x.users:g}" for x, _ in faster)
    return (f"Implausible: the router was faster than the direct path beyond noise (TTFT p50 "
            f"{o.overhead_ms:+.1f} ms at {st.users:g} users; at {at} users in all). A router in "
            "front of one server adds work, so this is not its overhead: the two paths did not "
            "reach the same server in the same state (another backend or model, a warm prompt "
            "cache on one path, or the direct server busier).")


def _live(n_steps: int):
    def line(v: LiveView) -> str:
        c, st, m = v.counters, v.live, v.monitor
        p95 = recent_p95(v.recent_ttft, v.now)
        parts = [f"step {0 if st.step is None else st.step + 1}/{n_steps} {st.phase or ''} "
                 f"{st.load:g} users", f"TTFT p95 {fmt_ms(p95 * 1000 if p95 is not None else None)}",
                 f"~{v.events_last_s} tok/s", f"{c.failed} err", f"{c.done} done"]
        if m is not None:
            parts.append(f"lag {m.lag_p99_ms:.1f}ms CPU {m.cpu_pct:.0f}%")
        return ", ".join(parts)
    return line


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
    harness = c.harness(run_dir, _live(len(shape.steps)), shape=shape)

    def judge(w: ProbeWindow) -> ProbeStep:
        step = evaluate_step(w.index, w.users, w.records, w.active_s, plan.bootstrap, shape.seed,
                             w.slices)
        step.monitor = w.monitor
        return step
    shape.judge = judge
    dashboard = dashboard_of(harness)

    def on_step(s: ProbeStep) -> None:
        harness.say(_row(s))
        if dashboard is not None:       # the page takes the step as run.json has it
            dashboard.step(s.to_dict())
    shape.on_step = on_step
    print(HEADER, flush=True)
    outcome = harness.run(shape, targets(plan))
    steps = outcome.result or shape.results
    records = outcome.records
    # the direct backend's machine over the whole probe, and what the backend is
    tel = telemetry_parts(outcome.telemetry, [], records, outcome.t0_perf,
                          float(records.col("done").max()) if len(records) else None)
    run = Run(
        RunState(kind="probe", status="partial" if outcome.interrupted or bool(
            outcome.workers and outcome.workers.get("crashed")) else "complete",
            started_at=outcome.started_at, labels=c.labels, t0_perf=outcome.t0_perf),
        config={"router": c.target.describe(), "direct": plan.direct.describe(),
                "steps": shape.steps, "slice_s": shape.slice_s, "rounds": shape.rounds,
                "think_s": list(shape.think_s), "seed": shape.seed,
                "request": c.request_config(), "timeouts": c.timeouts.__dict__},
        workload=c.workload.describe(), environment=environment(),
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
            server_probe=None, **tel.get("body", {}), workers=Workers.of(outcome.workers)),
        interrupted=outcome.interrupted)
    if run.findings.router.backends is None:
        # what the missing backend names mean for the spread and the overhead
        run.findings.router.unidentified = unidentified_sentence(run.findings.router.counters)
    try:
        run.save(run_dir)
    finally:
        release_signals()       # run.json is whole: a signal held since the load is raised
    return run, outcome.interrupted


def execute(plan: ProbePlan) -> int:
    return perform(plan).code


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
    from llmbench.report import screen
    steps: list[ProbeStep] = run.findings.router.steps
    screen.say("(+X: the router's overhead in ms, router minus direct; * = its 95% interval "
               "excludes zero and it is at least 1 ms or 2%: real, not noise)")
    ci = interval_line(steps)
    if ci:
        screen.say(ci)
    odd = implausible_line(steps, run.findings.router.backends)
    if odd:
        screen.say(odd)
    if steps and not any(s.ttft_p50.ci_ms for s in steps):
        screen.say("No step could be judged: too few requests on one path or both to compare "
                   f"them (exit {EXIT_NOT_JUDGED}). Give each slice longer (--slice) or more "
                   "rounds (--rounds).")
    elif steps and not any(s.ttft_p50.significant for s in steps):
        screen.say("No significant router overhead at any step (TTFT p50).")
    b = run.findings.router.bound
    if b:
        screen.say(f"Router-bound from {b.users} users: its TTFT p50 overhead grew from "
                   f"{b.first_overhead_ms:.1f} ms to {b.overhead_ms:.1f} ms while the "
                   f"direct path stayed flat ({fmt_ms(b.direct_ttft_p50_ms)}).")
    elif len(steps) > 1:
        screen.say("No step where the router's overhead grew while the direct path stayed flat.")
    pc = run.findings.prompt_cache
    if pc is not None and pc.paths_differ:
        # the overhead above is then partly the cache's: say so where the answer is read
        screen.say(f"Not like for like: {pc.paths_differ}.")
    elif pc is not None and len(pc.by_path) > 1:
        screen.say("Prompt cache on first turns, by path: " + ", ".join(
            f"{k} {v.share * 100:.0f}%" for k, v in pc.by_path.items()
            if v.share is not None) + " (each path sends its own prompts).")
    be = run.findings.router.backends
    if run.findings.router.unidentified:
        screen.say(run.findings.router.unidentified)
    if be is not None:
        spread = ", ".join(f"{k}: {v.share * 100:.0f}% (TTFT p50 {fmt_ms(v.ttft_p50_ms)}"
                           + (f", cache hits {v.cache_hit_rate * 100:.0f}%"
                              if v.cache_hit_rate is not None else "") + ")"
                           for k, v in be.backends.items())
        screen.say(f"Backends behind the router: {spread}; imbalance {be.imbalance or 0:.2f} "
                   "(max/mean).")
        if be.affinity is not None:
            a = be.affinity
            screen.say(f"Conversation affinity: {a.same_backend_next_turn * 100:.0f}% of next turns "
                  f"on the same backend; {a.whole_conversation_on_one_backend * 100:.0f}% of "
                  f"{a.conversations} conversations stayed on one backend.")
    # interrupted: 130; a lost worker's users are missing from the slices after it died, never
    # a pass (Run.exit_code, the one rule)
    code = run.exit_code
    print_closing(run, c.workload.warnings, run.status == "partial",
                  incomplete_line(run, code)
                  or "PARTIAL RESULT: the probe was interrupted; finished steps are kept.",
                  run_dir)
    return Done(run, code, run_dir)


from typing import TYPE_CHECKING, Any  # noqa: E402  (the spec, for the functions below)

if TYPE_CHECKING:
    from llmbench.commands.probe_spec import ProbeSpec


def plan_of(spec: ProbeSpec, progress: bool | None = None) -> Any:
    """The probe's plan (the workload is counted against the backend)."""
    import dataclasses
    from llmbench.commands.ramp_spec import steps_of
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
