"""Every chart of every report, as a description (svgplot.Chart, from a ``*_chart`` builder;
the tests read it) drawn as inline SVG by svgplot: the HTML report stays one file that opens
offline, and no report imports matplotlib. A PNG (for slides: ``compare --png``) is the same
description drawn by matplotlib, imported only then (the ``png`` extra).

Rules every chart follows, so a picture cannot say more than the numbers (tests/unit/report/test_charts.py):
- an axis spans the data, from zero for sizes (ms, tok/s, requests): a threshold far above the
  data is written at the top edge ("threshold p95 ≤ 200 ms ↑"), not drawn by stretching the
  axis until the data is a flat line on the floor;
- one unit per axis, no twin axes: two traces on two scales read as if their crossing meant
  something, and when they are proportional (req/s and tok/s at a fixed reply length) one hides
  the other exactly;
- load ticks sit exactly on the steps (1, 2, 4, 8 users, not 3, 5, 7 or 1.5), labels thinned
  only where they would overprint;
- every trace is in a legend; overlapping traces differ in style, not only in colour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from llmbench.analysis import percentile
from llmbench.results.schema import ProbeStep, Step, amount
from llmbench.report import svgplot
from llmbench.report.svgplot import Chart, LegendEntry, Panel, Span

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c")       # matplotlib's first three (the statistics)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_STYLES = ("-", "--", "-.", ":")
_RED = "#d62728"
# A threshold up to this many times the data's top is drawn as a line on the axis (the data
# still fills at least half of it); further up it is an annotation at the top edge.
THRESHOLD_FACTOR = 2.0
FONT_PT = 9.0                     # tick labels: svgplot.FONT_PX at 100 dpi
PT_PER_PX = 0.72


def safe(text: Any) -> str:
    """Chart text never carries markup: an SVG inlined in HTML must not be an injection path."""
    return re.sub(r"[<>&\"']", "_", str(text))[:80]


def _finite(v: Any) -> float:
    f = svgplot.finite(v)
    return float("nan") if f is None else f


def _top(values: Sequence[Any]) -> float | None:
    """The largest finite value, None when there is none."""
    return max((f for f in map(svgplot.finite, values) if f is not None), default=None)


def _from_zero(p: Panel, top: float | None) -> None:
    """A size axis (ms, tok/s, requests) from zero to just above the data."""
    p.ylim = (0.0, top * 1.12 if top and top > 0 else 1.0)


def _step_marks(panels: Sequence[Any], starts: Sequence[tuple[float, Any]], unit: str) -> None:
    """Each step's start as a dotted line on every panel, labelled with its load on the top
    one (thinned so labels never overlap)."""
    if not starts:
        return
    for p in panels:
        for x, _ in starts:
            p.vline(x, "#777", ":", 0.9, "step-boundary")
    top = panels[0]
    xs = [x for x, _ in starts]
    texts = _thin(xs, [f"{ld:g}" if isinstance(ld, (int, float)) else "?" for _, ld in starts],
                  *top.xlim, top.w * 0.75, 7)            # px to pt: 100 dpi against 72
    for x, text in zip(xs, texts):
        if text:
            top.text(x, 1.0, text, coords="xaxis", offset=(0, 4), ha="center",
                     color="#555", cls="step-label")
    top.text(1.0, 1.0, f"step starts (dotted), labelled in {safe(unit)}", coords="axes",
             offset=(0, 18), ha="right", color="#555", cls="step-note")

def _server_panel(ax: Any, t: Any, col: Callable[[str], Any]) -> None:
    """The server's own running and waiting counts over time (its probe's samples)."""
    run_, wait_ = col("server_running"), col("server_waiting")
    _ylim(ax, [*run_, *wait_])
    # unclipped: a count of zero lies on the axis's floor and must still show
    ax.line(t, run_, "server: running", _COLORS[2], clip=False)
    ax.line(t, wait_, "server: waiting", _COLORS[1], "--", clip=False)
    ax.ylabel = "requests"

def _ylim(p: Panel, values: Sequence[Any]) -> None:
    _from_zero(p, _top(values))


def _row(n: int, width: float, panel_h: float, *, top: float = 30.0, left: float = 70.0,
         gap: float = 78.0, right: float = 16.0) -> list[Panel]:
    """N panels side by side (room between them for the next one's y ticks and label)."""
    w = (width - left - right - (n - 1) * gap) / n
    return [Panel(x0=left + i * (w + gap), y0=top, w=w, h=panel_h) for i in range(n)]


def _under(panels: Sequence[Panel]) -> float:
    """Pixels from the top to below the panels' x tick labels and axis labels."""
    return max(p.y0 + p.h for p in panels) + 40.0


def _stacked(n: int, labels: Sequence[str], xlim: tuple[float, float], h: float,
             gap: float = 14.0) -> list[Panel]:
    """N panels stacked on one time axis (its ticks labelled under the lowest), each legend
    beside its panel, as wide as the longest of ``labels`` needs."""
    legend_w = max([svgplot.text_w(x, svgplot.SMALL_PX) for x in labels] or [80]) + 34
    return [Panel(x0=70.0, y0=34.0 + k * (h + gap), w=950.0 - 70.0 - legend_w, h=h, xlim=xlim,
                  x_ticklabels=k == n - 1, legend_at="right") for k in range(n)]


def _with_legend(width: float, panels: list[Panel], entries: list[LegendEntry]) -> Chart:
    """A chart whose shared legend sits under its panels (inside an axis a legend covers the
    data it explains)."""
    h = _under(panels) + (6 + svgplot.shared_legend_height(len(entries)) if entries else 0) + 6
    return Chart(width, h, panels, legend=entries, legend_y=_under(panels) + 8)


def _thin(positions: Sequence[float], texts: Sequence[str], lo: float, hi: float,
          width_pt: float, font_pt: float) -> list[str]:
    """Keep the texts whose neighbours leave them room (first and last always kept), blank the
    rest: every tick stays at its step, labels never overprint."""
    if hi <= lo or width_pt <= 0:
        return list(texts)
    per_pt = (hi - lo) / width_pt

    def room(i: int, j: int) -> float:         # data distance texts i and j need between centres
        return ((len(texts[i]) + len(texts[j])) / 2 * 0.62 + 1.2) * font_pt * per_pt
    shown: list[int] = []
    for i, x in enumerate(positions):
        if not shown or x - positions[shown[-1]] >= room(shown[-1], i):
            shown.append(i)
    last = len(positions) - 1
    if shown and shown[-1] != last:
        while len(shown) > 1 and positions[last] - positions[shown[-1]] < room(shown[-1], last):
            shown.pop()
        shown.append(last)
    keep = set(shown)
    return [t if i in keep else "" for i, t in enumerate(texts)]


def _load_axis(p: Panel, loads: Sequence[float], unit: str) -> None:
    """Ticks exactly at the steps' loads (labelled 1, 2, 4 — integers stay integers)."""
    xs = sorted({float(x) for x in loads if x is not None and np.isfinite(float(x))})
    if not xs:
        return
    span = xs[-1] - xs[0]
    pad = span * 0.06 if span > 0 else max(abs(xs[0]) * 0.5, 0.5)
    p.xlim = (xs[0] - pad, xs[-1] + pad)
    p.xticks = xs
    p.xticklabels = _thin(xs, [f"{x:g}" for x in xs], xs[0] - pad, xs[-1] + pad,
                          p.w * PT_PER_PX, FONT_PT)
    p.xlabel = unit


def _boundary(p: Panel, loads: Sequence[float], held: Sequence[bool]) -> None:
    """Shade each step that did not hold (from halfway to its neighbours), and mark where the
    ramp first broke. Steps that held after a broken one (--keep-going) stay unshaded."""
    if all(held) or not loads:
        return
    xs = list(loads)
    gaps = [b - a for a, b in zip(xs, xs[1:])] or [1.0]
    labelled = False
    for i, (x, h) in enumerate(zip(xs, held)):
        if h:
            continue
        left = x - (xs[i] - xs[i - 1]) / 2 if i > 0 else x - gaps[0] / 2
        right = x + (xs[i + 1] - xs[i]) / 2 if i + 1 < len(xs) else x + gaps[-1] / 2
        p.marks.append(Span(left, right, _RED, 0.07, None if labelled else "did not hold"))
        if not labelled:
            p.vline(left, _RED, ":", 1.2, "broke")
        labelled = True


def _against_load(p: Panel, steps: Sequence[Step], unit: str, title: str, ylabel: str) -> None:
    """A panel against the steps' load: those that did not hold shaded, ticks on the loads."""
    loads = [s.load for s in steps]
    _boundary(p, loads, [s.held for s in steps])
    p.title, p.title_loc, p.ylabel = title, "left", ylabel
    _load_axis(p, loads, unit)


def _threshold(p: Panel, given: Any, data_top: float | None) -> float | None:
    """Draw a threshold (``given``: its limit in ms, or (limit, stat); None: none) as a line or,
    past THRESHOLD_FACTOR, a note at the top edge; returns the top the axis must reach."""
    if given is None:
        return data_top
    limit, stat = given if isinstance(given, tuple) else (given, None)
    limit = float(limit)
    what = f"{stat} ≤ {limit:g} ms" if stat else f"{limit:g} ms"
    if data_top is None or limit <= THRESHOLD_FACTOR * data_top:
        p.hline(limit, _RED, "--", 1.0, "threshold", label="threshold")
        # the value at the line's left end, where a ramp's latency is still low
        p.text(0.01, limit, what, coords="yaxis", offset=(0, 3), ha="left", va="bottom",
               color=_RED, cls="threshold-label")
        return max(data_top or 0.0, limit)
    # inside the top edge, in the headroom _from_zero leaves above the data (none of it there)
    p.text(0.99, 0.985, f"threshold {what} ↑", coords="axes", ha="right", va="top", color=_RED,
           size=11.0, cls="threshold-off-scale")
    return data_top * 1.06


def ramp_latency_chart(steps: Sequence[Step], thresholds: dict[str, Any],
                       unit: str) -> Chart:
    """TTFT and ITL (median, p95, p99) against load. ``thresholds`` maps a metric to its limit
    in ms, or to (limit, stat) so the line can say which statistic it bounds."""
    loads = [s.load for s in steps]
    panels = _row(2, 950, 250)
    for p, metric, title in ((panels[0], "ttft", "Time to first token"),
                             (panels[1], "itl", "Time between tokens (ITL)")):
        tops = []
        for (stat, style, marker), color in zip((("median", "-", "o"), ("p95", "-", "s"),
                                                 ("p99", ":", "^")), _CYCLE):
            # a step with no data has no point (None, or "inf" read back from run.json)
            ys = [_finite(s.summary.value(metric, stat)) for s in steps]
            p.line(loads, ys, stat, color, style, 1.5, marker=marker, marker_size=4)
            tops.append(_top(ys))
        top = _top([t for t in tops if t is not None])
        _from_zero(p, _threshold(p, thresholds.get(metric), top))
        _against_load(p, steps, unit, title, "ms")
    return _with_legend(950, panels, svgplot.shared_legend(panels))


def ramp_throughput_chart(steps: Sequence[Step], unit: str) -> Chart:
    """Output tokens/s and requests/s in two panels: on twin axes one would hide the other."""
    loads = [s.load for s in steps]
    panels = _row(2, 950, 210)
    for p, key, title, ylabel, c, m in (
            (panels[0], "output_throughput", "Output tokens per second", "out tok/s", _COLORS[0], "o"),
            (panels[1], "request_throughput", "Requests per second", "req/s", _COLORS[2], "s")):
        ys = [_finite(getattr(s.summary, key)) for s in steps]
        p.line(loads, ys, ylabel, c, "-", 1.5, marker=m, marker_size=4)
        _from_zero(p, _top(ys))
        _against_load(p, steps, unit, title, ylabel)
    entries = [e for e in svgplot.shared_legend(panels) if e.label == "did not hold"]
    return _with_legend(950, panels, entries)


_GREEN = "#2ca02c"
_GREY = "#7f7f7f"


def search_chart(search: Any, unit: str) -> Chart:
    """A search for the limit (``ramp --find``): each step's load in the order tried, joined by a
    path and marked by outcome; the limit found as a line."""
    trials = list(search.trials)
    xs = [float(i + 1) for i in range(len(trials))]
    loads = [float(t.load) for t in trials]
    p = _row(1, 950, 230)[0]
    p.line(xs, loads, "order tried", _GREY, "-", 1.0, legend=False)
    groups = (("held", _GREEN, "o", lambda t: t.counted and t.held and t.why != "confirm"),
              ("broke", _RED, "x", lambda t: t.counted and t.held is False and t.why != "confirm"),
              ("confirmed (sustain)", _GREEN, "D", lambda t: t.why == "confirm" and t.held),
              ("not confirmed (sustain)", _RED, "D", lambda t: t.why == "confirm" and not t.held),
              ("not counted (run again / too few requests)", _GREY, "s",
               lambda t: not t.counted and t.why != "confirm"))
    for label, color, marker, pick in groups:
        ys = [float(t.load) if pick(t) else None for t in trials]
        if any(y is not None for y in ys):
            p.line(xs, ys, label, color, "", 1.5, marker=marker, marker_size=7,
                   marker_width=2.0)
    if search.limit:
        p.hline(float(search.limit), _GREEN, "--", 1.0, "limit", label="limit found")
    _from_zero(p, max(loads + ([float(search.limit)] if search.limit else []), default=1.0))
    p.xlim = (0.5, len(trials) + 0.5 if trials else 1.5)
    p.xticks = xs
    p.xticklabels = _thin(xs, [f"{x:g}" for x in xs], p.xlim[0], p.xlim[1], p.w * PT_PER_PX,
                          FONT_PT)
    p.xlabel = "step, in the order tried"
    p.ylabel = unit
    p.title, p.title_loc = "The search: load at each step", "left"
    return _with_legend(950, [p], svgplot.shared_legend([p]))


def distributions_chart(groups: Sequence[tuple[str, np.ndarray]], title: str,
                        ylabel: str = "ms") -> Chart:
    """Box plots (box p25-p75, whiskers p5-p95) of one latency per step or run. A step with no
    successful request gets "no data", not a box at zero."""
    width = max(400.0, 70.0 * len(groups) + 200)
    p = Panel(x0=70, y0=44, w=width - 86, h=220, ylabel=ylabel,
              title=f"{safe(title)}\nbox: p25–p75, whiskers: p5–p95, line: median")
    full = [(i + 1, np.asarray(g[1], dtype=float)) for i, g in enumerate(groups) if len(g[1])]
    if full:
        p.traces.append(svgplot.Boxes(
            "distribution", [float(x) for x, _ in full],
            [tuple(percentile.percentiles(d, [5, 25, 50, 75, 95])) for _, d in full]))
    for i, g in enumerate(groups):
        if not len(g[1]):
            p.text(i + 1, 0.02, "no data", coords="xaxis", ha="center", va="bottom",
                   color="#666", rotation=90, cls="no-data")
    p.xticks = [float(i) for i in range(1, len(groups) + 1)]
    p.xticklabels = [safe(g[0]) for g in groups]
    p.xlim = (0.5, len(groups) + 0.5)
    _from_zero(p, _top([percentile.percentiles(d, [95])[0] for _, d in full]))
    return Chart(width, p.y0 + p.h + 40, [p])


CDF_SAMPLE = 200_000      # values drawn per CDF curve at most (quantile error ~0.2 % of rank)


def cdfs_chart(series: Sequence[tuple[str, np.ndarray]], title: str) -> Chart:
    """Empirical CDFs from zero (TTFT and E2EL keep their true ratio)."""
    p = Panel(x0=62, y0=24, w=420, h=220, title=safe(title), xlabel="ms",
              ylabel="fraction of requests", ylim=(0.0, 1.02), legend_at="lower right")
    curves = []
    for i, (name, v) in enumerate(series):
        v = np.asarray(v, dtype=float)
        if len(v) > CDF_SAMPLE:
            # drawing only (the figures are the summary's): a seeded random sample draws the
            # same curve to well under a pixel, without copying a million-request run's
            # ITLs (56 MB) twice
            v = v[np.random.default_rng(0).integers(0, len(v), CDF_SAMPLE)]
        v = v[np.isfinite(v)]
        if not len(v):
            continue
        # a CDF needs no more points than a screen shows
        x = np.asarray(percentile.percentiles(v, np.linspace(0, 100, 2000))) if len(v) > 2000 \
            else np.sort(v)
        curves.append((i, safe(name), x))
    if curves:
        top = max(float(x[-1]) for _, _, x in curves)
        p.xlim = (0.0, top * 1.05 if top > 0 else 1.0)
        for i, name, x in curves:
            p.line(x.tolist(), np.linspace(0, 1, len(x)).tolist(), name,
                   _COLORS[i % len(_COLORS)], _STYLES[i % len(_STYLES)])
    else:                                 # no successful request: say so, do not draw 0
        p.text(0.5, 0.5, "no successful request", coords="axes", ha="center", va="center",
               size=svgplot.FONT_PX, cls="no-data")
    return Chart(p.x0 + p.w + 12, p.y0 + p.h + 42, [p])


def _step_starts(rows: Sequence[dict[str, Any]], steps: Sequence[Step],
                 t0_perf: float | None) -> list[tuple[float, float]]:
    """(seconds since the start, load) where each step began: from run.json's steps when the
    run recorded its clock, else from the first timeline row of each step (to a second)."""
    if steps and t0_perf is not None and all(s.ramp_start is not None for s in steps):
        return [(s.ramp_start - t0_perf, s.load) for s in steps]
    out: list[tuple[float, float]] = []
    seen = set()
    for r in rows:
        if r.get("step") is not None and r["step"] not in seen:
            seen.add(r["step"])
            out.append((r["t"] - 1.0, r.get("load")))      # a row is the state at a second's end
    return out


def timeline_chart(rows: Sequence[dict[str, Any]], steps: Sequence[Step] = (),
                   t0_perf: float | None = None, unit: str = "users") -> Chart:
    """Per-second state in stacked panels sharing the time axis, one unit each: requests and
    users; TTFT p95 of the last 10 s; output tok/s; the server's own running/waiting."""
    t = [float(r["t"]) for r in rows]

    def col(key: str) -> list[float]:
        return [_finite(r.get(key)) for r in rows]

    def nan0(xs: list[float]) -> list[float]:
        return [0.0 if np.isnan(x) else x for x in xs]
    has_server = any("server_running" in r for r in rows)
    starts = _step_starts(rows, steps, t0_perf)
    xs_all = t + [x for x, _ in starts]
    lo, hi = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    pad = (hi - lo) * 0.05 if hi > lo else 0.05 * max(abs(lo), 1.0)
    labels = ["streaming", "waiting for first token", "in flight", "users", "TTFT p95, last 10 s",
              "output tok/s", "server: running", "server: waiting"]
    panels = _stacked(4 if has_server else 3, labels, (lo - pad, hi + pad), 130.0)
    ax = panels[0]
    streaming, waiting, in_flight = col("streaming"), col("waiting_first_token"), col("in_flight")
    users = col("users")
    _ylim(ax, [*users, *in_flight])
    if not all(np.isnan(streaming)):
        # in flight = streaming + waiting: stacked, so neither hides the other
        s0, w0 = nan0(streaming), nan0(waiting)
        ax.area(t, [0.0] * len(t), s0, "streaming", _COLORS[2], 0.45)
        ax.area(t, s0, [a + b for a, b in zip(s0, w0)], "waiting for first token", _COLORS[4],
                0.45)
        ax.line(t, in_flight, "in flight", "#333", width=0.9, clip=False)
    if not all(np.isnan(users)):
        ax.line(t, users, "users", _COLORS[0], "--", width=1.6)
    ax.ylabel = "requests / users"
    ax = panels[1]
    ttft = col("ttft_p95_recent_ms")
    _ylim(ax, ttft)
    ax.line(t, ttft, "TTFT p95, last 10 s", _COLORS[3])
    ax.ylabel = "ms"
    ax = panels[2]
    tok = col("tok_s")
    _ylim(ax, tok)
    ax.line(t, tok, "output tok/s", _COLORS[5])
    ax.ylabel = "tok/s"
    if has_server:
        _server_panel(panels[3], t, col)
    panels[-1].xlabel = "seconds"
    _step_marks(panels, starts, unit)
    return Chart(950.0, panels[-1].y0 + panels[-1].h + 42, panels)


def probe_overhead_chart(steps: Sequence[ProbeStep]) -> Chart:
    """Router minus direct per step, four statistics with their 95% intervals, legend beside."""
    entries = ("TTFT p50", "TTFT p95", "E2EL p50", "ITL p50")
    legend_w = max(svgplot.text_w(x, svgplot.SMALL_PX) for x in entries) + 44
    p = Panel(x0=70, y0=30, w=600 - 86, h=230, legend_at="right",
              title="Router overhead (router − direct), 95% intervals", ylabel="ms")
    users = [float(s.users) for s in steps]
    # four interval bars at one step, set a little apart so none hides another
    gaps = [b - a for a, b in zip(users, users[1:]) if b > a]
    span = (users[-1] - users[0]) if len(users) > 1 else 1.0
    dodge = min(span * 0.012, (min(gaps) if gaps else 1.0) * 0.2)
    tops, bottoms = [], []
    for i, (m, label) in enumerate(zip(("ttft_p50", "ttft_p95", "e2el_p50", "itl_p50"), entries)):
        over = [s.overhead(m) for s in steps]
        ys = [_finite(o.overhead_ms) for o in over]
        lo = [y - o.ci_ms[0] if o.ci_ms else 0.0 for y, o in zip(ys, over)]
        hi = [o.ci_ms[1] - y if o.ci_ms else 0.0 for y, o in zip(ys, over)]
        p.line([u + (i - 1.5) * dodge for u in users], ys, label, _COLORS[i], "-", 1.5,
               marker=_MARKERS[i], marker_size=4, yerr=(lo, hi))
        tops += [y + b for y, b in zip(ys, hi) if not np.isnan(y)]
        bottoms += [y - a for y, a in zip(ys, lo) if not np.isnan(y)]
    p.hline(0.0, "#000", "-", 0.8, "zero")
    # overhead can be negative: the axis spans the intervals and zero, with a margin
    y_lo, y_hi = min(bottoms + [0.0]), max(tops + [0.0])
    margin = (y_hi - y_lo) * 0.08 or 1.0
    p.ylim = (y_lo - margin, y_hi + margin)
    _load_axis(p, users, "users")
    return Chart(p.x0 + p.w + legend_w, p.y0 + p.h + 42, [p])


BROKE = "x: first step that did not hold"


def compare_overlay_chart(runs: Sequence[tuple[str, Sequence[Step]]], unit: str) -> Chart:
    """One line per run: TTFT p95, ITL p95 and output tok/s against load; x marks the first step
    that did not hold. Runs differ in marker and dash too, so identical runs stay visible."""
    panels = _row(3, 1200, 250)
    figures = (lambda s: s.ttft.p95, lambda s: s.itl.p95, lambda s: s.output_throughput)
    tops: list[list[float]] = [[], [], []]
    any_broke = False
    names = [safe(name) for name, _ in runs]
    # the same run twice still gets two legend entries
    names = [f"{n} [{i}]" if names.count(n) > 1 else n for i, n in enumerate(names)]
    for i, (_, steps) in enumerate(runs):
        loads = [s.load for s in steps]
        c = _COLORS[i % len(_COLORS)]
        broke = next((s for s in steps if not s.held), None)
        any_broke = any_broke or broke is not None
        for j, (p, figure) in enumerate(zip(panels, figures)):
            ys = [_finite(figure(s.summary)) for s in steps]
            # earlier runs drawn wider and with bigger markers: a later run that lies exactly
            # on top (A/A) leaves them showing at the edges
            p.line(loads, ys, names[i], c, _STYLES[i % len(_STYLES)], max(2.4 - 0.6 * i, 1.0),
                   marker=_MARKERS[i % len(_MARKERS)], marker_size=max(7 - 1.5 * i, 3.5))
            tops[j] += [y for y in ys if not np.isnan(y)]
            if broke is not None:
                p.line([broke.load], [_finite(figure(broke.summary))], BROKE, c, "",
                       marker="x", marker_size=9, marker_width=2, legend=False)
    every = [s.load for _, steps in runs for s in steps]
    for j, (p, title, ylabel) in enumerate(zip(panels, ("TTFT p95", "ITL p95", "Output throughput"),
                                               ("ms", "ms", "tok/s"))):
        p.title, p.ylabel = title, ylabel
        _from_zero(p, max(tops[j]) if tops[j] else None)
        _load_axis(p, every, unit)
    extra = [LegendEntry(BROKE, "line", "#444", "", 1.5, "x")] \
        if any_broke else []
    return _with_legend(1200, panels, svgplot.shared_legend(panels[:1], extra))


def compare_png(runs: Sequence[tuple[str, Sequence[Step]]], unit: str, path: str) -> None:
    """The same overlay as a PNG, for a README or slides."""
    svgplot.save_png(compare_overlay_chart(runs, unit), path)


@dataclass
class HeldBar:
    """One setting of a sweep's chart: ``held`` None when not measured (``status`` says why),
    ``low``/``high`` its interval, ``best`` drawn dark, ``text`` written over the bar."""

    label: str
    held: float | None
    low: float | None = None
    high: float | None = None
    status: str = ""
    best: bool = False
    text: str | None = None


def sweep_held_chart(bars: Sequence[HeldBar], unit: str, axis_name: str,
                     repeats: bool = False) -> Chart:
    """A sweep's users held per setting as bars, min-max over ``repeats`` as error bars; a
    setting that was not measured says why on its own slot instead of drawing a zero."""
    n = len(bars)
    width = max(450.0, 110.0 * n + 250)
    p = Panel(x0=70, y0=30, w=width - 86, h=230, xlabel=safe(axis_name), ylabel=f"{unit} held",
              grid_x=False, y_integer=unit == "users")
    xs, ys, colors, lo, hi, tops = [], [], [], [], [], []
    for i, b in enumerate(bars):
        held = _finite(b.held)
        if np.isnan(held):
            p.text(i, 0.02, str(b.status or "").replace("_", " "), coords="xaxis",
                   ha="center", va="bottom", rotation=90, color=_RED, size=11.0, cls="no-data")
            continue
        low, high = _finite(b.low), _finite(b.high)
        xs.append(float(i))
        ys.append(held)
        colors.append(_COLORS[0] if b.best else "#9bbcd9")
        lo.append(held - low)
        hi.append(high - held)
        top = held if np.isnan(high) else high
        tops += [held, top]
        p.text(i, top, safe(b.text if b.text is not None else f"{held:g}"), va="bottom",
               offset=(0, 2), size=11.0, cls="bar-label")
    if xs:
        p.traces.append(svgplot.Bars(f"{unit} held", xs, ys, colors,
                                     yerr=(lo, hi) if any(np.isfinite(lo)) else None))
    p.xticks = [float(i) for i in range(n)]
    p.xticklabels = [safe(b.label) for b in bars]
    p.xlim = (-0.6, n - 0.4)
    p.ylim = (0.0, max(tops + [1]) * 1.25)
    p.title = f"{unit.capitalize()} held per setting" + \
        (" (bars: min-max over repeats)" if repeats else "")
    return Chart(width, p.y0 + p.h + 44, [p])


def sweep_at_load_chart(labels: Sequence[str], values: Sequence[Sequence[Any]], load: float,
                        unit: str, axis_name: str) -> Chart:
    """TTFT p95, ITL p50 and output tok/s of each setting at the common load, side by side.
    ``values``: per setting (ttft_p95_ms, itl_p50_ms, output_tok_s), None where not measured."""
    panels = _row(3, 1100, 230)
    n = len(labels)
    for j, (p, title, ylabel, color) in enumerate((
            (panels[0], "TTFT p95", "ms", _COLORS[1]),
            (panels[1], "ITL p50 (streaming speed)", "ms", _COLORS[3]),
            (panels[2], "Output throughput", "tokens/s", _COLORS[2]))):
        xs, ys = [], []
        for i, row in enumerate(values):
            v = _finite(row[j] if row is not None and len(row) > j else None)
            if not np.isnan(v):
                xs.append(float(i))
                ys.append(v)
                p.text(i, v, f"{v:.0f}" if v >= 10 else f"{v:.1f}", va="bottom", offset=(0, 2),
                       size=11.0, cls="bar-label")
            else:
                p.text(i, 0.02, "no data", coords="xaxis", ha="center", va="bottom",
                       rotation=90, color="#888", size=11.0, cls="no-data")
        if xs:
            p.traces.append(svgplot.Bars(title, xs, ys, [color]))
        p.xticks = [float(i) for i in range(n)]
        p.xticklabels = [safe(x) for x in labels]
        p.xlim = (-0.6, n - 0.4)
        p.ylim = (0.0, (max(ys) * 1.15) if ys and max(ys) > 0 else 1.0)
        p.title, p.ylabel, p.xlabel, p.grid_x = f"{title} at {amount(load, unit)}", ylabel, \
            safe(axis_name), False
    return Chart(1100, _under(panels) + 8, panels)


LIVE_POINTS = 300          # the dashboard's time axis: at most this many points per trace


def _bin_rows(rows: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """``k`` seconds per point: counts summed (then per second), the load and gauges as at the
    bin's end, a p50 as the median of the seconds' and a p95 as the worst second's, so that
    binning never hides a bad second."""
    out = []
    for i in range(0, len(rows), k):
        chunk = rows[i:i + k]
        row = dict(chunk[-1])
        for key in ("requests", "ok", "failed"):
            row[key] = sum(r.get(key) or 0 for r in chunk) / len(chunk)
        for key in ("ttft_p50_ms", "itl_p50_ms"):
            vals = sorted(v for v in (_finite(r.get(key)) for r in chunk) if v == v)
            m = len(vals) // 2          # a few values: numpy's median costs 50x this
            row[key] = (vals[m] if len(vals) % 2 else (vals[m - 1] + vals[m]) / 2) if vals else None
        for key in ("ttft_p95_ms", "itl_p95_ms", "lag_p99_ms", "send_delay_p99_ms"):
            row[key] = _top([r.get(key) for r in chunk])
        out.append(row)
    return out


def live_chart(rows: Sequence[dict[str, Any]], unit: str = "users",
               thresholds: dict[str, Any] | None = None) -> Chart:
    """The dashboard's per-second view of a run in progress (rows from report/dashboard/feed.py,
    which says what a row holds), in stacked panels sharing the time axis, one unit each. Past
    LIVE_POINTS seconds a point is several seconds (``_bin_rows``), and the axis says so."""
    k = max(1, -(-len(rows) // LIVE_POINTS))
    pts = _bin_rows(rows, k) if k > 1 else list(rows)
    t = [float(r["t"]) for r in pts]

    def col(key: str) -> list[float]:
        return [_finite(r.get(key)) for r in pts]
    has_server = any("server_running" in r or "server_waiting" in r for r in pts)
    has_cores = any("server_cores" in r or "machine_busy_cores" in r for r in pts)
    labels = ["users", "in flight", "TTFT p50", "TTFT p95",
              "ITL p50", "ITL p95", "finished ok", "failed", "llmbench loop lag p99",
              "llmbench send delay p99", "server: running", "server: waiting", "threshold",
              "server process", "machine, all processes"]
    lo, hi = (min(t) - 1.0, max(t)) if t else (0.0, 10.0)
    hi = max(hi, lo + 10.0)                        # the first seconds: a 10 s axis, not 1 s
    panels = _stacked(5 + int(has_server) + int(has_cores), labels, (lo, hi), 110.0)
    limits = thresholds or {}
    ax = panels[0]
    users, in_flight = col("users"), col("in_flight")
    _ylim(ax, [*users, *in_flight])
    if unit == "users" and not all(np.isnan(users)):
        ax.line(t, users, "users", _COLORS[0], "--", width=1.6, clip=False)
    ax.line(t, in_flight, "in flight", "#333", width=1.2, clip=False)
    ax.ylabel = "requests / users" if unit == "users" else "requests"
    for ax, metric, name, color in ((panels[1], "ttft", "TTFT", _COLORS[3]),
                                    (panels[2], "itl", "ITL", _COLORS[2])):
        p50, p95 = col(f"{metric}_p50_ms"), col(f"{metric}_p95_ms")
        ax.line(t, p50, f"{name} p50", color, "-", 1.2)
        ax.line(t, p95, f"{name} p95", _RED if metric == "ttft" else _COLORS[1], "--", 1.4)
        _from_zero(ax, _threshold(ax, limits.get(metric), _top([*p50, *p95])))
        ax.ylabel = "ms"
    ax = panels[3]
    ok, bad = col("ok"), col("failed")
    _ylim(ax, [*ok, *bad])
    ax.line(t, ok, "finished ok", _COLORS[2], clip=False)
    ax.line(t, bad, "failed", _RED, "--", clip=False)
    ax.ylabel = "requests/s"
    ax = panels[4]
    lag, send = col("lag_p99_ms"), col("send_delay_p99_ms")
    _ylim(ax, [*lag, *send])
    ax.line(t, lag, "llmbench loop lag p99", _COLORS[5], clip=False)
    ax.line(t, send, "llmbench send delay p99", _COLORS[6], "--", clip=False)
    ax.ylabel = "ms"
    if has_server:
        _server_panel(panels[5], t, col)
    if has_cores:                 # the server's machine (telemetry), cores over the last 5 s
        ax = panels[-1]
        srv, mach = col("server_cores"), col("machine_busy_cores")
        _ylim(ax, [*srv, *mach])
        ax.line(t, srv, "server process", _COLORS[0], clip=False)
        ax.line(t, mach, "machine, all processes", "#777", "--", clip=False)
        ax.ylabel = "cores"
    panels[-1].xlabel = "seconds" + (f" (a point: {k} s; p95: the worst second)" if k > 1 else "")
    # from every second, not the bins: exact starts
    _step_marks(panels, _step_starts(rows, (), None), unit)
    return Chart(950.0, panels[-1].y0 + panels[-1].h + 42, panels)


# -- the server's machine (issue 39) ----------------------------------------------------------------

def _tel(step: Step, part: str, key: str) -> float:
    """A figure of a step's telemetry (``part`` server, llmbench, machine, host or gpu)."""
    t = getattr(step.telemetry, part, None) if step.telemetry is not None else None
    return _finite(getattr(t, key, None) if t is not None else None)


def ramp_server_chart(steps: Sequence[Step], unit: str, cpus: int | None = None) -> Chart:
    """The server's machine against load: cores busy (its core count as a rule) and, with GPUs
    read, their utilisation and the energy per output token."""
    loads = [s.load for s in steps]
    gpu = any(not np.isnan(_tel(s, "gpu", "util_pct_mean")) for s in steps)
    energy = any(not np.isnan(_tel(s, "gpu", "j_per_token")) for s in steps)
    panels = _row(1 + gpu + energy, 950, 210)
    p = panels[0]
    ys_all: list[float] = []
    for (part, key, label), color, marker, style in zip(
            (("server", "cores", "server's process"), ("llmbench", "cores", "llmbench"),
             ("machine", "busy_cores", "this machine, all processes"),
             ("host", "busy_cores", "server's machine (node exporter)")),
            _COLORS, _MARKERS, _STYLES):
        ys = [_tel(s, part, key) for s in steps]
        if all(np.isnan(ys)):
            continue
        p.line(loads, ys, label, color, style, 1.5, marker=marker, marker_size=4)
        ys_all += ys
    top = _top(ys_all)
    if cpus:
        p.hline(float(cpus), "#555", ":", 1.0, "cores", label=f"{cpus} cores")
        top = max(top or 0.0, float(cpus))
    _from_zero(p, top)
    _against_load(p, steps, unit, "CPU cores busy", "cores")
    k = 1
    if gpu:
        p = panels[k]
        ys = [_tel(s, "gpu", "util_pct_mean") for s in steps]
        p.line(loads, ys, "GPU utilisation", _COLORS[4], "-", 1.5, marker="D", marker_size=4)
        p.ylim = (0.0, 105.0)
        _against_load(p, steps, unit, "GPU busy", "%")
        k += 1
    if energy:
        p = panels[k]
        ys = [_tel(s, "gpu", "j_per_token") for s in steps]
        p.line(loads, ys, "energy per output token", _COLORS[5], "-", 1.5, marker="v",
               marker_size=4)
        _from_zero(p, _top(ys))
        _against_load(p, steps, unit, "Energy per output token", "J/token")
    return _with_legend(950, panels, svgplot.shared_legend(panels))


def telemetry_chart(series: dict[str, list[tuple[float, float]]],
                    steps: Sequence[Step] = (), t0_perf: float | None = None,
                    cpus: int | None = None) -> Chart:
    """The server's machine second by second, in stacked panels sharing the time axis, one
    unit each (``groups``); a panel with no data is left out."""
    groups = [
        ("cores", "CPU cores busy", [("server_cores", "server's process"),
                                     ("llmbench_cores", "llmbench"),
                                     ("machine_cores", "this machine, all processes"),
                                     ("host_cores", "server's machine (node exporter)")]),
        ("GiB", "Memory", [("server_rss_gib", "server's process (resident)"),
                           ("gpu_mem_gib", "GPU memory used")]),
        ("%", "GPU busy", [("gpu_util_pct", "GPU utilisation")]),
        ("W", "GPU power", [("gpu_power_w", "GPU power")]),
    ]
    groups = [g for g in groups if any(series.get(k) for k, _ in g[2])]
    xs_all = [x for k in series for x, _ in series[k]]
    starts = [(s.ramp_start - t0_perf, s.load) for s in steps
              if t0_perf is not None and s.ramp_start is not None]
    xs_all += [x for x, _ in starts]
    lo, hi = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    pad = (hi - lo) * 0.03 if hi > lo else 1.0
    labels = [lab for g in groups for _, lab in g[2]] + ([f"{cpus} cores"] if cpus else [])
    # a gap with room for each panel's title
    panels = _stacked(max(len(groups), 1), labels, (lo - pad, hi + pad), 120.0, gap=26.0)
    k = 0
    for (unit_, title, traces), p in zip(groups, panels):
        ys_all: list[float] = []
        for i, (key, label) in enumerate(traces):
            pts = series.get(key) or []
            if not pts:
                continue
            p.line([x for x, _ in pts], [y for _, y in pts], label, _COLORS[(k + i) % len(_COLORS)],
                   _STYLES[i % len(_STYLES)], 1.4)
            ys_all += [y for _, y in pts]
        top = _top(ys_all)
        if unit_ == "cores" and cpus:
            p.hline(float(cpus), "#555", ":", 1.0, "cores", label=f"{cpus} cores")
            top = max(top or 0.0, float(cpus))
        if unit_ == "%":
            p.ylim = (0.0, 105.0)
        else:
            _from_zero(p, top)
        p.title, p.title_loc, p.ylabel = title, "left", unit_
        k += len(traces)
        for x, _ in starts:
            p.vline(x, "#777", ":", 0.9, "step-boundary")
    panels[-1].xlabel = "seconds"
    return Chart(950.0, panels[-1].y0 + panels[-1].h + 42, panels)
