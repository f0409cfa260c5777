"""Compare output: a console table and one HTML file with overlay charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from llmbench.analysis.compare import Change, Comparison, Loaded, headline
from llmbench.report import charts
from llmbench.report.console import fmt_ms
from llmbench.report.html import CSS, _chart, _table, e

# an improvement's headline: green, never the regression red
GOOD_CSS = ".verdict.good{background:#f4fff4;border-left-color:#2ca02c}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:+.1f}%"


def _change(c: Change) -> str:
    """A relative change in %, or for error rates a change in percentage points."""
    if c.absolute:
        pp = lambda v: f"{v * 100:+.1f} pp"       # noqa: E731
        ci = "" if c.ci is None else f" [{pp(c.ci[0])}, {pp(c.ci[1])}]"
        return pp(c.change) + ci
    ci = "" if c.ci is None else f" [{_pct(c.ci[0])}, {_pct(c.ci[1])}]"
    return _pct(c.change) + ci


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def answer_text(r: Any) -> str:
    """A compared run's answer in words (older comparisons: "held N")."""
    return r.answer or f"{r.name} held {r.held:g}"


# runs side by side in blocks of two, so the table keeps to 80 columns however many are compared
PER_BLOCK = 2


def console_text(result: Comparison) -> str:
    runs = result.runs
    lines = ["Runs: " + "; ".join(answer_text(r) for r in runs)]
    for first in range(0, len(runs), PER_BLOCK):
        block = range(first, min(first + PER_BLOCK, len(runs)))
        # each run's columns carry its name (its --label, else its folder), not a position
        lines.append(f"{'':>6} " + " ".join(f"{_cut(runs[i].name, 30):^30}" for i in block))
        lines.append(f"{'load':>6} " + " ".join(f"{'TTFT95':>12} {'ITL95':>8} {'tok/s':>8}"
                                                for _ in block))
        for row in result.table:
            cells = []
            for i in block:
                cell = row.runs[i]
                if cell is None:
                    cells.append(f"{'–':>12} {'–':>8} {'–':>8}")
                else:
                    mark = "" if cell.held else "!"
                    cells.append(f"{fmt_ms(cell.p95_ttft_ms) + mark:>12} "
                                 f"{fmt_ms(cell.p95_itl_ms):>8} "
                                 f"{cell.output_throughput or 0:>8.1f}")
            lines.append(f"{row.load:>6g} " + " ".join(cells))
    if any(cell is not None and not cell.held for row in result.table for cell in row.runs):
        lines.append("(! = that step did not hold)")
    lines.append(f"Change against {runs[0].name} (95% interval from the per-request data):")
    for c in result.checks:
        where = "" if c.load is None else f" at {c.load:g}"
        note = f" ({c.note})" if c.note else ""
        flag = "  REGRESSION" if c.regression else "  better" if c.improvement else ""
        lines.append(f"  {c.run}: {c.metric}{where}: {_change(c)}{note}{flag}")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    servers = [r for r in runs if r.server]
    if servers:
        lines.append("Servers: " + "; ".join(f"{r.name}: {r.server}" for r in servers))
    for d in result.server_differences:
        lines.append(f"Servers differed: {d['text']}")
    lines += headline(result)
    return "\n".join(lines)


def render(result: Comparison, runs: Sequence[Loaded]) -> str:
    title = "llmbench compare: " + " vs ".join(r.name for r in runs)
    body = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
            f"<style>{CSS}{GOOD_CSS}</style></head><body><h1>{e(title)}</h1>"]
    regs, better = result.regressions, result.improvements
    held = "; ".join(answer_text(r) for r in result.runs)
    head = headline(result)
    # red only for regressions; improvements are named in their own line, never in red
    body.append(f'<div class="verdict{" bad" if regs else " good" if better else ""}">'
                f"<b>{e(held)}.</b><br>{e(head[0])}<br>{e(head[1])}</div>")
    for w in result.warnings:
        body.append(f'<div class="verdict bad">{e(w)}</div>')
    for d in result.server_differences:
        body.append(f'<div class="verdict">Servers differed: {e(d["text"])}</div>')
    series = [(r.name, r.steps) for r in runs]
    body.append(_chart(charts.compare_overlay_chart(series, "users"), "compare overlay"))
    headers = ["load"]
    for r in runs:
        headers += [f"{r.name} TTFT p95", f"{r.name} ITL p95", f"{r.name} tok/s", r.name]
    rows = []
    for row in result.table:
        cells: list[Any] = [f"{row.load:g}"]
        for cell in row.runs:
            cells += (["–"] * 4 if cell is None else
                      [fmt_ms(cell.p95_ttft_ms), fmt_ms(cell.p95_itl_ms),
                       f"{cell.output_throughput:.1f}", "held" if cell.held else "over"])
        rows.append(cells)
    body.append("<h2>Side by side</h2>" + _table(headers, rows))
    rows = [[c.run, c.metric, "" if c.load is None else f"{c.load:g}",
             _change(c), c.note or "",
             "REGRESSION" if c.regression else "better" if c.improvement else ""]
            for c in result.checks]
    body.append(f"<h2>Change against {e(runs[0].name)}</h2>"
                + _table(["run", "metric", "load", "change [95% interval]", "note", ""], rows,
                         left=2))
    body.append("<h2>Runs</h2>" + _table(["name", "folder", "fingerprint", "status", "server"],
                                         [[r.name, r.path, r.fingerprint, r.status,
                                           r.server or "–"]
                                          for r in result.runs], left=5))
    body.append("</body></html>")
    return "\n".join(body)


def write(result: Comparison, runs: Sequence[Loaded], path: str | Path) -> Path:
    p = Path(path)
    p.write_text(render(result, runs), encoding="utf-8")
    return p
