"""Results in Jupyter: how a ``Run`` (a run, ramp, probe or sweep) and a ``Step`` draw
themselves in a cell, and the live view a cell shows while a run goes.

``Run._repr_html_`` is the run's report.html between its title and its settings (the same
``html.body``: inline SVG, no script, no network) in a block whose styles apply to it alone,
not to the notebook; a run not written to a folder (``out=None``) shows what run.json holds.
Everything from a server, a dataset or a user is escaped, as in the report. Registered with
the result contract on import (llmbench/results/display.py).

``CellView`` is the live view in a cell (``progress="notebook"``, or by default in Jupyter):
the dashboard's numbers (report/dashboard/feed.py, fed the same way) drawn as a small HTML
block, updated in place through an IPython display handle once a second; its chart is redrawn
every ``CHART_EVERY_S`` only (drawing costs the interpreter lock the run's loop needs). When
the run ends it shrinks to one line: the Run the cell returns draws the rest.
"""

from __future__ import annotations

import html as _html
import re
import time
from pathlib import Path
from typing import Any

from llmbench.results.display import local_time
from llmbench.results import display
from llmbench.results.schema import Run, Step, Sweep

SCOPE = "llmbench-nb"
CHART_EVERY_S = 5.0


def e(x: Any) -> str:
    return _html.escape("" if x is None else str(x), quote=True)


def scoped(css: str, scope: str = SCOPE) -> str:
    """The report's CSS for one block: every selector under ``.scope`` (``body`` is the block),
    so a cell's output does not restyle the notebook around it."""
    out = []
    for sel, decl in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        parts = []
        for one in sel.split(","):
            one = one.strip()
            if not one:
                continue
            parts.append(f".{scope}" if one == "body" else
                         f".{scope} {one[5:]}" if one.startswith("body ") else f".{scope} {one}")
        out.append(",".join(parts) + "{" + decl + "}")
    return "".join(out)


def _block(parts: list[str]) -> str:
    from llmbench.report.html import CSS
    return (f'<div class="{SCOPE}"><style>{scoped(CSS)}'
            f".{SCOPE}{{max-width:none;margin:0;padding:0}}</style>" + "\n".join(parts) + "</div>")


def _title(run: Run | Sweep, what: str) -> str:
    """``llmbench {what}``, its status as a badge, when it started and its folder."""
    folder = f" · {run.path.name}" if run.path is not None else ""
    return (f"<h2>llmbench {e(what)}<span class='badge {e(run.status)}'>"
            f"{e(run.status)}</span></h2><div class=meta>{e(_started(run))}{e(folder)}</div>")


def _started(run: Run | Sweep) -> str:
    return local_time(run.started_at if isinstance(run, Sweep) else run.state.started_at)


def run_html(run: Run | Sweep) -> str:
    """A Run in a cell: its report's body (the same functions as report.html)."""
    if isinstance(run, Sweep):
        return _sweep(run)
    from llmbench.report import html
    target = run.target
    where = f": {target.get('model', '')} at {target.get('url', '')}" if target else ""
    parts = [_title(run, f"{run.kind}{where}")]
    if run.status == "failed":
        parts.append(f'<div class="verdict bad">The run failed before measuring: '
                     f'{e(run.state.error)}</div>')
        return _block(parts)
    folder = run.path
    if folder is not None and (folder / "run.json").is_file() \
            and (folder / "requests.jsonl").is_file():
        parts += html.body(run, run.latencies(), folder)
    else:
        parts += _without_folder(run)
    return _block(parts)


def _without_folder(run: Run) -> list[str]:
    """What run.json alone holds (no requests.jsonl to draw distributions from)."""
    from llmbench.report import charts, html
    out: list[str] = []
    if run.kind == "ramp":
        unit = run.load_unit
        steps = run.steps
        out += [html.verdict_box(run.verdict, run.findings.closed_loop_note),
                "<h3>Steps</h3>", html.steps_table(steps, unit)]
        if steps:
            ths = html.chart_thresholds(run.thresholds_asked)
            out += [html._chart(charts.ramp_latency_chart(steps, ths, unit), "latency vs load"),
                    html._chart(charts.ramp_throughput_chart(steps, unit), "throughput vs load")]
    elif run.summary is not None:
        out += [_summary_table(run.summary)]
        if run.findings.thresholds:
            out.append(_checks(run.findings.thresholds))
    return out


def _sweep(run: Sweep) -> str:
    from llmbench.report import sweep_html
    settings = run.settings or {}
    swept = " x ".join(k + " = " + ", ".join(map(str, v)) for k, v in settings.items())
    parts = [_title(run, f"sweep: {swept}")]
    parts += sweep_html.body(run, run.path if run.path is not None else Path("."))
    return _block(parts)


def _summary_table(s: Any) -> str:
    """A summary (results.schema.Summary): its counts and each latency's statistics."""
    from llmbench.report.html import _ms2 as _ms
    rows = [["requests", s.requests], ["succeeded", s.completed], ["failed", s.failed],
            ["output tok/s", f"{s.output_throughput or 0:.1f}"],
            ["requests/s", f"{s.request_throughput or 0:.2f}"]]
    head = "<table><tr><th>metric</th><th>value</th></tr>" + "".join(
        f'<tr><td class="l">{e(k)}</td><td>{e(v)}</td></tr>' for k, v in rows) + "</table>"
    lat = ["<table><tr><th class=l>ms</th>" + "".join(
        f"<th>{x}</th>" for x in ("mean", "median", "p90", "p95", "p99", "max")) + "</tr>"]
    for m in ("ttft", "itl", "tpot", "e2el"):
        x = s.metric(m)
        lat.append(f'<tr><td class="l">{m}</td>' + "".join(
            f"<td>{e(_ms(v))}</td>" for v in (x.mean, x.p50, x.p90, x.p95, x.p99, x.max))
            + "</tr>")
    return head + "".join(lat) + "</table>"


def _checks(checks: list[Any]) -> str:
    """Thresholds (results.schema.Check), each ok or failed."""
    rows = "".join(
        f'<tr class="{"held" if c.ok else "over"}"><td class="l">'
        f'{e(c.text or c.threshold)}</td><td>{"ok" if c.ok else "FAILED"}</td></tr>'
        for c in checks)
    return f"<table><tr><th class=l>threshold</th><th>result</th></tr>{rows}</table>"


def step_html(step: Step) -> str:
    """A Step in a cell: its load and result, each threshold, its summary."""
    state = "held" if step.held else (step.state or "–")
    parts = [f"<h3>Step {e(step.index + 1)}: {e(f'{step.load:g}')} "
             f"<span class='badge {'held' if step.held else 'failed'}'>{e(state)}</span></h3>"]
    if step.checks:
        parts.append(_checks(step.checks))
    parts.append(_summary_table(step.summary))
    return _block(parts)


display.register_html("run", run_html)
display.register_html("step", step_html)


# -- the live view in a cell --------------------------------------------------------------------
def in_notebook() -> bool:
    """Inside a Jupyter kernel (IPython's ZMQ shell), where a cell can show HTML."""
    import sys
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - not a running IPython
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class CellView:
    """The live view in a notebook cell: the dashboard's messages (begin, tick, step, final)
    applied to the dashboard's own store in this process and drawn into a display handle."""

    def __init__(self) -> None:
        from IPython.display import HTML, display as show
        from llmbench.report.dashboard.server import Store
        self._HTML = HTML
        self.store = Store()
        self._chart = ""
        self._chart_at = 0.0
        self.handle = show(HTML('<div class="llmbench-nb meta">llmbench: starting…</div>'),
                           display_id=True)
        self.final = False

    def send(self, msg: dict[str, Any]) -> None:
        self.store.apply(msg)
        if msg.get("type") in ("final", "failed"):
            self.final = True
        self._draw(force=msg.get("type") != "tick")

    def _draw(self, force: bool = False) -> None:
        from llmbench.report.dashboard import page
        with self.store.cond:
            state = {**self.store.state, "version": self.store.version,
                     "rows": [self.store.rows[k] for k in sorted(self.store.rows)]}
        status = state.get("status")
        if status in ("final", "failed"):
            line = ("the run failed before measuring: " + str(state.get("error"))
                    if status == "failed" else _final_line(state))
            self.handle.update(self._HTML(f'<div class="{SCOPE}"><b>llmbench</b>: {e(line)}'
                                          "</div>"))
            return
        now = time.monotonic()
        if force or now - self._chart_at >= CHART_EVERY_S:
            self._chart, self._chart_at = page.live_chart(state), now
        t = page.texts(state)
        cards = "".join(f'<span style="margin-right:14px"><b>{e(t.get(k, "–"))}</b> '
                        f'<small>{e(label)}</small></span>' for k, label in page.CARDS)
        gen = " · ".join(f"{label} {e(t.get(k, '–'))}" for k, label in page.GENERATOR)
        body = [f"<div><b>{e(page.title(state.get('meta') or {}))}</b></div>",
                f"<div>{cards}</div>", f"<div class=meta>generator: {gen}</div>",
                page.verdict_html(state) if state.get("verdict") else "",
                page.thresholds_table(state), self._chart]
        self.handle.update(self._HTML(_block(body)))


def cell_view() -> Any:
    """A live view in this cell, as a dashboard the harness feeds (report/dashboard/handle)."""
    from llmbench.report.dashboard.handle import Dashboard
    return Dashboard.in_cell(CellView())


def _final_line(state: dict[str, Any]) -> str:
    """The finished run's one headline (results.folder.headline of the typed Run the final
    message carries, as run.json's dict), else the last verdict the page had."""
    from llmbench.errors import UsageError
    from llmbench.results.folder import headline
    from llmbench.results.jsonfile import RunFolderError
    from llmbench.results.schema import Run
    brief = state.get("run") or {}
    try:
        # the brief names every part it may carry; those it has not are None, not parts
        line = headline(Run.from_dict({k: v for k, v in brief.items() if v is not None})) \
            if brief else ""
    except (UsageError, RunFolderError):    # a part it cannot show: the verdict's own words
        line = ""
    return (line or ((brief.get("verdict") or {}).get("result") if brief else None)
            or (state.get("verdict") or {}).get("result") or "the run has ended")
