"""One self-contained HTML file per run: verdict first, then tables, charts and settings.

Everything that came from a server, a dataset or a user (error bodies, labels, model names,
backend ids) goes through ``html.escape``; charts are inline SVG with markup stripped from
their text. No script, no external resource: it opens offline.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Sequence


from llmbench.results.display import local_time
from llmbench.analysis.slo import ThresholdError, parse_threshold
from llmbench.report import charts, svgplot
from llmbench.report.console import KIND_WORDS, class_cells, fmt_ms, join_sentence, step_cells
from llmbench.results.latencies import Latencies, read_jsonl
from llmbench.results.schema import (Check, ProbeStep, Run, ServerProbe, Step, Summary, Verdict,
                                     amount)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:1.4em;margin-bottom:4px} h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:.9em}
.verdict{background:#f4f8ff;border-left:4px solid #1f77b4;padding:10px 14px;margin:16px 0}
.verdict.bad{background:#fff5f4;border-left-color:#d62728}
.badge{display:inline-block;padding:1px 8px;border-radius:8px;font-size:.8em;background:#eee;margin-left:6px}
.badge.partial{background:#ffe8b3} .badge.failed{background:#f8c9c5}
table{border-collapse:collapse;font-size:.88em;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#fafafa}
td.l,th.l{text-align:left} tr.over td{background:#fff5f4} tr.held td{background:#f6fff5}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:.82em}
summary{cursor:pointer;color:#444;margin:8px 0}
.chart svg{max-width:100%;height:auto}
"""


def e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], classes: Sequence[str] = (),
           left: int = 0) -> str:
    out = ["<table><tr>" + "".join(f'<th class="{"l" if i < left else ""}">{e(h)}</th>'
                                   for i, h in enumerate(headers)) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{e(classes[i])}"' if i < len(classes) else ""
        out.append(f"<tr{cls}>" + "".join(f'<td class="{"l" if j < left else ""}">{e(v)}</td>'
                                         for j, v in enumerate(row)) + "</tr>")
    return "\n".join(out) + "</table>"


def _chart(chart: svgplot.Chart, title: str) -> str:
    svg = svgplot.render(chart)
    return f'<div class="chart" role="img" aria-label="{e(title)}" data-chart="{e(title)}">{svg}</div>'


def parsed_thresholds(texts: Sequence[str]) -> list[Any]:
    """The thresholds of these texts that parse (one that does not is judged, and said, where
    the run checks its thresholds)."""
    out = []
    for text in texts or ():
        try:
            out.append(parse_threshold(text))
        except ThresholdError:
            continue
    return out


def chart_thresholds(texts: Sequence[str]) -> dict[str, tuple[float, str]]:
    """The first TTFT and ITL latency threshold of these, with its statistic (the report's
    charts and the dashboard's draw the same lines)."""
    out: dict[str, tuple[float, str]] = {}
    for t in parsed_thresholds(texts):
        if t.metric in ("ttft", "itl") and t.stat in ("p95", "median", "p50", "p99", "p95_all",
                                                      "median_all", "p50_all", "p99_all"):
            out.setdefault(t.metric, (t.value, t.stat.replace("median", "p50")))
    return out


def _ms2(v: Any) -> str:
    """A latency in ms with two decimals: "–" with no data, "∞" when failures censor it."""
    if v is None:
        return "–"
    v = float(v)
    return "–" if v != v else "∞" if v == float("inf") else f"{v:.2f}"


def _step_rows(steps: Sequence[Step]) -> tuple[list[list[Any]], list[str]]:
    rows, classes = [], []
    for st in steps:
        failed = [c.text or c.threshold for c in st.failed_checks]
        rows.append(step_cells(st) + [("held" if st.held else f"{st.state}: " + "; ".join(failed))
                                      + (" (still drifting)" if st.drifting else "")])
        classes.append("held" if st.held else "over")
    return rows, classes


STEP_HEADERS = ["load", "requests", "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "TPOT p95",
                "E2EL p95", "out tok/s", "req/s", "errors", "result"]


def _classes(run: Run) -> list[str]:
    """--scenario: each class's verdict, its rows per step and, with --isolate, each class alone."""
    from llmbench.report.text import class_rows
    parts = class_rows(run)
    if not parts:
        return []
    v = run.verdict
    out = ["<h2>Traffic classes</h2>"]
    if v is not None and v.classes:
        rows = [[n, KIND_WORDS.get(c.kind, c.kind.replace("_", " ")),
                 c.text + (" (blamed)" if n in v.blamed else "")]
                for n, c in v.classes.items()]
        out.append(_table(["class", "reading", "what became of it"], rows,
                          ["over" if c.broke else "held" for c in v.classes.values()], left=3))
    rows, marks = [], []
    for load, n, c in parts:
        failed = [x.text or x.threshold for x in c.failed_checks]
        rows.append([f"{load:g}" if isinstance(load, (int, float)) else "–", n, *class_cells(c),
                     "held" if c.held else f"{c.state}: " + "; ".join(failed)])
        marks.append("held" if c.held else "over")
    out.append(_table([run.load_unit if run.kind == "ramp" else "load", "class", "its load", "requests", "TTFT p50", "TTFT p95",
                       "ITL p95", "E2EL p95", "out tok/s", "errors", "cancelled", "result"],
                      rows, marks, left=2))
    iso = run.findings.isolation
    if iso is not None:
        out.append("<h2>Each class alone (--isolate)</h2>")
        if iso.note:
            out.append(f"<p>{e(iso.note)}</p>")
        rows = []
        for a in iso.classes:
            for cmp in a.compared:
                rows.append([a.name, f"{a.load:g}", cmp.threshold, _ms2(cmp.mixed),
                             _ms2(cmp.alone), _ms2(cmp.added),
                             "held" if a.held else str(a.state)])
        if rows:
            out.append(_table(["class", "its load", "threshold", "with the others (ms)",
                               "alone (ms)", "the others added (ms)", "alone it"], rows,
                              ["held" if r[-1] == "held" else "over" for r in rows], left=3))
        out += [f"<p>{e(t)}</p>" for t in iso.text]
    return out


def _abandonment(run: Run) -> list[str]:
    """--abandon: what the users cancelled and whether the server let go of it."""
    a = run.findings.abandonment
    if a is None:
        return []
    rel = a.release
    out = ["<h2>Users who gave up (--abandon)</h2>", f"<p>{e(a.sentence())}</p>"]
    if rel.text and a.cancelled:
        bad = rel.ok is False
        out.append(f'<div class="verdict{" bad" if bad else ""}">{e(rel.text)}</div>')
    return out
def steps_table(steps: Sequence[Step], unit: str) -> str:
    """A ramp's steps, one row each: the report's table, a notebook's and the dashboard's."""
    rows, classes = _step_rows(steps)
    return _table([unit if h == "load" else h for h in STEP_HEADERS], rows, classes)


def verdict_box(v: Verdict | dict[str, Any] | None, closed_loop_note: str | None = None,
                empty: str = "No step finished.") -> str:
    """A ramp's verdict as HTML, shared by the report, the dashboard and a notebook."""
    if isinstance(v, dict):
        v = Verdict.from_dict(v) if v else None
    bad = v is not None and v.kind != "held"
    text = v.headline if v is not None and v.headline else empty
    body = [f'<div class="verdict{" bad" if bad else ""}"><b>{e(text)}</b>']
    if v is not None:
        # steps that had not settled (stepstats); the knee is a clause of the headline
        for line in v.steady_note:
            body.append(f'<br><span class="drift">{e(line)}</span>')
        for line in v.evidence:
            body.append(f"<br>{e(line)}")
        for line in v.advice:
            body.append(f"<br><i>What to change:</i> {e(line)}")
    if closed_loop_note:
        body.append(f"<br><small>{e(closed_loop_note)}</small>")
    body.append("</div>")
    return "\n".join(body)


def _errors(summary: Summary, where: str = "") -> str:
    samples = summary.error_samples
    if not samples:
        return ""
    rows = [[where, s.kind, s.status or "", s.count, s.error or ""] for s in samples]
    return _table(["where", "kind", "status", "count", "first 200 characters of the body"], rows,
                  left=5)


def _settings(run: Run) -> str:
    parts = ["<h2>Workload, settings and environment</h2>"]
    wl = run.workload or {}
    parts.append(_table(["workload", ""], [[k, json.dumps(v) if isinstance(v, (dict, list)) else v]
                                           for k, v in wl.items()], left=2))
    labels = run.state.labels or {}
    if labels:
        parts.append(_table(["label", "value"], sorted(labels.items()), left=2))
    # the raw configuration is for the curious: folded, so it does not fill the page's end
    parts.append("<details><summary>Configuration as recorded in run.json</summary><pre>"
                 + e(json.dumps(run.config, indent=2)) + "</pre></details>")
    env = run.environment or {}
    parts.append(_table(["environment", ""], [[k, " ".join(v) if isinstance(v, list) else v]
                                              for k, v in env.items()], left=2))
    return "\n".join(parts)


SESSION_HEADERS = ["sessions done", "per min", "session p50", "session p95", "model / tool",
                   "step TTFT p50", "step TTFT p95", "from cache", "calls answered in text"]


def _sessions(label: str, rows: Sequence[tuple[str, Any]]) -> list[str]:
    """Agent sessions (results.sessions.Sessions) as a table, one row per step (or the run);
    nothing when no row had any (docs/agents.md)."""
    rows = [(k, x) for k, x in rows if x is not None]
    if not rows:
        return []
    out = []
    for k, x in rows:
        d = x.duration
        split = (f"{100 * x.model.mean / d.mean:.0f}% / {100 * (x.tool.mean or 0) / d.mean:.0f}%"
                 if x.model.mean is not None and d.mean else "–")
        out.append([k, f"{x.completed} of {x.started}",
                    "–" if x.sessions_per_min is None else f"{x.sessions_per_min:.2f}",
                    fmt_ms(d.median), fmt_ms(d.p95), split, fmt_ms(x.step_ttft.median),
                    fmt_ms(x.step_ttft.p95),
                    "–" if x.cached_share is None else f"{100 * x.cached_share:.0f}%",
                    f"{x.text_replies} of {x.call_steps}" if x.call_steps else "–"])
    return ["<h2>Agent sessions</h2>", _table([label, *SESSION_HEADERS], out),
            "<p class=meta>A step's sessions are those whose first call started in its hold "
            "window, with all their calls.</p>"]


def _agents(run: Run) -> bool:
    """Whether the run's users were agents (--workload agent, or replayed sessions: the
    workload counts model calls), or any step had sessions."""
    params = (run.workload or {}).get("params") or {}
    return "model_calls" in params or any(getattr(st, "sessions", None) is not None
                                          for st in run.steps)


def _ramp(run: Run, lat: Latencies, run_dir: Path) -> list[str]:
    steps = run.steps
    unit = run.load_unit
    body = [verdict_box(run.verdict, run.findings.closed_loop_note)]
    join = str(run.section("ramp").get("join") or "start")
    found = run.search
    if found is not None:
        body += _search(run, unit)
    body.append("<h2>Steps</h2>" if found is None else "<h2>Steps, in the order tried</h2>")
    body.append(steps_table(steps, unit))
    body.append("<p class=meta>A step's numbers come from the requests that started in its hold "
                "window. " + e(join_sentence(join, agents=_agents(run))) + "</p>")
    # against load, the steps as a ramp that climbed (a search's: each load's counted step)
    steps = run.ladder() if found is not None else steps
    body += _sessions(unit, [(f"{st.load:g}", st.sessions) for st in steps])
    if steps:
        body.append("<h2>Latency and throughput against load</h2>")
        ths = chart_thresholds(run.thresholds_asked)
        body.append(_chart(charts.ramp_latency_chart(steps, ths, unit), "latency vs load"))
        body.append(_chart(charts.ramp_throughput_chart(steps, unit), "throughput vs load"))
        body.append("<h2>Latency distributions per step</h2>")
        ttft_groups, itl_groups = [], []
        for st in steps:
            w = lat.window(st.index, st.hold_start, st.hold_end)
            ttft_groups.append((f"{st.load:g}", w.ttft_ms[w.ok]))
            itl_groups.append((f"{st.load:g}", w.itls()))
        body.append(_chart(charts.distributions_chart(ttft_groups, f"TTFT per step ({unit})"),
                           "TTFT distribution"))
        body.append(_chart(charts.distributions_chart(itl_groups, f"ITL per step ({unit})"),
                           "ITL distribution"))
        body += _phase_steps(steps, unit)
        errs = "".join(_errors(st.summary, amount(st.load, unit)) for st in steps)
        if errs:
            body.append("<h2>Errors</h2>" + errs)
    body += _classes(run)
    body += _abandonment(run)
    body += _timeline(run, run_dir, unit)
    body += _server_machine(run, run_dir, unit)
    return body


def _phase_steps(steps: Sequence[Step], unit: str) -> list[str]:
    """Each step's request phases at p50 (analysis/phases.py); nothing for unstamped runs."""
    from llmbench.analysis.phases import KEY, read_phases
    from llmbench.records.phases import PHASES
    per = [(st, {p.name: p for p in read_phases(st.summary.extra)}) for st in steps
           if st.summary is not None]
    if not any(stats for _, stats in per):
        return []
    names = [n for n in PHASES if any(n in stats for _, stats in per)]
    rows = [[f"{st.load:g}", (st.summary.extra.get(KEY) or {}).get("new_connections", 0)]
            + [_ms2(stats[n].p50) if n in stats else "–" for n in names]
            for st, stats in per if stats]
    return ["<h2>Request phases per step (p50)</h2>",
            _table([unit, "new conns", *(PHASE_LABELS.get(n, n) for n in names)], rows,
                   left=1),
            f"<p class=meta>{e(PHASES_NOTE.format(new='counted per step'))}</p>"]


def _confirm_hold_s(s: Any) -> float:
    """How long the limit was held to confirm it: the sustain, or less when the confirmation
    settled early (analysis.settle: held beyond doubt)."""
    last = next((t for t in reversed(s.trials) if t.why == "confirm"), None)
    return last.hold_s if last is not None and last.ended == "held" else s.sustain_s


def _search(run: Run, unit: str) -> list[str]:
    """A search's answer, its bracket and interval, and its steps in the order tried."""
    s = run.search
    assert s is not None
    out = ["<h2>The search for the limit</h2>"]
    rows = [["answer", s.text], ["limit found", f"{s.limit:g} {unit}"],
            ["first load that broke", "–" if s.broke_at is None else f"{s.broke_at:g} {unit}"],
            ["why it broke", s.broke_because or "–"],
            ["interval", "–" if not s.interval else
             # users come whole (analysis.findlimit): no "1.83 to 2.00 users"
             (f"{s.interval[0]:g} to {s.interval[1]:g} {unit}: {s.interval_method}"
              if unit == "users" else
              f"{s.interval[0]:.2f} to {s.interval[1]:.2f} {unit}: {s.interval_method}")],
            ["confirmed", {True: f"yes, held {_confirm_hold_s(s):g} s", False: "no",
                           None: "not tried"}[s.confirmed]],
            ["steps", f"{s.steps_taken} ({s.search_steps} to search)"],
            ["time", f"{s.elapsed_s:.0f} s"
             + (f" of a {s.budget_s:g} s budget" if s.budget_s else "")],
            ["stopped", s.stopped], ["left uncertain", s.uncertain or "nothing"]]
    out.append(_table(["search", ""], rows, left=2))
    out.append(_chart(charts.search_chart(s, unit), "the search"))
    trows = [[i + 1, f"{t.load:g}", t.why, t.state or "–",
              "yes" if t.counted else "no", f"{t.hold_s:g} s",
              "; ".join(x for x in (t.note, t.ended_why) if x)]
             for i, t in enumerate(s.trials)]
    out.append(_table(["#", unit, "why", "judged", "counted", "hold", "note"], trows, left=7))
    return out


def _timeline(run: Run, run_dir: Path, unit: str = "users") -> list[str]:
    rows = read_jsonl(run_dir / "timeline.jsonl")
    if not rows:
        return []
    out = ["<h2>Timeline</h2>"]
    sp = run.findings.server_probe or ServerProbe()
    if sp.kind:
        out.append(f"<p class=meta>Server state from its own metrics ({e(sp.kind)}, "
                   f"{e(sp.samples)} samples) is drawn under the client's view.</p>")
    elif sp.note:
        out.append(f"<p class=meta>{e(sp.note)}</p>")
    out.append(_chart(charts.timeline_chart(rows, [st for st in run.steps if isinstance(st, Step)],
                                      run.state.t0_perf, unit), "timeline"))
    return out


def cell(v: Any, fmt: str = "{:.2f}") -> str:
    """A number for a table cell, as ``fmt`` writes it; "–" when there is none (None, NaN,
    inf, not a number). A number given as text (a hand-edited run.json) is written as its
    float."""
    x = svgplot.finite(v)
    return "–" if x is None else fmt.format(v if isinstance(v, (int, float)) else x)


def _machine_row(label: Any, t: Any) -> list[Any]:
    """One row of the server-machine table from a Telemetry (typed) or None."""
    from llmbench.analysis.telemetry import fmt_bytes
    srv, gen, m, h, g = t.server, t.llmbench, t.machine, t.host, t.gpu
    return [label,
            cell(srv.cores if srv else None) + (f" (max {srv.cores_max:.2f})"
                                                if srv and srv.cores_max is not None else ""),
            fmt_bytes(srv.rss_bytes_max) if srv else "–", cell(srv.threads_max if srv else None, "{}"),
            cell(gen.cores if gen else None),
            cell(m.busy_cores if m else None) + (f" of {m.cpus}" if m and m.cpus else ""),
            cell(h.busy_cores if h else None) + (f" of {h.cpus}" if h and h.cpus else ""),
            cell(g.util_pct_mean if g else None, "{:.0f}%"),
            cell(g.fb_used_mib_max / 1024 if g and g.fb_used_mib_max is not None else None,
               "{:.1f} GiB"),
            cell(g.power_w_mean if g else None, "{:.0f} W"),
            cell(g.j_per_token if g else None, "{:.3g}")
            + (f" ({g.energy_source})" if g and g.j_per_token is not None else "")]


def _server_machine(run: Run, run_dir: Path, unit: str = "users") -> list[str]:
    """What the server was and what its machine did (issue 39), per step or for the run."""
    from llmbench.analysis import telemetry as tm
    from llmbench.results.telemetry import RunTelemetry
    tel = run.findings.run_telemetry or RunTelemetry()
    ident = tm.identity_of(run)
    steps = [st for st in run.steps if isinstance(st, Step)]
    rows: list[list[Any]] = []
    for st in steps:
        if st.telemetry is not None:
            rows.append(_machine_row(f"{st.load:g}", st.telemetry))
    whole = tel.window
    if whole is not None and not steps:
        rows.append(_machine_row("whole run", whole))
    notes = [*tel.notes, *tel.quiet_notes]
    if not ident and not rows and not notes:
        return []
    out = ["<h2>The server and its machine</h2>"]
    line = tm.identity_line(ident)
    if line:
        out.append(f"<p>{e(line)}.</p>")
    if rows:
        out.append(_table([unit if steps else "", "server cores", "server RSS", "threads",
                           "llmbench cores", "this machine busy", "node exporter busy",
                           "GPU busy", "GPU memory", "GPU power", "J / output token"], rows,
                          left=1))
        out.append("<p class=meta>Cores: CPU seconds per second over each hold window, from "
                   "/proc's accounting of the process tree (user + system, all threads). Energy: "
                   "the GPUs' energy counters (counter) or their power integrated over the samples "
                   "(power), over the output tokens generated in the window.</p>")
    cpus = (tel.sources.get("local") or {}).get("cpus")
    if steps and rows:
        out.append(_chart(charts.ramp_server_chart(steps, unit, cpus), "server machine vs load"))
    samples = read_jsonl(run_dir / "telemetry.jsonl") if (run_dir / "telemetry.jsonl").exists() else []
    t0 = run.state.t0_perf
    if samples and t0 is not None:
        series = tm.series(samples, float(t0))
        if series:
            out.append(_chart(charts.telemetry_chart(series, steps, t0, cpus),
                              "server machine timeline"))
    for n in notes:
        out.append(f"<p class=meta>{e(n)}</p>")
    return out


def _prefix_cache(p: dict[str, Any] | None) -> list[str]:
    """--prefix-hit-ratio: target and achieved side by side, TTFT by cache hit and miss."""
    if not p:
        return []

    def pct(v: Any) -> str:
        return "–" if v is None else f"{v * 100:.1f}%"
    srv = p.get("server") or {}
    out = ["<h2>Prefix cache: target and achieved</h2>",
           _table(["", "hit ratio", "cached tokens", "prompt tokens"],
                  [["target", pct(p.get("target")), "", ""],
                   ["achieved (usage.cached_tokens)", pct(p["usage"].get("ratio")),
                    p["usage"].get("cached_tokens"), p["usage"].get("prompt_tokens")],
                   [f"achieved (server counters{', ' + srv['kind'] if srv.get('kind') else ''})",
                    pct(srv.get("ratio")), srv.get("hit_tokens", "–"),
                    srv.get("queried_tokens", "–")]], left=1)]
    rows = [[k, (p["ttft_ms"][k] or {}).get("count")] +
            [_ms2((p["ttft_ms"][k] or {}).get(st)) for st in ("median", "p90", "p99")]
            for k in ("hit", "miss")]
    out.append(_table(["TTFT ms by cache", "requests", "median", "p90", "p99"], rows, left=1))
    out.append(f"<p class=meta>Shared system prompts of {e(p.get('shared_tokens'))} tokens "
               f"({e(p.get('prefixes'))} of them, {e(p.get('block_tokens'))}-token blocks), each "
               "sent once before the run and not counted.</p>")
    out += [f'<div class="verdict bad">{e(w)}</div>' for w in p.get("warnings") or []]
    return out


def _run(run: Run, lat: Latencies, run_dir: Path) -> list[str]:
    s = run.summary or Summary()
    load_cfg = run.load_config
    level = (f"{load_cfg.get('concurrency')} concurrent" if load_cfg.get("concurrency")
             else f"{load_cfg.get('rate')} req/s")
    body = [f'<div class="verdict"><b>{e(s.completed)} requests succeeded, '
            f'{e(s.failed)} failed at {e(level)}.</b> TTFT p50 {e(fmt_ms(s.ttft.median))}, '
            f'p99 {e(fmt_ms(s.ttft.p99))}; ITL p50 {e(fmt_ms(s.itl.median))}; '
            f'{s.output_throughput or 0:.1f} output tok/s.</div>']
    from llmbench.analysis.metrics import bunching_sentence
    buffered = bunching_sentence(s.stream_bunching)
    if buffered:                    # right under the headline: its TTFT and ITL are a buffer's
        body.append(f'<div class="verdict bad">{e(buffered[0].upper() + buffered[1:])}.</div>')
    from llmbench.analysis.network import of_summary
    found = of_summary(s, run.findings.network)     # the network's share of TTFT, when large
    if found is not None:
        body.append(f'<div class="verdict">{e(found.sentence)}</div>')
    from llmbench.analysis.checks import cache_lines
    for line in cache_lines(run):   # the prefix cache's share, and when it flatters TTFT
        warn = line.startswith("WARNING: ")
        body.append(f'<div class="verdict bad">{e(line[9:])}</div>' if warn
                    else f"<p class=meta>{e(line)}.</p>")
    body.append("<h2>Summary (vLLM's names)</h2>")
    keys = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
            "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
            "max_output_tokens_per_s", "max_concurrent_requests"]
    vals = [(k, getattr(s, k)) for k in keys]
    rows = [[k, f"{v:.2f}" if isinstance(v, float) else v] for k, v in vals]
    body.append(_table(["metric", "value"], rows, left=1))
    lat_rows = []
    for m in ("ttft", "tpot", "itl", "e2el", "client_queue", "e2el_from_schedule", "itl_per_token",
              "max_gap"):
        lat_rows.append([m] + _stat_cells(s.metric(m), _ms2))
    for m in ("ttft", "e2el"):
        cens = s.metric(m).all_percentiles
        lat_rows.append([f"{m} incl. failures", "", _ms2(cens.get(50.0)), "",
                         _ms2(cens.get(90.0)), _ms2(cens.get(95.0)), _ms2(cens.get(99.0)), ""])
    body.append(_table(["ms", *_STATS], lat_rows, left=1))
    body.append("<p class=meta>vLLM's statistics count successful requests only (– when there "
                "were none). The rows <i>incl. failures</i> count every failed request as never "
                "answered (∞).</p>")
    if s.requests_with_reasoning:
        body += _reasoning(s)
    body += _phases(s)
    checks: list[Check] = run.findings.thresholds
    if checks:
        body.append(_table(["threshold", "result"],
                           [[c.text or c.threshold, "ok" if c.ok else "FAILED"]
                            for c in checks], ["held" if c.ok else "over" for c in checks],
                           left=1))
    if s.non_streaming:
        body.append("<p>Not streaming: TTFT equals E2EL (the reply arrives at once).</p>")
    body += _prefix_cache(run.findings.prefix_cache)
    body += _sessions("", [("run", run.findings.sessions)])
    body += _classes(run)
    body += _abandonment(run)
    body.append("<h2>Latency distributions</h2>")
    ok = lat.ok
    body.append(_chart(charts.cdfs_chart([("TTFT", lat.ttft_ms[ok]), ("E2EL", lat.e2el_ms[ok])],
                                         "TTFT and E2EL"), "TTFT and E2EL CDF"))
    body.append(_chart(charts.cdfs_chart([("ITL", lat.itls(charts.CDF_SAMPLE))],
                                         "Inter-token latency"), "ITL CDF"))
    errs = _errors(s)
    if errs:
        body.append("<h2>Errors</h2>" + errs)
    mon = run.findings.monitor or {}
    if mon.get("overloaded"):
        body.append('<div class="verdict bad">The load generator was busy during this run '
                    f'(event-loop lag p99 {mon.get("lag_p99_ms", 0):.1f} ms, CPU '
                    f'{mon.get("cpu_pct", 0):.0f}%): its latencies may be inflated.</div>')
    body += _timeline(run, run_dir)
    body += _server_machine(run, run_dir)
    return body


_STATS = ("mean", "median", "std", "p90", "p95", "p99", "max")


def _stat_cells(m: Any, fmt: Any) -> list[str]:
    return [fmt(getattr(m, stat)) for stat in _STATS]


PHASE_LABELS = {"blocked": "waiting for a connection", "dns": "DNS", "connect": "TCP connect",
                "tls": "TLS handshake", "send": "request written", "wait": "first byte",
                "first_token": "first token", "decode": "first to last token"}
PHASES_NOTE = ("Each request's time, phase by phase: they add up to its TTFT (up to the first "
               "token) and E2EL. DNS, connect and TLS are paid by new connections only "
               "({new} here); a reused connection goes straight to writing the request. "
               "The first byte is the network's round trip and the server's answer head; "
               "from it to the first token is the server's queue and prefill.")


def _phases(s: Summary | None) -> list[str]:
    """The run's request phases (analysis/phases.py); nothing for runs not stamped."""
    from llmbench.analysis.phases import KEY, read_phases
    stats = read_phases(s.extra) if s is not None else []
    if not stats:
        return []
    raw = s.extra.get(KEY) or {}
    rows = [[PHASE_LABELS.get(p.name, p.name), p.count, _ms2(p.p50), _ms2(p.p95),
             _ms2(p.p99), _ms2(p.max)] for p in stats]
    return ["<h2>Request phases</h2>",
            _table(["ms", "requests", "p50", "p95", "p99", "max"], rows, left=1),
            f"<p class=meta>{e(PHASES_NOTE.format(new=raw.get('new_connections', 0)))}</p>"]


def _reasoning(s: Summary) -> list[str]:
    """Only for a run where a reply reasoned: runs without reasoning look as before."""
    names = {"ttfo": "TTFO (first answer token)", "reasoning_time": "reasoning time",
             "output_itl": "answer ITL"}
    rows = [[label] + _stat_cells(s.metric(m), _ms2) for m, label in names.items()]

    def count(v: Any) -> str:
        return "–" if v is None else f"{float(v):.1f}"
    rows.append(["reasoning tokens (count)"] + _stat_cells(s.reasoning_tokens, count))
    return ["<h2>Reasoning</h2>",
            f"<p>{e(s.requests_with_reasoning)} of {e(s.completed)} replies reasoned "
            f"({e(s.total_reasoning_tokens)} reasoning tokens). TTFT above counts the "
            "first reasoning token, as vLLM does; TTFO is the first token of the answer, "
            "reasoning time runs from the first token to it, and the answer ITL is the gap "
            "between the answer's own tokens.</p>",
            _table(["ms", *_STATS], rows, left=1)]


def _probe(run: Run, lat: Latencies, run_dir: Path) -> list[str]:
    steps: list[ProbeStep] = run.findings.router.steps
    b = run.findings.router.bound
    msg = (f"Router-bound from {b.users} users: TTFT p50 overhead {b.first_overhead_ms:.1f} ms "
           f"-> {b.overhead_ms:.1f} ms while the direct path stayed flat." if b else
           "No step where the router's overhead grew while the direct path stayed flat.")
    body = [f'<div class="verdict{" bad" if b else ""}"><b>{e(msg)}</b></div>',
            "<h2>Overhead per step (router − direct, 95% bootstrap intervals)</h2>"]
    rows = []
    for st in steps:
        router, direct = st.router, st.direct
        row = [st.users, fmt_ms(router.ttft.median), fmt_ms(direct.ttft.median)]
        for m in ("ttft_p50", "ttft_p95", "e2el_p50", "itl_p50"):
            o = st.overhead(m)
            row.append("-" if o.overhead_ms is None or not o.ci_ms else
                       f"{o.overhead_ms:+.1f} [{o.ci_ms[0]:+.1f}, {o.ci_ms[1]:+.1f}]"
                       + (" *" if o.significant else ""))
        row += [f"{router.output_throughput or 0:.1f}", f"{direct.output_throughput or 0:.1f}"]
        rows.append(row)
    body.append(_table(["users", "router TTFT p50", "direct TTFT p50", "TTFT p50 ms", "TTFT p95 ms",
                        "E2EL p50 ms", "ITL p50 ms", "router tok/s", "direct tok/s"], rows))
    body.append("<p class=meta>* the interval excludes zero: a real difference, not noise.</p>")
    if steps:
        body.append(_chart(charts.probe_overhead_chart(steps), "router overhead"))
    be = run.findings.router.backends
    if be is not None:
        body.append("<h2>Backends behind the router</h2>")
        rows = [[k, str(v.requests), f"{v.share * 100:.1f}%", fmt_ms(v.ttft_p50_ms),
                 fmt_ms(v.ttft_p95_ms), fmt_ms(v.itl_p50_ms),
                 "-" if v.cache_hit_rate is None else f"{v.cache_hit_rate * 100:.0f}%"]
                for k, v in be.backends.items()]
        body.append(_table(["backend", "requests", "share", "TTFT p50", "TTFT p95", "ITL p50",
                            "prefix-cache hits"], rows, left=1))
        body.append(f"<p>Imbalance (max/mean): {be.imbalance or 0:.2f}.")
        if be.affinity is not None:
            a = be.affinity
            body.append(f" Conversation affinity: {a.same_backend_next_turn * 100:.0f}% of next "
                        f"turns on the same backend; {a.whole_conversation_on_one_backend * 100:.0f}% "
                        f"of {a.conversations} conversations stayed on one backend.")
        body.append("</p>")
    return body


def render(run_dir: str | Path) -> str:
    run_dir = Path(run_dir)
    run = Run.load(run_dir)
    lat = run.latencies()
    kind = run.kind
    status = run.status
    started = local_time(run.state.started_at) or "?"
    target = run.target
    title = f"llmbench {kind}: {target.get('model', '')} at {target.get('url', '')}"
    head = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
            f"<style>{CSS}</style></head><body>",
            f"<h1>{e(title)}<span class='badge {e(status)}'>{e(status)}</span></h1>",
            f"<div class=meta>{e(started)} · {e(run_dir.name)}</div>"]
    if status == "partial":
        head.append('<div class="verdict bad">This run was interrupted: the report shows what '
                    "finished before it stopped.</div>")
    if status == "failed":
        head.append('<div class="verdict bad">The run failed before measuring: '
                    f'{e(run.state.error)}</div>')
        return "\n".join(head + [_settings(run), "</body></html>"])
    return "\n".join(head + body(run, lat, run_dir) + [_settings(run), "</body></html>"])


def body(run: Run, lat: Latencies, run_dir: Path) -> list[str]:
    """A run's report between its title and its settings (a notebook shows the same)."""
    kind = run.kind
    return {"ramp": _ramp, "run": _run, "probe": _probe}.get(kind, _run)(run, lat, run_dir)


def write(run_dir: str | Path, out: str | Path | None = None) -> Path:
    run_dir = Path(run_dir)
    path = Path(out) if out else run_dir / "report.html"
    path.write_text(render(run_dir), encoding="utf-8")
    return path
