"""The sweep's page: the answer first, users held per setting (with intervals), throughput and
latency at a common load, each ramp against load, the servers' own state, and what failed.

Read from sweep.json and the ramps' run folders only, so ``llmbench report SWEEP_DIR`` rebuilds
it. Everything that came from a server, a command line or a log goes through ``html.escape``;
chart text is stripped of markup (charts.safe).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from llmbench.results.display import local_time
from llmbench.results.jsonfile import RunFolderError
from llmbench.results.schema import Run, Summary, Sweep, SweepSetting, amount
from llmbench.report import charts
from llmbench.report.console import fmt_ms
from llmbench.report.html import CSS, _chart, _sessions, _table, cell, e

EXTRA_CSS = """
details{margin:12px 0} summary{cursor:pointer;color:#444}
.sweep td:nth-child(8),.sweep td:nth-child(9){text-align:left}
"""


def _held_text(r: SweepSetting) -> str:
    if r.held is None:
        return "–"
    iv = r.held_interval
    if iv and iv.low is not None and iv.high is not None:
        return f"{r.held:g} [{iv.low:g}, {iv.high:g}]"
    return f"{r.held:g}"


def _labels(results: Sequence[SweepSetting]) -> list[str]:
    """Short tick labels: the value alone when one setting is swept."""
    single = bool(results) and len(results[0].setting) == 1
    return [charts.safe(next(iter(r.setting.values())) if single else r.name)
            for r in results]


def held_chart(results: Sequence[SweepSetting], unit: str, best: dict[str, str] | None,
               axis_name: str) -> charts.Chart:
    """``charts.sweep_held_chart`` of the sweep's results."""
    bars = []
    for label, r in zip(_labels(results), results):
        iv = r.held_interval
        bars.append(charts.HeldBar(label=label, held=r.held, low=iv.low if iv else None,
                                   high=iv.high if iv else None, status=r.status,
                                   best=r.setting == best, text=_held_text(r)))
    return charts.sweep_held_chart(bars, unit, axis_name,
                             repeats=any(r.held_interval for r in results))


def at_load_chart(results: Sequence[SweepSetting], load: float, unit: str,
                  axis_name: str) -> charts.Chart:
    """``charts.sweep_at_load_chart`` of the sweep's results."""
    values = []
    for r in results:
        at = _at_load(r)
        values.append(None if at is None else (at.ttft.p95, at.itl.median, at.output_throughput))
    return charts.sweep_at_load_chart(_labels(results), values, load, unit, axis_name)


def _runs(sweep_dir: Path, results: Sequence[SweepSetting]) -> list[tuple[SweepSetting, Run]]:
    """Each setting's ramp from its run folder (one whose folder is gone is left out)."""
    out = []
    for r in results:
        if not r.run_dir:
            continue
        try:
            out.append((r, Run.load(sweep_dir / r.run_dir)))
        except RunFolderError:
            continue
    return out


def _sessions_rows(runs: Sequence[tuple[SweepSetting, Run]], load: float | None,
                   unit: str) -> list[tuple[str, Any]]:
    """Agent sessions per setting (results.sessions, its ramp's steps): at the common load, and
    at the most it held when that is another step; a setting with no sessions has no row."""
    rows: list[tuple[str, Any]] = []
    for r, run in runs:
        ladder = run.ladder()
        loads = [] if load is None else [load]
        if r.held is not None and r.held not in loads:
            loads.append(r.held)
        for x in loads:
            st = next((s for s in ladder if float(s.load) == float(x)), None)
            if st is not None and st.sessions is not None:
                rows.append((f"{r.name} at {amount(x, unit)}"
                             + (" (held)" if x == r.held else ""), st.sessions))
    return rows


def _at_load(r: SweepSetting) -> Summary | None:
    """A setting's step at the common load (sweep.json's slim summary of it), if it had one."""
    a = r.at_common_load
    return a.summary if a is not None else None


def render(sweep_dir: str | Path) -> str:
    sweep_dir = Path(sweep_dir)
    doc = Sweep.load(sweep_dir)
    cfg = doc.config or {}
    settings = doc.settings or {}
    status = doc.status
    swept = " x ".join(k + " = " + ", ".join(v) for k, v in settings.items())
    title = f"llmbench sweep: {swept}"
    started = local_time(doc.started_at) or "?"
    where = " · ".join(x for x in (cfg.get("model"), cfg.get("url")) if x)
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
           f"<style>{CSS}{EXTRA_CSS}</style></head><body>",
           f"<h1>{e(title)}<span class='badge {e(status)}'>{e(status)}</span></h1>",
           f"<div class=meta>{e(started)} · {e(sweep_dir.name)}{' · ' + e(where) if where else ''}"
           "</div>"]
    out += body(doc, sweep_dir)
    out.append("</body></html>")
    return "\n".join(out)


def _answer(doc: Sweep) -> list[str]:
    """The sweep's answer, the thresholds a setting was held by, how the servers differed."""
    results = doc.results
    out: list[str] = []
    if doc.status != "complete":
        out.append('<div class="verdict bad">This sweep did not finish (interrupted or still '
                   "running): the page shows the settings that did.</div>")
    tied = [r for r in results if r.held is not None]
    top = max((r.held for r in tied if r.held is not None), default=0)
    # a tie on the evidence is an answer, not a failure
    bad = doc.best is None and not (top > 0 and sum(r.held == top for r in tied) > 1)
    out.append(f'<div class="verdict{" bad" if bad else ""}"><b>{e(doc.answer or "")}</b>')
    if doc.thresholds_asked:
        out.append(f"<br><small>Held = every threshold met in a step's hold window: "
                   f"{e(', '.join(doc.thresholds_asked))}.</small>")
    for d in doc.server_differences or []:
        out.append(f"<br>Servers differed: {e(d.text)}")
    out.append("</div>")
    return out


def _per_setting(doc: Sweep, unit: str) -> list[str]:
    """One row per setting at the common load, with a link to its ramp's report."""
    results, load, best = doc.results, doc.common_load, doc.best
    rows, classes = [], []
    for r in results:
        a = _at_load(r)
        link = (f'<a href="{e(r.run_dir)}/report.html">{e(r.run_dir)}</a>'
                if r.run_dir else "–")
        rows.append([r.name, r.status.replace("_", " "), _held_text(r).replace(" ", "\u00a0"),
                     fmt_ms(a and a.ttft.p95), fmt_ms(a and a.itl.median),
                     cell(a and a.output_throughput, "{:.1f}"), cell(a and a.failed, "{:g}"),
                     r.verdict or r.error or "", link])
        classes.append("held" if r.setting == best else
                       "over" if r.held is None else "")
    at = f" at {amount(load, unit)}" if load is not None else ""
    table = _table(["setting", "status", f"{unit} held", f"TTFT p95{at}", f"ITL p50{at}",
                    f"out tok/s{at}", f"errors{at}", "verdict", "ramp"], rows, classes, left=2)
    # the ramp column holds a link built from escaped parts: put it back unescaped
    for row in rows:
        table = table.replace(e(row[-1]), row[-1], 1)
    iv_method = next((r.held_interval.method for r in results
                      if r.held_interval), None)
    return ["<h2>Per setting</h2>", f"<div class=sweep>{table}</div>",
            "<p class=meta>" + (f"Intervals: {e(iv_method)}. " if iv_method else
                                "One ramp per setting: no interval (--repeat N gives one). ")
            + (f"The common load, {amount(load, unit)}, is the highest load every measured "
               "setting ran (held or not)." if load is not None else "") + "</p>"]


def _charts(doc: Sweep, sweep_dir: Path, unit: str, axis_name: str) -> list[str]:
    """Held per setting, then the common load's figures, the sessions, the ramps overlaid."""
    results, load = doc.results, doc.common_load
    measured = [r for r in results if r.held is not None]
    out: list[str] = []
    if results:
        out.append("<h2>Users held per setting</h2>" if unit == "users" else
                   "<h2>Load held per setting</h2>")
        out.append(_chart(held_chart(results, unit, doc.best, axis_name), "held per setting"))
    if measured and load is not None:
        out.append(f"<h2>Latency and throughput at {amount(load, unit)}</h2>")
        out.append(_chart(at_load_chart(measured, load, unit, axis_name), "at common load"))
    runs = _runs(sweep_dir, results)
    out += _sessions("setting", _sessions_rows(runs, load, unit))
    ramps = [(r.name, run.ladder()) for r, run in runs if run.steps]
    if ramps:
        out.append("<h2>Each ramp against load</h2>")
        out.append(_chart(charts.compare_overlay_chart(ramps, unit), "ramps overlaid"))
        out.append("<p class=meta>x marks the step where a ramp broke.</p>")
    return out


def _server_states(results: Sequence[SweepSetting]) -> list[str]:
    """The server's own state during each ramp, from its metrics."""
    states = [(r, r.server_state) for r in results if r.server_state]
    if not states:
        return []
    rows = [[r.name, st.kind or st.note or "–",
             cell(st.max_running, "{:g}"), cell(st.max_waiting, "{:g}"), cell(st.slots, "{:g}"),
             cell(st.max_kv_cache_usage, "{:.0%}"),
             cell(st.max_vram_bytes and st.max_vram_bytes / 1e9, "{:.2f} GB"),
             cell(st.preemptions, "{:g}"), ", ".join(st.models_loaded or []) or "–"]
            for r, st in states]
    return ["<h2>The server's own state during each ramp</h2>",
            _table(["setting", "server (probe)", "most running", "most waiting",
                    "slots", "KV cache (peak)", "VRAM (peak)", "preemptions",
                    "models loaded"], rows, left=2),
            "<p class=meta>From the server's own metrics, polled during the ramp: how "
            "many requests it ran and kept waiting at once confirms how many it serves "
            "in parallel with this setting.</p>"]


def _failures(results: Sequence[SweepSetting]) -> list[str]:
    failures = [r for r in results if r.log_tail or r.error]
    if not failures:
        return []
    out = ["<h2>Servers that failed</h2>"]
    for r in failures:
        out.append(f"<p><b>{e(r.name)}</b>: {e(r.error)} "
                   f"(log: <a href=\"{e(r.log)}\">{e(r.log)}</a>)</p>")
        if r.log_tail:
            out.append("<pre>" + e("\n".join(r.log_tail)) + "</pre>")
    return out


def _how_it_ran(doc: Sweep) -> list[str]:
    cfg = doc.config or {}
    rows: list[list[Any]] = [["mode", cfg.get("mode")], ["server command", cfg.get("command") or "–"],
            ["before", cfg.get("before") or "–"], ["url", cfg.get("url")],
            ["model", cfg.get("model") or "(asked from the server)"],
            ["ready timeout", f"{cfg.get('ready_timeout_s')} s"],
            ["stop grace", f"{cfg.get('stop_grace_s')} s"],
            ["repeats per setting", doc.repeats_per_ramp]]
    for r in doc.results:
        if r.ready_s is not None:
            rows.append([f"ready: {r.name}", f"{r.ready_s:g} s"])
    return ["<h2>How it ran</h2>", _table(["", ""], rows, left=2),
            "<details><summary>Ramp settings and environment (JSON)</summary><pre>"
            + e(json.dumps({"ramp": cfg.get("ramp") or {}, "labels": doc.labels,
                            "environment": doc.environment}, indent=2))
            + "</pre></details>"]


def body(doc: Sweep, sweep_dir: Path) -> list[str]:
    """The sweep's page under its title (a notebook shows the same: report/notebook.py)."""
    unit = doc.unit or "users"
    axis_name = " x ".join(doc.settings or {}) or "setting"
    return (_answer(doc) + _per_setting(doc, unit) + _charts(doc, sweep_dir, unit, axis_name)
            + _server_states(doc.results) + _failures(doc.results) + _how_it_ran(doc))


def write(sweep_dir: str | Path, out: str | Path | None = None) -> Path:
    sweep_dir = Path(sweep_dir)
    path = Path(out) if out else sweep_dir / "report.html"
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(render(sweep_dir), encoding="utf-8")
    os.replace(tmp, path)
    return path
