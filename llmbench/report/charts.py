"""Charts as inline SVG (matplotlib, Agg): the HTML report stays one file that opens offline.

matplotlib is imported here only, so ``llmbench --help`` and the start of a run stay fast.
Text that reaches a chart (labels, backend names) is stripped of markup characters first.

Rules every chart follows, so a picture cannot say more than the numbers (tests/unit/test_charts.py):
- an axis spans the data, from zero for sizes (ms, tok/s, requests): a threshold far above the
  data is written at the top edge ("threshold p95 ≤ 200 ms ↑"), not drawn by stretching the
  axis until the data is a flat line on the floor;
- one unit per axis, no twin axes: two traces on two scales read as if their crossing meant
  something, and when they are proportional (req/s and tok/s at a fixed reply length) one hides
  the other exactly;
- load ticks sit exactly on the steps (1, 2, 4, 8 users, not 3, 5, 7 or 1.5), labels thinned
  only where they would overprint;
- every trace is in a legend; overlapping traces differ in style, not only in colour.
Each matplotlib chart has a ``*_fig`` builder returning the figure (the tests read its axes) and
a function of the old name returning the SVG. A run's own charts (``cdfs``, ``timeline``) are
written by svgplot without matplotlib, to the same rules; the tests read their SVG.
"""

from __future__ import annotations

import io
import re
from typing import Any, Sequence

import numpy as np

from llmbench.analysis.stats import value

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_STYLES = ("-", "--", "-.", ":")
_RED = "#d62728"
# A threshold up to this many times the data's top is drawn as a line on the axis (the data
# still fills at least half of it); further up it is an annotation at the top edge.
THRESHOLD_FACTOR = 2.0


class _Figures:
    """The two pyplot calls the charts use (subplots, close) on matplotlib's Figure directly:
    pyplot's import (its backend machinery and figure manager) was about a third of a small
    run's report CPU (scripts/bench_fixed_costs.py), and an SVG needs none of it."""

    def __init__(self) -> None:
        import matplotlib
        from matplotlib.figure import Figure
        self.rcParams = matplotlib.rcParams
        self._figure = Figure

    def subplots(self, nrows: int = 1, ncols: int = 1, *, figsize: Any = None, **kw: Any):
        fig = self._figure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **kw)

    def close(self, fig: Any) -> None:
        """Nothing to close: no figure manager holds the figure; it is freed with its last use."""


_FIGURES: _Figures | None = None


def _plt() -> _Figures:
    global _FIGURES
    if _FIGURES is None:
        _FIGURES = _Figures()
        _FIGURES.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.grid": True,
                                  "grid.alpha": 0.3, "figure.dpi": 100,
                                  "svg.hashsalt": "llmbench"})
    return _FIGURES


def safe(text: Any) -> str:
    """Chart text never carries markup: an SVG inlined in HTML must not be an injection path."""
    return re.sub(r"[<>&\"']", "_", str(text))[:80]


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    _plt().close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def _finite(v: Any) -> float:
    if v is None:
        return float("nan")
    v = float(v)
    return v if np.isfinite(v) else float("nan")


def _top(values: Sequence[Any]) -> float | None:
    """The largest finite value, None when there is none."""
    vals = [v for v in (_finite(x) for x in values) if not np.isnan(v)]
    return max(vals) if vals else None


def _from_zero(ax, top: float | None) -> None:
    """A size axis (ms, tok/s, requests) from zero to just above the data."""
    ax.set_ylim(0, top * 1.12 if top and top > 0 else 1.0)


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


def _axis_width_pt(ax) -> float:
    return float(ax.figure.get_size_inches()[0] * ax.get_position().width * 72)


def _fig_legend(fig, axes, extra: Sequence[tuple[Any, str]] = ()) -> None:
    """One legend under the panels, for what they share (statistics, runs, "did not hold"):
    inside an axis a legend covers the data it explains."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    for h, label in extra:
        seen.setdefault(label, h)
    if seen:
        fig.legend(list(seen.values()), list(seen.keys()), loc="upper center", fontsize=7,
                   ncol=min(len(seen), 6), bbox_to_anchor=(0.5, 0.0), frameon=False)


def _side_legend(ax) -> None:
    """A legend beside its panel (right), never over the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                  frameon=False)


def _load_axis(ax, loads: Sequence[float], unit: str) -> None:
    """Ticks exactly at the steps' loads (labelled 1, 2, 4 — integers stay integers)."""
    xs = sorted({float(x) for x in loads if x is not None and np.isfinite(float(x))})
    if not xs:
        return
    span = xs[-1] - xs[0]
    pad = span * 0.06 if span > 0 else max(abs(xs[0]) * 0.5, 0.5)
    ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    texts = _thin(xs, [f"{x:g}" for x in xs], xs[0] - pad, xs[-1] + pad, _axis_width_pt(ax),
                  _plt().rcParams["font.size"])
    ax.set_xticks(xs, texts)
    ax.minorticks_off()
    ax.set_xlabel(unit)


def _boundary(ax, loads: Sequence[float], held: Sequence[bool]) -> None:
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
        ax.axvspan(left, right, color=_RED, alpha=0.07, linewidth=0,
                   label="_" if labelled else "did not hold")
        if not labelled:
            ax.axvline(left, color=_RED, linestyle=":", linewidth=1.2)
        labelled = True


def _threshold(ax, limit: float, stat: str | None, data_top: float | None) -> float | None:
    """Draw a threshold honestly: a line when it is near the data, else a note at the top edge
    with an arrow saying it is further up. Returns the top the axis must reach."""
    what = f"{stat} ≤ {limit:g} ms" if stat else f"{limit:g} ms"
    if data_top is None or limit <= THRESHOLD_FACTOR * data_top:
        ax.axhline(limit, color=_RED, linewidth=1, linestyle="--", label="threshold",
                   gid="threshold")
        # the value at the line's left end, where a ramp's latency is still low
        ax.annotate(what, xy=(0.01, limit), xycoords=ax.get_yaxis_transform(), xytext=(0, 2),
                    textcoords="offset points", ha="left", va="bottom", color=_RED, fontsize=7)
        return max(data_top or 0.0, limit)
    # inside the top edge, in the headroom _from_zero leaves above the data (none of it there)
    ax.annotate(f"threshold {what} ↑", xy=(0.99, 0.985), xycoords="axes fraction",
                ha="right", va="top", color=_RED, fontsize=8, gid="threshold-off-scale")
    return data_top * 1.06


def ramp_latency_fig(steps: Sequence[dict[str, Any]], thresholds: dict[str, Any], unit: str):
    """TTFT and ITL (median, p95, p99) against load. ``thresholds`` maps a metric to its limit
    in ms, or to (limit, stat) so the line can say which statistic it bounds."""
    plt = _plt()
    loads = [s["load"] for s in steps]
    held = [s["held"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for ax, metric, title in ((axes[0], "ttft", "Time to first token"),
                              (axes[1], "itl", "Time between tokens (ITL)")):
        tops = []
        for stat, style in (("median", "-o"), ("p95", "-s"), ("p99", ":^")):
            # a step with no data has no point (None, or "inf" read back from run.json)
            ys = [_finite(value(s["summary"], metric, stat)) for s in steps]
            ax.plot(loads, ys, style, markersize=4, label=stat)
            tops.append(_top(ys))
        top = _top([t for t in tops if t is not None])
        limit = thresholds.get(metric)
        if limit is not None:
            lim, stat = limit if isinstance(limit, tuple) else (limit, None)
            top = _threshold(ax, float(lim), stat, top)
        _from_zero(ax, top)
        _boundary(ax, loads, held)
        ax.set_title(title, loc="left")
        ax.set_ylabel("ms")
        _load_axis(ax, loads, unit)
    _fig_legend(fig, axes)
    return fig


def ramp_latency(steps: Sequence[dict[str, Any]], thresholds: dict[str, Any], unit: str) -> str:
    return _svg(ramp_latency_fig(steps, thresholds, unit))


def ramp_throughput_fig(steps: Sequence[dict[str, Any]], unit: str):
    """Output tokens/s and requests/s in two panels, each from zero: on twin axes the two lines
    lie exactly on top of each other whenever replies have a fixed length."""
    plt = _plt()
    loads = [s["load"] for s in steps]
    held = [s["held"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.0))
    for ax, key, title, ylabel, c, m in (
            (axes[0], "output_throughput", "Output tokens per second", "out tok/s", _COLORS[0], "o"),
            (axes[1], "request_throughput", "Requests per second", "req/s", _COLORS[2], "s")):
        ys = [_finite(s["summary"].get(key)) for s in steps]
        ax.plot(loads, ys, "-" + m, color=c, markersize=4, label=ylabel)
        _from_zero(ax, _top(ys))
        _boundary(ax, loads, held)
        ax.set_title(title, loc="left")
        ax.set_ylabel(ylabel)
        _load_axis(ax, loads, unit)
    handles, labels = _only(axes, "did not hold")
    if handles:
        fig.legend(handles, labels, loc="upper center", fontsize=7, bbox_to_anchor=(0.5, 0.0),
                   frameon=False)
    return fig


def _only(axes, label: str) -> tuple[list[Any], list[str]]:
    """The handle of one legend entry (the panels' titles already name their single trace)."""
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab == label:
                return [h], [lab]
    return [], []


def ramp_throughput(steps: Sequence[dict[str, Any]], unit: str) -> str:
    return _svg(ramp_throughput_fig(steps, unit))


def distributions_fig(groups: Sequence[tuple[str, np.ndarray]], title: str, ylabel: str = "ms"):
    """Box plots (box p25-p75, whiskers p5-p95) of one latency per step or run. A step with no
    successful request gets "no data", not a box at zero."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(groups) + 2), 3.2))
    full = [(i + 1, g[1]) for i, g in enumerate(groups) if len(g[1])]
    if full:
        ax.boxplot([d for _, d in full], positions=[p for p, _ in full], whis=(5, 95),
                   showfliers=False)
    for i, g in enumerate(groups):
        if not len(g[1]):
            ax.text(i + 1, 0.02, "no data", transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=7, color="#666", rotation=90)
    ax.set_xticks(range(1, len(groups) + 1), [safe(g[0]) for g in groups], rotation=0)
    ax.set_xlim(0.5, len(groups) + 0.5)
    _from_zero(ax, _top([np.percentile(d, 95) for _, d in full]))
    ax.set_title(f"{title}\nbox: p25–p75, whiskers: p5–p95, line: median", fontsize=9)
    ax.set_ylabel(ylabel)
    return fig


def distributions(groups: Sequence[tuple[str, np.ndarray]], title: str, ylabel: str = "ms") -> str:
    return _svg(distributions_fig(groups, title, ylabel))


CDF_SAMPLE = 200_000      # values drawn per CDF curve at most (quantile error ~0.2 % of rank)


def cdfs(series: Sequence[tuple[str, np.ndarray]], title: str) -> str:
    """Empirical CDFs from zero (TTFT and E2EL keep their true ratio), drawn without matplotlib
    (svgplot): a run's report is these and the timeline."""
    from llmbench.report import svgplot
    p = svgplot.Panel(x0=62, y0=24, w=420, h=220, title=safe(title), xlabel="ms",
                      ylabel="fraction of requests", ylim=(0.0, 1.02))
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
        x = np.percentile(v, np.linspace(0, 100, 2000)) if len(v) > 2000 else np.sort(v)
        curves.append((i, safe(name), x))
    if curves:
        top = max(float(x[-1]) for _, _, x in curves)
        p.xlim = (0.0, top * 1.05 if top > 0 else 1.0)
        for i, name, x in curves:
            p.line(x.tolist(), np.linspace(0, 1, len(x)).tolist(), name,
                   _COLORS[i % len(_COLORS)], _STYLES[i % len(_STYLES)])
        body = p.render(legend_at="lower right")
    else:                                 # no successful request: say so, do not draw 0
        body = p.render() + (f'<text x="{p.x0 + p.w / 2:.1f}" y="{p.y0 + p.h / 2:.1f}" '
                             'text-anchor="middle">no successful request</text>')
    return svgplot.document(p.x0 + p.w + 12, p.y0 + p.h + 42, [body])


def _step_starts(rows: Sequence[dict[str, Any]], steps: Sequence[dict[str, Any]],
                 t0_perf: float | None) -> list[tuple[float, float]]:
    """(seconds since the start, load) where each step began: from run.json's steps when the
    run recorded its clock, else from the first timeline row of each step (to a second)."""
    if steps and t0_perf is not None and all("ramp_start" in s for s in steps):
        return [(s["ramp_start"] - t0_perf, s["load"]) for s in steps]
    out: list[tuple[float, float]] = []
    seen = set()
    for r in rows:
        if r.get("step") is not None and r["step"] not in seen:
            seen.add(r["step"])
            out.append((r["t"] - 1.0, r.get("load")))      # a row is the state at a second's end
    return out


def timeline(rows: Sequence[dict[str, Any]], steps: Sequence[dict[str, Any]] = (),
             t0_perf: float | None = None, unit: str = "users") -> str:
    """Per-second state in stacked panels sharing the time axis, one unit each: requests and
    users; TTFT p95 of the last 10 s; output tok/s; the server's own running/waiting. Dotted
    lines mark where each step began, labelled with its load. Written as SVG without
    matplotlib (svgplot): every run's report has it."""
    from llmbench.report import svgplot
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
    panels: list[svgplot.Panel] = []
    labels = ["streaming", "waiting for first token", "in flight", "users", "TTFT p95, last 10 s",
              "output tok/s", "server: running", "server: waiting"]
    legend_w = max(svgplot.text_w(x, svgplot.SMALL_PX) for x in labels) + 34
    width, left, top_y, h, gap = 950.0, 70.0, 34.0, 130.0, 14.0
    n = 4 if has_server else 3
    for k in range(n):
        panels.append(svgplot.Panel(x0=left, y0=top_y + k * (h + gap), w=width - left - legend_w,
                                    h=h, xlim=(lo - pad, hi + pad), x_ticklabels=k == n - 1))
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
        ax = panels[3]
        run_, wait_ = col("server_running"), col("server_waiting")
        _ylim(ax, [*run_, *wait_])
        # unclipped: a count of zero lies on the axis's floor and must still show
        ax.line(t, run_, "server: running", _COLORS[2], clip=False)
        ax.line(t, wait_, "server: waiting", _COLORS[1], "--", clip=False)
        ax.ylabel = "requests"
    panels[-1].xlabel = "seconds"
    if starts:
        for p in panels:
            for x, _ in starts:
                p.vline(x, "#777", ":", 0.9, "step-boundary")
        top = panels[0]
        xs = [x for x, _ in starts]
        texts = _thin(xs, [f"{ld:g}" if ld is not None else "?" for _, ld in starts],
                      *top.xlim, top.w * 0.75, 7)            # px to pt: 100 dpi against 72
        for x, text in zip(xs, texts):
            if text:
                top.extra.append(f'<text class="step-label" x="{top.px(x):.2f}" '
                                 f'y="{top.y0 - 4:.2f}" text-anchor="middle" '
                                 f'font-size="{svgplot.SMALL_PX}" fill="#555">'
                                 f"{svgplot.esc(text)}</text>")
        top.extra.append(f'<text x="{top.x0 + top.w:.2f}" y="{top.y0 - 18:.2f}" text-anchor="end" '
                         f'font-size="{svgplot.SMALL_PX}" fill="#555">step starts (dotted), '
                         f"labelled in {svgplot.esc(safe(unit))}</text>")
    height = panels[-1].y0 + h + 42
    return svgplot.document(width, height, [p.render() for p in panels])


def _ylim(panel, values: Sequence[float]) -> None:
    """A size axis (ms, tok/s, requests) from zero to just above the data (as _from_zero)."""
    top = _top(values)
    panel.ylim = (0.0, top * 1.12 if top and top > 0 else 1.0)


def probe_overhead_fig(steps: Sequence[dict[str, Any]]):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    users = [float(s["users"]) for s in steps]
    # four interval bars at one step, set a little apart so none hides another
    gaps = [b - a for a, b in zip(users, users[1:]) if b > a]
    span = (users[-1] - users[0]) if len(users) > 1 else 1.0
    dodge = min(span * 0.012, (min(gaps) if gaps else 1.0) * 0.2)
    for i, (m, label) in enumerate((("ttft_p50", "TTFT p50"), ("ttft_p95", "TTFT p95"),
                                    ("e2el_p50", "E2EL p50"), ("itl_p50", "ITL p50"))):
        ys = [s[m]["overhead_ms"] if s[m]["overhead_ms"] is not None else np.nan for s in steps]
        lo = [y - s[m]["ci_ms"][0] if s[m]["ci_ms"] else 0 for y, s in zip(ys, steps)]
        hi = [s[m]["ci_ms"][1] - y if s[m]["ci_ms"] else 0 for y, s in zip(ys, steps)]
        ax.errorbar([u + (i - 1.5) * dodge for u in users], ys, yerr=[lo, hi], fmt="-",
                    capsize=3, markersize=4, color=_COLORS[i], marker=_MARKERS[i], label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title("Router overhead (router − direct), 95% intervals")
    ax.set_ylabel("ms")
    _load_axis(ax, users, "users")
    _side_legend(ax)
    return fig


def probe_overhead(steps: Sequence[dict[str, Any]]) -> str:
    return _svg(probe_overhead_fig(steps))


def _overlay(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], unit: str):
    """One line per run: TTFT p95, ITL p95 and output tok/s against load; x marks the first step
    that did not hold. Runs differ in marker and dash too, so identical runs stay visible."""
    plt = _plt()
    from matplotlib.lines import Line2D
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    keys = ("p95_ttft_ms", "p95_itl_ms", "output_throughput")
    tops: list[list[float]] = [[], [], []]
    any_broke = False
    names = [safe(name) for name, _ in runs]
    # the same run twice still gets two legend entries
    names = [f"{n} [{i}]" if names.count(n) > 1 else n for i, n in enumerate(names)]
    for i, (_, steps) in enumerate(runs):
        name = names[i]
        loads = [s["load"] for s in steps]
        c = _COLORS[i % len(_COLORS)]
        broke = next((s for s in steps if not s["held"]), None)
        any_broke = any_broke or broke is not None
        for j, (ax, key) in enumerate(zip(axes, keys)):
            ys = [_finite(s["summary"].get(key)) for s in steps]
            # earlier runs drawn wider and with bigger markers: a later run that lies exactly
            # on top (A/A) leaves them showing at the edges
            ax.plot(loads, ys, color=c, marker=_MARKERS[i % len(_MARKERS)],
                    linestyle=_STYLES[i % len(_STYLES)], markersize=max(7 - 1.5 * i, 3.5),
                    linewidth=max(2.4 - 0.6 * i, 1.0), label=name)
            tops[j] += [y for y in ys if not np.isnan(y)]
            if broke is not None:
                ax.plot([broke["load"]], [_finite(broke["summary"].get(key))], "x", color=c,
                        markersize=9, markeredgewidth=2)
    every = [s["load"] for _, steps in runs for s in steps]
    for j, (ax, title, ylabel) in enumerate(zip(axes, ("TTFT p95", "ITL p95", "Output throughput"),
                                                ("ms", "ms", "tok/s"))):
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        _from_zero(ax, max(tops[j]) if tops[j] else None)
        _load_axis(ax, every, unit)
    extra = [(Line2D([], [], color="#444", marker="x", linestyle="", markersize=7,
                     markeredgewidth=2), "x: first step that did not hold")] if any_broke else []
    _fig_legend(fig, axes[:1], extra)
    return fig


def compare_overlay_fig(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], unit: str):
    return _overlay(runs, unit)


def compare_overlay(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], unit: str) -> str:
    return _svg(_overlay(runs, unit))


def compare_png(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], unit: str, path: str) -> None:
    """The same overlay as a PNG, for a README."""
    fig = _overlay(runs, unit)
    fig.savefig(path, format="png", bbox_inches="tight", dpi=110)
    _plt().close(fig)
