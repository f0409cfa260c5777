"""What ``run``, ``ramp`` and ``probe`` print of their result (and their live lines while it is
made): a command's render step (report/wiring.py) is one ``close_*`` call that prints the
closing screens and returns the exit code they state."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from llmbench.analysis import network, prefix_hit
from llmbench.analysis.finish import BEHIND_P99_MS
from llmbench.analysis.stats import recent_p95
from llmbench.load.monitor import CPU_LIMIT_PCT, LAG_P99_LIMIT_MS
from llmbench.load.shapes.search import SearchPacer
from llmbench.report import console, screen
from llmbench.results.schema import Backends, Run


# -- what every command closes with ------------------------------------------------------------

def incomplete_line(run: Run) -> str | None:
    """The closing line of a run, ramp or probe that lost a worker: its figures miss that
    worker's share of the load from then on, so it exits EXIT_OVERLOADED, never 0 (a Ctrl-C
    keeps 130)."""
    from llmbench.errors import EXIT_OVERLOADED
    lost = run.findings.workers.lost() if run.findings.workers is not None else None
    if lost is None:
        return None
    why = (f" (exit {EXIT_OVERLOADED}: the load generator could not do its job)"
           if run.exit_code == EXIT_OVERLOADED else "")
    return (f"PARTIAL RESULT: {lost}; its share of the load stopped there, so the figures "
            f"are incomplete{why}.")


def print_closing(run: Run, warnings: list[str], partial_line: str, run_dir: Path | None,
                  head: Sequence[Any] = (), rows_used: int | None = None,
                  verbose: bool = True, mlflow: str | None = None) -> None:
    """What every command prints last, the same way, after ``head`` (a ramp's verdict); the
    partial marker is ``partial_line`` unless a lost worker's ``incomplete_line`` says more.
    ``rows_used``: the rows of the table above it on the screen, so that (unless ``verbose``)
    the block is cut to what is left (report.screen)."""
    from llmbench.analysis import checks
    from llmbench.analysis.telemetry import console_lines
    from llmbench.report.auto import write_report
    from llmbench.report.screen import KEEP, NOTE, Part
    parts = list(head) + [Part(f"OUTAGE: {o.text}") for o in run.findings.outages]
    if run.status == "failed" and run.state.error:
        parts.append(Part(f"FAILED: {run.state.error}; the numbers above cover what was measured "
                          "until then."))
    parts += [Part(line, NOTE) for line in console_lines(run)]
    parts += [Part(f"note: {w}", NOTE) for w in [*warnings, *checks.notes(run)]]
    for line in checks.cache_lines(run):
        # the warning goes to stderr too: --quiet keeps it (the numbers it qualifies are kept)
        warn = line.startswith("WARNING")
        parts.append(Part(line, KEEP if warn else NOTE, err=warn))
    if run.status == "partial":
        parts.append(Part(incomplete_line(run) or partial_line))
    if run_dir is not None:
        write_report(run_dir)
        if mlflow is not None:          # --mlflow: the folder, report included (report/tracker)
            from llmbench.report.tracker import log_run
            parts.append(Part(log_run(mlflow, run_dir)[1]))
        parts.append(Part(f"Results: {run_dir}"))
    screen.show(parts, rows_used or 0, verbose or rows_used is None)
    board = board_now()
    if board is not None:                   # the page becomes the report (a sweep: goes on)
        board.finished(run_dir, run)


def board_now() -> Any:
    """The --dashboard open in this process and a notebook cell's live view, if any (its module
    is loaded only when one is)."""
    mod = sys.modules.get("llmbench.report.dashboard.handle")
    return mod.for_end() if mod is not None else None


def cell_view_open() -> bool:
    mod = sys.modules.get("llmbench.report.dashboard.handle")
    return bool(mod is not None and mod._CELL)


# -- llmbench run ---------------------------------------------------------------------------------

RUN_PARTIAL = "PARTIAL RESULT: the run was interrupted; the numbers cover what finished."

def close_run(plan: Any, run: Run, records: Any, texts: dict[str, str],
              run_dir: Path | None) -> int:
    """``llmbench run``'s closing screens, then the vLLM result file (--save-result); the exit
    code (results.schema.Run.exit_code)."""
    from llmbench.errors import EXIT_THRESHOLD
    from llmbench.load.shapes import OpenLoop
    from llmbench.report import vllm_json
    code = run.exit_code
    g, load, shape, s, f = plan.gates, run.config["load"], plan.shape, run.summary, run.findings
    assert s is not None
    print(console.vllm_summary(s, g.percentile_metrics, g.metric_percentiles,
                               max_concurrency=(shape.max_concurrency if isinstance(
                                   shape, OpenLoop) else None) or load["concurrency"],
                               request_rate=load["rate"]))
    screen.say(console.extras(s, f.monitor))
    for line in console.session_lines(f.sessions):
        print(line)
    if f.prefix_cache:
        print("\n".join(prefix_hit.lines(f.prefix_cache)))
    if f.trace is not None:
        for line in trace_lines(f.trace, f.trace["dispatch_lag"], f.trace["speed"]):
            print(line)
    if f.abandonment is not None:
        screen.say(console.abandonment_lines(f.abandonment))
    found = network.of_summary(s, f.network)
    if found is not None:
        screen.say(f"Network: {found.sentence}")
    if f.thresholds:
        screen.say(console.threshold_lines(f.thresholds))
    if plan.vllm is None:
        # the report reads the run folder: a long run's records need not sit beside it
        records.clear()
    print_closing(run, plan.common.workload.warnings, RUN_PARTIAL, run_dir,
                  mlflow=plan.common.watch.mlflow)
    if plan.vllm is not None:
        path, result = _vllm_result(plan, run, records, texts)
        vllm_json.write(path, result, plan.vllm.append)
        print(f"vLLM result JSON: {path}" + (" (appended)" if plan.vllm.append else ""))
    if code == EXIT_THRESHOLD:
        print(f"Thresholds failed: exit {EXIT_THRESHOLD}.")
    return code


def _vllm_result(plan: Any, run: Run, records: Any, texts: dict[str, str]
                 ) -> tuple[Path, dict[str, Any]]:
    import time
    from llmbench.load.shapes import OpenLoop
    from llmbench.report import vllm_json
    v = plan.vllm
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


def close_classes(plan: Any, run: Run, run_dir: Path | None) -> int:
    """``run --scenario``'s closing screens; the exit code (results.schema.Run.exit_code)."""
    from llmbench.errors import EXIT_THRESHOLD
    from llmbench import wire
    from llmbench.results.schema import Step
    code, s, f, load, shape = (run.exit_code, run.summary, run.findings, run.config["load"],
                               plan.shape)
    assert s is not None
    g = plan.gates
    print(console.vllm_summary(s, g.percentile_metrics, g.metric_percentiles,
                               max_concurrency=load["concurrency"], request_rate=load["rate"]))
    screen.say(console.extras(s, f.monitor))
    if f.classes:
        print()
        print(console.ramp_header("Users" if shape.by == "users" else "Req/s",
                                  wire.get(plan.common.target.api).output))
        for row in console.class_rows(Step(load=shape.steps[0], summary=s, classes=f.classes)):
            print(row)
    if f.abandonment is not None:
        screen.say(console.abandonment_lines(f.abandonment))
    if f.thresholds:
        screen.say(console.threshold_lines(f.thresholds))
    print_closing(run, plan.scenario.warnings, RUN_PARTIAL, run_dir)
    if code == EXIT_THRESHOLD:
        print(f"Thresholds failed: exit {EXIT_THRESHOLD}.")
    return code

def trace_lines(trace: dict[str, Any], lag: dict[str, Any], speed: float) -> list[str]:
    """``run --trace``: the trace replayed, and how late its dispatch was."""
    lines = [f"Trace replay: {trace['format']} {trace['path']}, {trace['requests']} requests "
             f"over {trace['span_s'] / speed:.1f} s (speed {speed:g}x)"]
    if lag["requests"]:
        lines.append(f"Dispatch lag vs trace: p50 {lag['p50_ms']:.2f} ms, "
                     f"p99 {lag['p99_ms']:.2f} ms, max {lag['max_ms']:.2f} ms")
    if lag["behind"]:
        lines.append(f"warning: the replay could not keep up with the trace (dispatch lag p99 "
                     f"{lag['p99_ms']:.1f} ms > {BEHIND_P99_MS:g} ms): the server saw a gentler "
                     "load than the trace's; lower --trace-speed or use a faster machine")
    return lines


# -- llmbench ramp --------------------------------------------------------------------------------

def ramp_live_line(unit: str, n_steps: int | None, probe: bool = False) -> Callable[[Any], str]:
    """The ramp's live line (or the ``probe``'s), most telling first: the harness cuts it to the
    terminal's width, so what is cut at 80 columns is the least needed. ``n_steps`` None: a
    search (how many steps it takes is what it finds out)."""
    def line(v: Any) -> str:
        c, st, m = v.counters, v.live, v.monitor
        p95 = recent_p95(v.recent_ttft, v.now)
        if probe:                           # a probe's users are its load, all in flight
            where = f"{st.load:g} users"
        elif unit == "users":
            where = f"{st.users}/{st.load:g} users"
        else:
            where = f"{st.load:g} req/s"
        n = 0 if st.step is None else st.step + 1
        parts = [f"step {n}{f'/{n_steps}' if n_steps is not None else ' (search)'} "
                 f"{st.phase or ('' if probe else 'ramp-in')} {where}"]
        if not probe and m is not None and (m.lag_p99_ms > LAG_P99_LIMIT_MS / 2
                                            or m.cpu_pct > CPU_LIMIT_PCT * 0.8):
            parts.append("GEN NEAR LIMIT")
        parts += [f"TTFT p95 {console.fmt_ms(p95 * 1000 if p95 is not None else None)}",
                  f"~{v.events_last_s} tok/s", f"{c.failed} err",
                  *([] if probe else [f"{c.in_flight} in flight"]), f"{c.done} done"]
        if m is not None:
            parts.append(f"lag {m.lag_p99_ms:.1f}ms CPU {m.cpu_pct:.0f}%")
        return ", ".join(parts)
    return line


def plan_line(index: int, plan: Any, pacer: Any, unit: str) -> str | None:
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


def intro_lines(r: Any, unit_of: str) -> list[str]:
    """What the ramp does, said before its table: the search's plan, and how users join."""
    shape, out = r.shape, []
    pacer = shape.pacer
    if isinstance(pacer, SearchPacer):
        from llmbench.analysis.findlimit import duration
        unit = shape.unit
        res = "1 user" if shape.by == "users" else "5 % of the rate"
        first = f"{pacer.start:g} {'user' if unit == 'users' and pacer.start == 1 else unit}"
        settles = getattr(shape, "settle", None) is not None and shape.by == "users"
        grow = "x4, then doubling," if shape.by == "users" else "doubling"
        out.append(f"Searching for the limit: from {first}, {grow} until a step "
                   f"breaks (at most {pacer.top:g}), then narrowing to {res}; each step "
                   f"{duration(shape.ramp_in_s)} in{' (none going down)' * (shape.by == 'users')}, "
                   + (f"held up to {duration(shape.hold_s)}, less once its thresholds are "
                      "settled at 95 %" if settles else f"{duration(shape.hold_s)} held")
                   + f"; the limit then held {'up to ' * settles}"
                     f"{duration(pacer.sustain)} to confirm it, unless its own step "
                     "held that long"
                   + (f"; budget {duration(pacer.budget_s)}" if pacer.budget_s else "") + ".")
    if shape.join == "spread" and shape.by == "users":
        out.append(console.join_sentence(shape.join, agents=unit_of == "agents"))
    out += shape.trace_lines()
    return out


class RampTable:
    """The ramp's table as it runs: intro and header (``begin``), the search's plan lines, a row
    per judged step (each class's under it), each finished step saved and sent to the
    dashboard. ``r.table_rows``: the terminal rows it took, so the closing block is cut to the
    rows left under it (report.screen)."""

    def __init__(self, r: Any, harness: Any, run_dir: Path | None, dashboard: Any,
                 unit: str) -> None:
        self.r, self.harness, self.run_dir, self.dashboard = r, harness, run_dir, dashboard
        self.unit = unit
        self.agents = unit == "agents"     # sessions in the table (console.agent_ramp_row)
        self.pacer = r.shape.pacer
        size = screen.terminal()
        self.width = size[0] if size is not None else None
        self.floor: Any = None             # the network floor before the load (finish.network_of)
        self.after_step: Callable[[Any], None] | None = None   # the command's, first
        r.table_rows = 0

    def say(self, line: str) -> None:
        self.harness.say(line)
        self.r.table_rows += screen.rows_of(line, self.width)

    def begin(self, api: str) -> None:
        from llmbench import wire
        r, shape = self.r, self.r.shape
        if self.dashboard is not None:
            self.dashboard.plan(thresholds=[t.text for t in r.thresholds], repeat=r.repeat)
        for line in intro_lines(r, self.unit):
            print(line, flush=True)
        if r.scenario is not None:
            print("Traffic classes: " + ", ".join(
                f"{cp.name} ({cp.traffic.load_text()})" for cp in r.scenario.classes)
                + (f"; growing {r.scenario.grow}, the others fixed" if r.scenario.grow else ""),
                flush=True)
        self.say(console.agent_ramp_header() if self.agents else
                 console.ramp_header(self.unit.capitalize() if shape.by == "users" else "Req/s",
                                     wire.get(api).output))

    def on_plan(self, index: int, plan: Any) -> None:
        line = plan_line(index, plan, self.pacer, self.r.shape.unit)
        if line:
            self.say(line)

    def on_isolated(self, alone: Any) -> None:
        self.say(console.isolated_row(alone))

    def on_step(self, step: Any) -> None:
        from llmbench.analysis import finish
        from llmbench.load.harness import Outcome
        from llmbench.load.shapes.base import LiveState
        if self.after_step is not None:
            self.after_step(step)
        self.say(console.agent_ramp_row(step) if self.agents else console.ramp_row(step))
        for row in console.class_rows(step):
            self.say(row)
        shape = self.r.shape
        if getattr(shape, "settle", None) is not None and shape.by == "users":
            # a search that settles its steps says how long each hold was, and why it ended
            got = shape.settled.get(step.index)
            self.say("   " + (got.text if got is not None else
                             f"held the full {step.hold_end - step.hold_start:.1f} s: "
                             "not settled sooner"))
        if self.run_dir is not None or self.dashboard is not None:
            # every finished step is on disk at once: a killed ramp keeps its steps
            h = self.harness
            doc = finish.ramp(self.r, Outcome(None, h.records_so_far(), h.started_at,
                                              h.t0_perf, False, [], {}, LiveState()),
                              self.floor, going_on=True)
            data = doc.save(self.run_dir)
            if self.dashboard is not None:   # its thresholds, and the verdict so far
                self.dashboard.step(data["steps"][-1], data.get("verdict") or None)


def close_ramp(r: Any, run: Run, repeat: int, run_dir: Path | None) -> int:
    """A ramp's closing screens under its table, cut to the rows left on the terminal; the exit
    code (results.schema.Run.exit_code)."""
    from llmbench.analysis.finish import unit_of
    from llmbench.errors import EXIT_NOT_JUDGED, EXIT_THRESHOLD
    from llmbench.report.screen import EVIDENCE, KEEP, NOTE, Part
    code, unit = run.exit_code, r.shape.unit
    print()
    assert run.verdict is not None
    head = console.verdict_parts(run.verdict)
    if run.search is not None:
        head += [Part(line, EVIDENCE) for line in console.search_lines(run.search, unit)]
    if run.findings.abandonment is not None:
        head.append(Part("  " + console.abandonment_lines(run.findings.abandonment)
                         .replace("\n", "\n  ")))
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
    warnings = r.scenario.warnings if r.scenario is not None else r.common.workload.warnings
    print_closing(run, warnings,
                  "PARTIAL RESULT: the ramp was interrupted; finished steps are kept.",
                  run_dir, head=head, verbose=r.common.watch.verbose,
                  mlflow=r.common.watch.mlflow,
                  # the last repeat's table is the one on screen
                  rows_used=r.table_rows + 1 + _board_row())
    return code


def _board_row() -> int:
    """The row the live board leaves blank under the table when it clears itself from a
    terminal (rich's transient Live ends on a new line): counted, so the answer still fits."""
    try:
        return 1 if sys.stderr.isatty() else 0
    except (AttributeError, ValueError):
        return 0


# -- llmbench probe -------------------------------------------------------------------------------

# the probe's table fits 80 columns: each overhead as its point estimate, marked * when real
# (close_probe prints the legend); the intervals are under it, in run.json and report.html
PROBE_OVERHEADS = (("ttft_p50", "+TTFT50", 9), ("ttft_p95", "+TTFT95", 9), ("e2el_p50", "+E2EL50", 9),
             ("itl_p50", "+ITL50", 8))


def probe_row(step: Any) -> str:
    def ov(m: str) -> str:
        o = step.overhead(m)
        if o.overhead_ms is None or not o.ci_ms:
            return "-"
        return f"{o.overhead_ms:+.1f}{'*' if o.significant else ' '}"
    r, d = step.router, step.direct
    cells = " ".join(f"{ov(m):>{w}}" for m, _, w in PROBE_OVERHEADS)
    tok = f"{r.output_throughput or 0:.0f}/{d.output_throughput or 0:.0f}"
    return (f"{step.users:>5} {console.fmt_ms(r.ttft.median):>8} {console.fmt_ms(d.ttft.median):>8} {cells} "
            f"{tok:>11} {f'{r.failed or 0}/{d.failed or 0}':>5}")


PROBE_HEADER = (f"{'Users':>5} {'R TTFT50':>8} {'D TTFT50':>8} "
          + " ".join(f"{h:>{w}}" for _, h, w in PROBE_OVERHEADS)
          + f" {'R/D tok/s':>11} {'Err':>5}")


def interval_line(steps: list[Any]) -> str | None:
    """The TTFT p50 overhead's 95 % intervals, one clause a step, under the table."""
    parts = []
    for st in steps:
        o = st.overhead("ttft_p50")
        if o.ci_ms:
            lo, hi = o.ci_ms
            parts.append(f"{st.users:g} users [{lo:+.1f}, {hi:+.1f}]")
    return ("TTFT p50 overhead, 95 % interval (ms): " + "; ".join(parts) + ".") if parts else None


def implausible_line(steps: list[Any], backends: Backends | None) -> str | None:
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


def close_probe(plan: Any, run: Run, run_dir: Path | None) -> int:
    """What the probe says under its table, then the closing block; the exit code
    (Run.exit_code, the one rule: a lost worker's slices are never a pass)."""
    from llmbench.errors import EXIT_NOT_JUDGED
    steps: list[Any] = run.findings.router.steps
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
                   f"direct path stayed flat ({console.fmt_ms(b.direct_ttft_p50_ms)}).")
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
        spread = ", ".join(f"{k}: {v.share * 100:.0f}% (TTFT p50 {console.fmt_ms(v.ttft_p50_ms)}"
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
    code = run.exit_code
    print_closing(run, plan.common.workload.warnings,
                  "PARTIAL RESULT: the probe was interrupted; finished steps are kept.", run_dir)
    return code


# -- llmbench record ------------------------------------------------------------------------------

def record_summary(writer: Any) -> list[str]:
    """What ``llmbench record`` prints on the way out."""
    from llmbench.analysis.percentile import percentile
    s = writer.stats
    turns = sorted(writer.linker.turns.values())
    share = writer.share.share if writer.share else None

    def q(xs: list[float]) -> str:
        if not xs:
            return "-"
        return f"p50 {percentile(xs, 50):.1f} ms, p99 {percentile(xs, 99):.1f} ms"

    def n(k: int, what: str) -> str:
        return f"{k} {what}" + ("" if k == 1 else "s")
    out = [f"Recorded {n(s.requests, 'request')} in {n(len(turns), 'session')}"
           + (f" (turns per session: max {turns[-1]})" if turns else "")
           + (f"; {s.passed} other requests passed through" if s.passed else "")
           + (f"; {s.failed} failed: upstream down" if s.failed else "")]
    if s.requests:
        out.append(f"Tokens: {s.prompt_tokens} prompt, {s.output_tokens} output (the "
                   "server's usage)")
        out.append("Prompt tokens repeating an earlier prefix: "
                   + ("-" if share is None else f"{share * 100:.1f} %"))
        out.append(f"TTFT {q(s.ttft_ms)}; ITL {q(s.itl_ms)}; E2EL {q(s.e2el_ms)}")
    return out


# -- llmbench sweep -------------------------------------------------------------------------------

DRAIN_NOTE = "plus each step's drain (its window's last replies) and each server's start"


def ramp_estimate(config: dict[str, Any]) -> tuple[str, float]:
    """(what the ramp runs, its seconds at most) from the sweep's ramp config."""
    from llmbench.analysis.findlimit import duration
    ramp_in, hold = float(config.get("ramp_in_s") or 0), float(config.get("hold_s") or 0)
    repeat = int(config.get("repeat") or 1)
    unit = "users" if config.get("by", "users") == "users" else "req/s"
    find = config.get("find")
    if find:
        from llmbench.load.shapes.search import SearchPacer
        pacer = SearchPacer(by=config.get("by", "users"), start=float(find.get("start") or 1),
                            ramp_in_s=ramp_in, hold_s=hold, sustain_s=find.get("sustain_s"),
                            budget_s=find.get("budget_s"), ceiling=find.get("ceiling"))
        n = pacer.worst_case_steps()
        secs = (n - 1) * (ramp_in + hold) + ramp_in + pacer.sustain
        if pacer.budget_s:
            secs = min(secs, pacer.budget_s)
        what = (f"search from {pacer.start:g} {'user' if unit == 'users' and pacer.start == 1 else unit}, {'x4, then doubling,' if unit == 'users' else 'doubling'} up to {pacer.top:g}, then "
                f"narrowing to {'1 user' if unit == 'users' else '5 %'} and a "
                f"{duration(pacer.sustain)} confirmation: at most {n} steps "
                f"(usually about log2(limit) + 3)"
                + (f", or the budget of {duration(pacer.budget_s)}" if pacer.budget_s else ""))
    else:
        steps = list(config.get("steps") or [])
        secs = len(steps) * (ramp_in + hold)
        what = (f"{len(steps)} steps ({', '.join(f'{x:g}' for x in steps)} {unit}), each "
                f"{duration(ramp_in)} in and {duration(hold)} held, fewer if one breaks")
    if repeat > 1:
        what += f", {repeat} times"
        secs *= repeat
    return what, secs


@dataclass
class DryRunSetting:
    """One setting of a sweep's --dry-run: its name, whether a resumed folder holds it finished
    (kept, not run), its server command or --before command (shell text), and its URL."""

    name: str
    done: bool
    server: str | None
    before: str | None
    url: str


def sweep_dry_run(settings: str, rows: Sequence[DryRunSetting], config: dict[str, Any],
                  resume: Path | None, port: bool) -> str:
    """--dry-run's text: each setting's server command, URL and ramp (``config``: the sweep's
    ramp config), and how long it may take; ``resume``: the folder a resumed sweep goes on
    in; ``port``: a free port is chosen for {PORT}."""
    from llmbench.analysis.findlimit import duration
    what, secs = ramp_estimate(config)
    done = sum(r.done for r in rows)
    lines = [f"Dry run: a sweep of {settings}, {len(rows)} setting(s); nothing is started."]
    if resume is not None:
        lines.append(f"Resuming {resume}: {done} of {len(rows)} setting(s) "
                     "finished there are kept, not run again.")
    for i, r in enumerate(rows):
        if r.done:
            lines.append(f"\n== {r.name} ({i + 1} of {len(rows)}): done, kept ==")
            continue
        lines.append(f"\n== {r.name} ({i + 1} of {len(rows)}) ==")
        if r.server is not None:
            lines.append(f"  server:  {r.server}")
        elif r.before is not None:
            lines.append(f"  before:  {r.before}")
        lines.append(f"  url:     {r.url}" + ("  ({PORT}: a free port, chosen at the start)"
                                             if port else ""))
        lines.append(f"  ramp:    {what}")
        lines.append(f"  time:    at most {duration(secs)} ({DRAIN_NOTE})")
    left = len(rows) - done
    lines.append(f"\nIn all: at most {duration(secs * left)} for {left} "
                 f"setting(s), {DRAIN_NOTE}.")
    return "\n".join(lines)


def sweep_table(results: Sequence[Any], unit: str, load: float | None) -> str:
    """The sweep's table: each setting's users held, and its numbers at the common load."""
    from llmbench.analysis.sweep_judge import _fmt_held, amount as _amount
    fmt_ms = console.fmt_ms
    at = f"at {_amount(load, unit)}" if load is not None else "at a common load"
    # within 80 columns: what the last three columns were measured at is said above them
    head = f"{'setting':<28} {unit + ' held':>14}  {'TTFT p95':>9} {'ITL p50':>8} {'tok/s':>7}"
    rows = [f"{'':<45}{'(' + at + ')':^34}".rstrip(), head]
    for r in results:
        a = r.at_common_load.summary if r.at_common_load is not None else None
        held = _fmt_held(r) if r.held is not None else r.status.replace("_", " ")
        tok = a.output_throughput if a is not None else None
        rows.append(f"{r.name[:28]:<28} {held:>14}  {fmt_ms(a.ttft.p95 if a else None):>9} "
                    f"{fmt_ms(a.itl.median if a else None):>8} "
                    f"{'-' if tok is None else f'{tok:.1f}':>7}")
    return "\n".join(rows)
