"""Markdown (to paste into a PR) and CSV (the per-step table) from a run folder.

With traffic classes (``--scenario``) both carry each class's own figures: the CSV a row per
class under each step's (``class`` empty on the whole crowd's row, ``class_load`` its own
load), the markdown ``_md_classes`` (docs/results.md)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Callable

from llmbench.report.console import KIND_WORDS, class_cells, fmt_ms, step_cells
from llmbench.results.schema import ClassStep, ProbeStep, Run, Step, Summary

# a column's header is the summary's key (run.json's name), its cell the contract's field
_CELLS: dict[str, Callable[[Summary], Any]] = {
    "requests": lambda s: s.requests, "completed": lambda s: s.completed,
    "failed": lambda s: s.failed, "duration": lambda s: s.duration_s,
    "median_ttft_ms": lambda s: s.ttft.median, "mean_ttft_ms": lambda s: s.ttft.mean,
    "p95_ttft_ms": lambda s: s.ttft.p95, "p99_ttft_ms": lambda s: s.ttft.p99,
    "mean_tpot_ms": lambda s: s.tpot.mean, "p95_tpot_ms": lambda s: s.tpot.p95,
    "median_itl_ms": lambda s: s.itl.median, "p95_itl_ms": lambda s: s.itl.p95,
    "p99_itl_ms": lambda s: s.itl.p99,
    "p95_e2el_ms": lambda s: s.e2el.p95, "p99_e2el_ms": lambda s: s.e2el.p99,
    "output_throughput": lambda s: s.output_throughput,
    "request_throughput": lambda s: s.request_throughput,
}
CSV_COLUMNS = ["load", "requests", "completed", "failed", "median_ttft_ms", "p95_ttft_ms",
               "p99_ttft_ms", "median_itl_ms", "p95_itl_ms", "p95_tpot_ms", "p95_e2el_ms",
               "output_throughput", "request_throughput", "held", "state"]


def _steps(run: Run) -> list[tuple[Any, Summary, Step | None]]:
    """(load, summary, step): a ramp's steps; a run as one row at its load level (no step)."""
    if run.kind == "ramp":
        return [(st.load, st.summary, st) for st in run.steps]
    if run.kind == "run" and run.summary is not None and run.summary.read_keys != ():
        return [(run.load_level, run.summary, None)]
    return []


def class_rows(run: Run) -> list[tuple[Any, str, ClassStep]]:
    """(the step's load, class, its part) of each class at each step (a run: its one level)."""
    if run.kind == "ramp":
        return [(st.load, n, c) for st in run.steps if isinstance(st, Step)
                for n, c in st.classes.items()]
    if run.kind == "run":
        return [(run.load_level, n, c) for n, c in run.findings.classes.items()]
    return []


def to_csv(run_dir: str | Path) -> str:
    from llmbench.report.export import csv_cell
    run = Run.load(run_dir)
    buf = io.StringIO()
    plain = csv.writer(buf)

    def writerow(row: list[Any]) -> None:      # each cell as every llmbench CSV writes it
        plain.writerow([csv_cell(v) for v in row])
    if run.kind == "probe":
        writerow(["users", "router_ttft_p50_ms", "direct_ttft_p50_ms", "ttft_p50_overhead_ms",
                  "ci_low_ms", "ci_high_ms", "significant", "router_tok_s", "direct_tok_s"])
        probe_steps: list[ProbeStep] = run.findings.router.steps
        for pst in probe_steps:
            o = pst.ttft_p50
            router, direct = pst.router, pst.direct
            writerow([pst.users, router.ttft.median, direct.ttft.median,
                      o.overhead_ms, *(o.ci_ms or [None, None]), o.significant,
                        router.output_throughput, direct.output_throughput])
        return buf.getvalue()
    classes = bool(class_rows(run))
    writerow(CSV_COLUMNS[:1] + (["class", "class_load"] if classes else []) + CSV_COLUMNS[1:])
    per_class: dict[Any, list[tuple[str, ClassStep]]] = {}
    for load, name, c in class_rows(run):
        per_class.setdefault(load, []).append((name, c))
    for load, s, st in _steps(run):
        held = [st.held, st.state] if st is not None else [None, None]
        if run.kind == "run" and classes:
            bad = [c for c in run.findings.thresholds if not c.ok]
            held = [not bad, "over" if bad else "held"]
        writerow([load] + (["", None] if classes else [])
                 + [_CELLS[k](s) for k in CSV_COLUMNS[1:-2]] + held)
        parts = list(st.classes.items()) if st is not None else per_class.get(load, [])
        for name, c in parts:
            writerow([load, name, c.load] + [_CELLS[k](c.summary) for k in CSV_COLUMNS[1:-2]]
                     + [c.held, c.state])
    return buf.getvalue()


def _md_escape(text: Any) -> str:
    """Prose and table cells. Markdown, not HTML: `&gt;` would print as is in a terminal and in
    code, so only what markdown itself reads is escaped: a table's `|`, and `<` (it could open
    an HTML tag; `\\<` shows as `<`). `>` opens nothing in the middle of a line."""
    return str(text).replace("|", "\\|").replace("<", "\\<").replace("\n", " ")


def _md_code(text: Any) -> str:
    """Inside a `code span`, markdown shows everything literally; only a backtick would end it."""
    return str(text).replace("`", "'").replace("\n", " ")


def _md_classes(run: Run) -> list[str]:
    """--scenario: each class's verdict, its row at each step, and each class alone."""
    rows = class_rows(run)
    if not rows:
        return []
    out = ["", "#### Traffic classes"]
    v = run.verdict
    if v is not None and v.classes:
        out.append("")
        for n, cv in v.classes.items():
            why = KIND_WORDS.get(cv.kind, cv.kind.replace("_", " "))
            out.append(f"- `{_md_code(n)}` ({_md_escape(why)}): {_md_escape(cv.text)}"
                       + (" **(blamed)**" if n in v.blamed else ""))
    out.append("")
    out.append(f"| {_md_escape(run.load_unit if run.kind == 'ramp' else 'load')} | class "
               "| its load | reqs | TTFT p50 | TTFT p95 | ITL p95 | E2EL p95 | out tok/s "
               "| errors | cancelled | |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for load, n, c in rows:
        failed = "; ".join(x.text or x.threshold for x in c.failed_checks)
        load_text = "–" if load is None else (f"{load:g}" if isinstance(load, (int, float))
                                              else str(load))
        cells = [load_text, f"`{_md_code(n)}`", *class_cells(c),
                 "held" if c.held else f"**{_md_escape(c.state)}**"
                 + (f": {_md_escape(failed)}" if failed else "")]
        out.append("| " + " | ".join(str(x) for x in cells) + " |")
    iso = run.findings.isolation
    if iso is not None:
        out.append("")
        out.append("#### Each class alone (--isolate)")
        if iso.note:
            out.append("")
            out.append(_md_escape(iso.note))
        out.append("")
        for t in iso.text:
            out.append(f"- {_md_escape(t)}")
    return out


def _md_ramp(run: Run) -> list[str]:
    out = []
    v = run.verdict
    out.append(f"**{_md_escape(v.headline if v is not None else '')}**")
    for line in v.evidence if v is not None else []:
        out.append(f"- {_md_escape(line)}")
    out.append("")
    # --abandon: the users who gave up, a column of their own (they are not errors)
    gave_up = any(st.summary.cancelled for st in run.steps)
    out.append("| users | reqs | TTFT p50 | TTFT p95 | ITL p50 | ITL p95 | TPOT p95 | E2EL p95 "
               "| out tok/s | req/s | errors |" + (" cancelled |" if gave_up else "")
               + " |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
               + ("---:|" if gave_up else "") + "---|")
    for st in run.steps:
        cells = [*step_cells(st), *([st.summary.cancelled or 0] if gave_up else []),
                 "held" if st.held else f"**{st.state}**"]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return out + _md_ramp_sessions(run) + _md_classes(run)


def _md_ramp_sessions(run: Run) -> list[str]:
    """A ramp of agents: each step's sessions (those that started in its hold)."""
    if not any(st.sessions is not None for st in run.steps):
        return []
    out = ["", "| agents | sessions done | session p50 | session p95 | step TTFT p50 "
               "| step TTFT p95 | from cache |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for st in run.steps:
        x = st.sessions
        if x is None:
            continue
        cached = f"{100 * x.cached_share:.0f}%" if x.cached_share is not None else "–"
        cells = [f"{st.load:g}", f"{x.completed} of {x.started}",
                 fmt_ms(x.duration.median), fmt_ms(x.duration.p95),
                 fmt_ms(x.step_ttft.median), fmt_ms(x.step_ttft.p95), cached]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return out


def _md_run(run: Run) -> list[str]:
    s = run.summary or Summary()
    out = ["| metric | value |\n|---|---:|"]
    for k in ("completed", "failed", "duration", "request_throughput", "output_throughput",
              "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_itl_ms",
              "p99_itl_ms", "p99_e2el_ms"):
        v = _CELLS[k](s)
        out.append(f"| {k} | {v:.2f} |" if isinstance(v, float) else f"| {k} | {v} |")
    if s.cancelled:              # --abandon: users who gave up, not failures
        out.append(f"| cancelled (users gave up) | {s.cancelled} "
                   f"({s.cancelled_waiting or 0} before a first token) |")
    out += _md_run_sessions(run)
    if run.findings.thresholds:
        out.append("")
        for c in run.findings.thresholds:
            # a class's check says its class and threshold ("tight: ttft.mean<=400ms: ...")
            out.append(f"- {'ok' if c.ok else '**FAIL**'}: "
                       + _md_escape(c.text or f"{c.threshold}: {c.reason or ''}"))
    return out + _md_classes(run)


def _md_run_sessions(run: Run) -> list[str]:
    """Agent sessions of a run (docs/agents.md), as rows of its table."""
    x = run.findings.sessions
    if x is None:
        return []
    return [f"| {k} | {v} |" for k, v in (
        ("sessions_completed", f"{x.completed} of {x.started}"),
        ("sessions_per_min", "–" if x.sessions_per_min is None
         else f"{x.sessions_per_min:.2f}"),
        ("session_p50", fmt_ms(x.duration.median)),
        ("session_p95", fmt_ms(x.duration.p95)),
        ("step_ttft_p95", fmt_ms(x.step_ttft.p95)),
        ("session_cached_share", "–" if x.cached_share is None
         else f"{100 * x.cached_share:.0f}%"))]


def _md_probe(run: Run) -> list[str]:
    out = ["| users | TTFT p50 overhead (95% CI) | router tok/s | direct tok/s |",
           "|---:|---|---:|---:|"]
    for pst in run.findings.router.steps:
        o = pst.ttft_p50
        ci = f"[{o.ci_ms[0]:+.1f}, {o.ci_ms[1]:+.1f}]" if o.ci_ms else ""
        ov = f"{o.overhead_ms:+.1f} ms {ci}" if o.overhead_ms is not None else "-"
        out.append(f"| {pst.users} | {ov} | {pst.router.output_throughput or 0:.1f} | "
                   f"{pst.direct.output_throughput or 0:.1f} |")
    return out


def _md_footer(run: Run) -> list[str]:
    wl = run.workload or {}
    out = ["", f"Workload `{_md_code(wl.get('source'))}` (fingerprint `{wl.get('fingerprint')}`, "
               f"tokenizer {_md_escape(wl.get('tokenizer'))}, seed {wl.get('seed')})."]
    labels = run.state.labels or {}
    if labels:
        out.append("Labels: " + ", ".join(f"`{_md_code(k)}={_md_code(v)}`"
                                          for k, v in sorted(labels.items())) + ".")
    return out


_MD_BODY = {"ramp": _md_ramp, "run": _md_run, "probe": _md_probe}


def to_markdown(run_dir: str | Path) -> str:
    run = Run.load(run_dir)
    kind = run.kind
    target = run.target
    out = [f"### llmbench {kind}: `{_md_code(target.get('model', ''))}`"
           + (" (partial)" if run.status == "partial" else "")]
    body = _MD_BODY.get(kind)
    if body is not None:
        out += body(run)
    return "\n".join(out + _md_footer(run)) + "\n"
