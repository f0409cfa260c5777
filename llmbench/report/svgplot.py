"""The one chart engine: a chart is a description (``Chart``: panels, their traces, marks, texts
and legends), drawn as SVG here, by hand, for every HTML report; ``save_png`` draws the same
description with matplotlib, only when a user asks for a PNG (``compare --png``).

Why by hand (issue 25): importing matplotlib's Figure and SVG backend costs 0.8 s on top of
the report's own 0.45 s, and with it a ramp's report took more than twice the CPU and its SVG
was 2-5 times larger (docs/commands.md has scripts/bench_charts.py's figures). The charts are
lines, areas, bars, boxes, error bars and marks on linear axes: a few hundred lines of SVG.

Nothing here decides what a chart shows (charts.py does, under the rules in its docstring);
this module only turns a description into pixels. The description is what the tests read
(tests/unit/report/test_charts.py), and the SVG carries the same facts: each panel is
``<g class="panel" data-ylim="lo hi" data-xlim=... data-ylabel=...>``, each trace a
``<g class="trace" data-label=...>``, each legend entry a ``<text class="legend-entry">``,
marks and texts carry their ``cls`` as class (``step-boundary`` with ``data-x``, ``threshold``
with ``data-y``, ``step-label``), x ticks ``class="xtick"``.

Sizes are pixels at 100 dpi: 12 px is matplotlib's 9 pt, so a PNG drawn by matplotlib from the
same description has the same layout.
"""

from __future__ import annotations

import html
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
FONT_PX = 12.0                   # matplotlib's 9 pt at 100 dpi
SMALL_PX = 9.5                   # its 7 pt (legends, step labels)
CHAR_W = 0.58                    # average glyph width / font size, for layout only
GRID = "#b0b0b0"
PX_PER_PT = 100 / 72
_CLIP_IDS = itertools.count()     # ids unique across the charts of one HTML page
# dash patterns of matplotlib's styles, per unit of line width
DASHES = {"-": None, "--": (3.7, 1.6), ":": (1.0, 1.65), "-.": (6.4, 1.6, 1.0, 1.6), "": None}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "x")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def text_w(text: str, px: float) -> float:
    return len(text) * px * CHAR_W


def nice_ticks(lo: float, hi: float, target: int = 5,
               steps: Sequence[float] = (1, 2, 2.5, 5, 10), integer: bool = False) -> list[float]:
    """Ticks at one of ``steps`` times a power of ten, inside [lo, hi] (matplotlib's choice);
    ``integer``: whole numbers only (a count of users)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (*steps, 10) if m * mag >= raw * 0.999)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.ceil(lo / step - 1e-9)
    out = []
    k = first
    while k * step <= hi + step * 1e-9:
        out.append(round(k * step, 12))
        k += 1
    return out


def tick_text(v: float, ticks: Sequence[float]) -> str:
    """All ticks of an axis with the same number of decimals (0.00, 0.25, ..., 1.00)."""
    step = min((b - a for a, b in zip(ticks, ticks[1:])), default=1.0) or 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if step < 1 and round(step * 10 ** decimals) % 1:
        decimals += 1
    if any(abs(t * 10 ** decimals - round(t * 10 ** decimals)) > 1e-6 for t in ticks):
        decimals += 1
    return f"{v:.{decimals}f}"


def finite(v: object) -> float | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


# -- the description -------------------------------------------------------------------------

@dataclass
class Line:
    """A polyline broken at missing values (a lone point is a dot), with optional markers and
    error bars (``yerr``: distances below and above each point)."""

    label: str
    xs: list[float]
    ys: list[float | None]
    color: str
    style: str = "-"                  # "-", "--", ":", "-." or "" (markers only)
    width: float = 1.5
    marker: str | None = None         # one of MARKERS
    marker_size: float = 4.0          # points, as matplotlib's markersize
    marker_width: float = 1.0         # an "x" marker's stroke
    yerr: tuple[list[float], list[float]] | None = None
    clip: bool = True
    legend: bool = True
    kind: str = "line"


@dataclass
class Area:
    """The band between two curves (a stacked area's layer)."""

    label: str
    xs: list[float]
    lower: list[float]
    upper: list[float]
    color: str
    alpha: float
    legend: bool = True
    kind: str = "area"


@dataclass
class Bars:
    """Bars from zero at ``xs`` (one colour each), with optional error bars."""

    label: str
    xs: list[float]
    ys: list[float]
    colors: list[str]
    width: float = 0.6
    yerr: tuple[list[float], list[float]] | None = None
    legend: bool = False
    kind: str = "bars"


@dataclass
class Boxes:
    """Box plots: per position (p5, p25, median, p75, p95) - box, median line, whiskers."""

    label: str
    positions: list[float]
    stats: list[tuple[float, float, float, float, float]]
    color: str = "#1f77b4"
    median_color: str = "#ff7f0e"
    legend: bool = False
    kind: str = "boxes"


@dataclass
class Rule:
    """A horizontal (``axis="y"``, at ``at`` on y) or vertical (``axis="x"``) line across the
    panel; ``label`` puts it in the legend."""

    axis: str
    at: float
    color: str
    style: str = "-"
    width: float = 1.0
    cls: str = ""
    label: str | None = None


@dataclass
class Span:
    """A shaded band from x0 to x1 over the panel's height."""

    x0: float
    x1: float
    color: str
    alpha: float
    label: str | None = None


@dataclass
class Text:
    """Text at (x, y). ``coords``: "data"; "axes" (both fractions of the panel); "xaxis" (x in
    data, y a fraction); "yaxis" (x a fraction, y in data). ``offset``: pixels right and up."""

    x: float
    y: float
    text: str
    coords: str = "data"
    ha: str = "center"                # left, center, right
    va: str = "baseline"              # top, center, bottom, baseline
    color: str = "#000"
    size: float = SMALL_PX
    rotation: float = 0.0
    offset: tuple[float, float] = (0.0, 0.0)
    cls: str = ""


@dataclass
class LegendEntry:
    """One line, area or marker named in a chart's legend."""
    label: str
    kind: str                         # "line", "area", "marker"
    color: str
    style: str = "-"
    width: float = 1.5
    marker: str | None = None
    alpha: float = 1.0


@dataclass
class Panel:
    """One axes box: the pixel box it is drawn in, its data ranges and ticks, what is drawn on
    it (``traces`` under ``marks``), its texts, and where its legend goes ("right": beside it,
    "lower right": inside, None: in the chart's shared legend or nowhere)."""

    x0: float
    y0: float
    w: float
    h: float
    xlim: tuple[float, float] = (0.0, 1.0)
    ylim: tuple[float, float] = (0.0, 1.0)
    ylabel: str = ""
    xlabel: str = ""
    title: str = ""
    title_loc: str = "center"
    x_ticklabels: bool = True
    xticks: list[float] | None = None          # None: nice ticks over xlim
    xticklabels: list[str] | None = None       # with xticks; "" leaves a tick unlabelled
    y_integer: bool = False
    grid_x: bool = True
    legend_at: str | None = None
    traces: list[Any] = field(default_factory=list)
    marks: list[Any] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)

    # building
    def line(self, xs: Sequence[float], ys: Sequence[object], label: str, color: str,
             style: str = "-", width: float = 1.5, clip: bool = True, legend: bool = True,
             marker: str | None = None, marker_size: float = 4.0,
             yerr: tuple[Sequence[float], Sequence[float]] | None = None,
             marker_width: float = 1.0) -> Line:
        tr = Line(label, [float(x) for x in xs], [finite(y) for y in ys], color, style, width,
                  marker, marker_size, marker_width,
                  None if yerr is None else (list(yerr[0]), list(yerr[1])), clip, legend)
        self.traces.append(tr)
        return tr

    def area(self, xs: Sequence[float], lower: Sequence[float], upper: Sequence[float],
             label: str, color: str, alpha: float) -> Area:
        tr = Area(label, [float(x) for x in xs], [float(v) for v in lower],
                  [float(v) for v in upper], color, alpha)
        self.traces.append(tr)
        return tr

    def vline(self, x: float, color: str, style: str, width: float, cls: str,
              label: str | None = None) -> None:
        self.marks.append(Rule("x", float(x), color, style, width, cls, label))

    def hline(self, y: float, color: str, style: str = "-", width: float = 1.0, cls: str = "",
              label: str | None = None) -> None:
        self.marks.append(Rule("y", float(y), color, style, width, cls, label))

    def text(self, x: float, y: float, text: str, **kw: Any) -> None:
        self.texts.append(Text(x, y, str(text), **kw))

    # reading
    def labels(self) -> list[str]:
        """Labels of what is drawn (traces), in drawing order."""
        return [t.label for t in self.traces if _drawn(t)]

    def legend_entries(self) -> list[LegendEntry]:
        out: list[LegendEntry] = []
        seen: set[str] = set()
        for t in self.traces:
            if not t.legend or not t.label or t.label.startswith("_") or t.label in seen:
                continue
            seen.add(t.label)
            if isinstance(t, Area):
                out.append(LegendEntry(t.label, "area", t.color, alpha=t.alpha))
            elif isinstance(t, Line):
                out.append(LegendEntry(t.label, "line", t.color, t.style, t.width, t.marker))
            elif isinstance(t, Bars):
                out.append(LegendEntry(t.label, "area", t.colors[0] if t.colors else "#000"))
        for m in self.marks:
            if m.label and m.label not in seen:
                seen.add(m.label)
                out.append(LegendEntry(m.label, "area", m.color, alpha=max(m.alpha, 0.2))
                           if isinstance(m, Span) else
                           LegendEntry(m.label, "line", m.color, m.style, m.width))
        return out

    def shown_xticks(self) -> list[tuple[float, str]]:
        """(position, label) of every x tick; the label is "" where it is not written."""
        if self.xticks is not None:
            labels = self.xticklabels or [f"{x:g}" for x in self.xticks]
            return list(zip(self.xticks, labels))
        xt = nice_ticks(*self.xlim, target=max(3, min(9, int(self.w // 70))), steps=(1, 2, 5))
        return [(t, tick_text(t, xt)) for t in xt]

    def yticks(self) -> list[float]:
        return nice_ticks(*self.ylim, target=max(3, min(6, int(self.h // 30))),
                          integer=self.y_integer)

    # pixels
    def px(self, x: float) -> float:
        lo, hi = self.xlim
        return self.x0 + (x - lo) / ((hi - lo) or 1.0) * self.w

    def py(self, y: float) -> float:
        lo, hi = self.ylim
        return self.y0 + self.h - (y - lo) / ((hi - lo) or 1.0) * self.h


def _drawn(t: Any) -> bool:
    if isinstance(t, Line):
        return any(y is not None for y in t.ys)
    if isinstance(t, (Area, Bars)):
        return bool(t.xs)
    if isinstance(t, Boxes):
        return bool(t.positions)
    return False


@dataclass
class Chart:
    """A whole picture: its size in pixels, its panels, texts outside them, and one legend
    shared by the panels, centred under them (``legend``)."""

    width: float
    height: float
    panels: list[Panel]
    legend: list[LegendEntry] = field(default_factory=list)
    legend_y: float | None = None              # top of the shared legend (default: under all)
    legend_ncol: int = 6
    texts: list[Text] = field(default_factory=list)   # in chart pixels (coords "data")


def shared_legend(panels: Sequence[Panel], extra: Sequence[LegendEntry] = ()) -> list[LegendEntry]:
    """The entries of several panels once each (statistics, runs, "did not hold"), plus ``extra``."""
    seen: dict[str, LegendEntry] = {}
    for p in panels:
        for e in p.legend_entries():
            seen.setdefault(e.label, e)
    for e in extra:
        seen.setdefault(e.label, e)
    return list(seen.values())


# -- SVG -------------------------------------------------------------------------------------

def _dash(style: str, width: float) -> str:
    d = DASHES.get(style)
    return f' stroke-dasharray="{",".join(f"{v * width:.2f}" for v in d)}"' if d else ""


def marker_svg(kind: str, cx: float, cy: float, size_pt: float, color: str,
               stroke_w: float = 1.0) -> str:
    """One marker centred on (cx, cy); ``size_pt`` as matplotlib's markersize."""
    r = size_pt * PX_PER_PT / 2
    if kind == "o":
        return f'<circle cx="{cx:.2f}" cy="{cy:.2f}" r="{r:.2f}" fill="{color}"/>'
    if kind == "s":
        return (f'<rect x="{cx - r:.2f}" y="{cy - r:.2f}" width="{2 * r:.2f}" '
                f'height="{2 * r:.2f}" fill="{color}"/>')
    if kind == "x":
        return (f'<path d="M{cx - r:.2f},{cy - r:.2f} L{cx + r:.2f},{cy + r:.2f} '
                f'M{cx - r:.2f},{cy + r:.2f} L{cx + r:.2f},{cy - r:.2f}" stroke="{color}" '
                f'stroke-width="{stroke_w * PX_PER_PT:.2f}" fill="none"/>')
    shapes = {
        "^": [(0, -1), (0.87, 0.5), (-0.87, 0.5)],
        "v": [(0, 1), (0.87, -0.5), (-0.87, -0.5)],
        "D": [(0, -1), (0.7, 0), (0, 1), (-0.7, 0)],
        "P": [(-0.33, -1), (0.33, -1), (0.33, -0.33), (1, -0.33), (1, 0.33), (0.33, 0.33),
              (0.33, 1), (-0.33, 1), (-0.33, 0.33), (-1, 0.33), (-1, -0.33), (-0.33, -0.33)],
        "X": [(-0.75, -1), (0, -0.25), (0.75, -1), (1, -0.75), (0.25, 0), (1, 0.75), (0.75, 1),
              (0, 0.25), (-0.75, 1), (-1, 0.75), (-0.25, 0), (-1, -0.75)],
        "*": [(math.cos(math.pi / 2 + k * math.pi / 5) * (1 if k % 2 == 0 else 0.4),
               -math.sin(math.pi / 2 + k * math.pi / 5) * (1 if k % 2 == 0 else 0.4))
              for k in range(10)],
    }
    pts = " ".join(f"{cx + dx * r:.2f},{cy + dy * r:.2f}" for dx, dy in shapes.get(kind, shapes["D"]))
    return f'<polygon points="{pts}" fill="{color}"/>'


def _line_svg(p: Panel, t: Line) -> str:
    parts, dots, run = [], [], []
    pts: list[tuple[float, float]] = []
    for x, y in zip(t.xs, t.ys):
        if y is None:
            if run:
                (parts if len(run) > 1 else dots).append(run)
            run = []
            continue
        xy = (p.px(x), p.py(y))
        run.append(xy)
        pts.append(xy)
    if run:
        (parts if len(run) > 1 else dots).append(run)
    clip = ' clip-path="url(#{clip})"' if t.clip else ""
    body = ""
    if t.style:
        d = " ".join("M" + " L".join(f"{a:.2f},{b:.2f}" for a, b in q) for q in parts)
        if d:
            body += (f'<path d="{d}" fill="none" stroke="{t.color}" stroke-width="{t.width}"'
                     f'{_dash(t.style, t.width)} stroke-linejoin="round"{clip}/>')
        if t.marker is None:
            body += "".join(f'<circle cx="{q[0][0]:.2f}" cy="{q[0][1]:.2f}" '
                            f'r="{max(t.width * 1.6, 2.5):g}" fill="{t.color}"/>' for q in dots)
    if t.yerr is not None:
        lo, hi = t.yerr
        for x, y, a, b in zip(t.xs, t.ys, lo, hi):
            if y is None or finite(a) is None or finite(b) is None:
                continue
            cx, y1, y2 = p.px(x), p.py(y - a), p.py(y + b)
            body += (f'<path d="M{cx:.2f},{y1:.2f} L{cx:.2f},{y2:.2f} M{cx - 4:.2f},{y1:.2f} '
                     f'L{cx + 4:.2f},{y1:.2f} M{cx - 4:.2f},{y2:.2f} L{cx + 4:.2f},{y2:.2f}" '
                     f'stroke="{t.color}" stroke-width="{t.width}" fill="none"{clip}/>')
    if t.marker:
        body += "".join(marker_svg(t.marker, a, b, t.marker_size, t.color, t.marker_width)
                        for a, b in pts)
    return body


def _area_svg(p: Panel, t: Area) -> str:
    top = [(p.px(x), p.py(y)) for x, y in zip(t.xs, t.upper)]
    bottom = [(p.px(x), p.py(y)) for x, y in zip(t.xs, t.lower)][::-1]
    if len(top) > 1:
        pts = " L".join(f"{a:.2f},{b:.2f}" for a, b in top + bottom)
        return (f'<path d="M{pts} Z" fill="{t.color}" fill-opacity="{t.alpha}" stroke="none" '
                'clip-path="url(#{clip})"/>')
    if top:        # one sample has no width: a bar three pixels wide still shows the value
        return (f'<rect x="{top[0][0] - 1.5:.2f}" y="{top[0][1]:.2f}" width="3" '
                f'height="{max(bottom[0][1] - top[0][1], 0):.2f}" fill="{t.color}" '
                f'fill-opacity="{t.alpha}"/>')
    return ""


def _bars_svg(p: Panel, t: Bars) -> str:
    out = []
    for i, (x, y) in enumerate(zip(t.xs, t.ys)):
        x1, x2 = p.px(x - t.width / 2), p.px(x + t.width / 2)
        ytop, ybase = p.py(max(y, 0)), p.py(min(y, 0))
        out.append(f'<rect x="{x1:.2f}" y="{ytop:.2f}" width="{x2 - x1:.2f}" '
                   f'height="{ybase - ytop:.2f}" fill="{t.colors[i % len(t.colors)]}"/>')
        if t.yerr is not None:
            lo, hi = t.yerr[0][i], t.yerr[1][i]
            if finite(lo) is not None and finite(hi) is not None:
                cx, y1, y2 = p.px(x), p.py(y - lo), p.py(y + hi)
                out.append(f'<path d="M{cx:.2f},{y1:.2f} L{cx:.2f},{y2:.2f} M{cx - 7:.2f},'
                           f'{y1:.2f} L{cx + 7:.2f},{y1:.2f} M{cx - 7:.2f},{y2:.2f} '
                           f'L{cx + 7:.2f},{y2:.2f}" stroke="#333" stroke-width="1.2" '
                           'fill="none"/>')
    return "".join(out)


def _boxes_svg(p: Panel, t: Boxes) -> str:
    out = []
    half = 0.25
    for x, (p5, p25, med, p75, p95) in zip(t.positions, t.stats):
        x1, x2, cx = p.px(x - half), p.px(x + half), p.px(x)
        c1, c2 = p.px(x - half / 2), p.px(x + half / 2)
        out.append(f'<rect x="{x1:.2f}" y="{p.py(p75):.2f}" width="{x2 - x1:.2f}" '
                   f'height="{p.py(p25) - p.py(p75):.2f}" fill="none" stroke="{t.color}" '
                   'stroke-width="1"/>')
        out.append(f'<path d="M{cx:.2f},{p.py(p75):.2f} L{cx:.2f},{p.py(p95):.2f} '
                   f'M{cx:.2f},{p.py(p25):.2f} L{cx:.2f},{p.py(p5):.2f} '
                   f'M{c1:.2f},{p.py(p95):.2f} L{c2:.2f},{p.py(p95):.2f} '
                   f'M{c1:.2f},{p.py(p5):.2f} L{c2:.2f},{p.py(p5):.2f}" stroke="{t.color}" '
                   'stroke-width="1" fill="none" clip-path="url(#{clip})"/>')
        out.append(f'<line x1="{x1:.2f}" y1="{p.py(med):.2f}" x2="{x2:.2f}" y2="{p.py(med):.2f}" '
                   f'stroke="{t.median_color}" stroke-width="1.5"/>')
    return "".join(out)


def _trace_svg(p: Panel, t: Any) -> str:
    body = {"line": _line_svg, "area": _area_svg, "bars": _bars_svg, "boxes": _boxes_svg}[t.kind](p, t)
    return f'<g class="trace" data-label="{esc(t.label)}">{body}</g>'


def _mark_svg(p: Panel, m: Any) -> str:
    if isinstance(m, Span):
        x1, x2 = p.px(m.x0), p.px(m.x1)
        return (f'<rect class="span" x="{x1:.2f}" y="{p.y0:.2f}" width="{x2 - x1:.2f}" '
                f'height="{p.h:.2f}" fill="{m.color}" fill-opacity="{m.alpha}" '
                'clip-path="url(#{clip})"/>')
    if m.axis == "x":
        px = p.px(m.at)
        return (f'<line class="{esc(m.cls)}" data-x="{m.at:g}" x1="{px:.2f}" y1="{p.y0:.2f}" '
                f'x2="{px:.2f}" y2="{p.y0 + p.h:.2f}" stroke="{m.color}" '
                f'stroke-width="{m.width}"{_dash(m.style, m.width)} clip-path="url(#{{clip}})"/>')
    py = p.py(m.at)
    return (f'<line class="{esc(m.cls)}" data-y="{m.at:g}" x1="{p.x0:.2f}" y1="{py:.2f}" '
            f'x2="{p.x0 + p.w:.2f}" y2="{py:.2f}" stroke="{m.color}" '
            f'stroke-width="{m.width}"{_dash(m.style, m.width)} clip-path="url(#{{clip}})"/>')


_ANCHOR = {"left": "start", "center": "middle", "right": "end"}


def text_xy(p: Panel | None, t: Text) -> tuple[float, float]:
    """Where a text's anchor point is, in chart pixels."""
    if p is None:
        return t.x + t.offset[0], t.y - t.offset[1]
    x = p.x0 + t.x * p.w if t.coords in ("axes", "yaxis") else p.px(t.x)
    y = p.y0 + (1 - t.y) * p.h if t.coords in ("axes", "xaxis") else p.py(t.y)
    return x + t.offset[0], y - t.offset[1]


def _text_svg(p: Panel | None, t: Text) -> str:
    x, y = text_xy(p, t)
    lines = t.text.split("\n")
    # baseline shift so that "top", "center", "bottom" mean the text's box, as in matplotlib
    lead = t.size * 1.2
    if t.rotation:
        # rotated 90° counter-clockwise: the text runs upwards from its anchor; matplotlib
        # anchors the rotated box, so va="bottom" puts its start at y
        anchor = {"bottom": "start", "top": "end"}.get(t.va, "middle")
        return (f'<text class="{esc(t.cls)}" x="{x:.2f}" y="{y:.2f}" text-anchor="{anchor}" '
                f'font-size="{t.size}" fill="{t.color}" dominant-baseline="central" '
                f'transform="rotate({-t.rotation:g} {x:.2f} {y:.2f})">{esc(t.text)}</text>')
    total = lead * (len(lines) - 1)
    if len(lines) == 1:
        yy = {"top": y + t.size * 0.8, "center": y + t.size * 0.35, "bottom": y - t.size * 0.2}.get(t.va, y)
        return (f'<text class="{esc(t.cls)}" x="{x:.2f}" y="{yy:.2f}" '
                f'text-anchor="{_ANCHOR.get(t.ha, "middle")}" font-size="{t.size}" '
                f'fill="{t.color}">{esc(t.text)}</text>')
    first = {"top": y + t.size * 0.8, "center": y + t.size * 0.35 - total / 2,
             "bottom": y - total - t.size * 0.2}.get(t.va, y - total)
    spans = "".join(f'<tspan x="{x:.2f}" y="{first + i * lead:.2f}">{esc(s)}</tspan>'
                    for i, s in enumerate(lines))
    return (f'<text class="{esc(t.cls)}" text-anchor="{_ANCHOR.get(t.ha, "middle")}" '
            f'font-size="{t.size}" fill="{t.color}">{spans}</text>')


def _swatch(e: LegendEntry) -> str:
    if e.kind == "area":
        return (f'<rect x="0" y="-4" width="20" height="8" fill="{e.color}" '
                f'fill-opacity="{e.alpha}"/>')
    out = ""
    if e.style:
        out += (f'<line x1="0" y1="0" x2="20" y2="0" stroke="{e.color}" '
                f'stroke-width="{e.width}"{_dash(e.style, e.width)}/>')
    if e.marker:
        out += marker_svg(e.marker, 10, 0, 5, e.color, 1.5)
    return out


def _legend_rows(entries: Sequence[LegendEntry], x: float, y: float, box: bool) -> str:
    if not entries:
        return ""
    step = SMALL_PX + 4
    out = ['<g class="legend">']
    if box:
        w = legend_width(entries)
        out.append(f'<rect x="{x - 4:.2f}" y="{y - step / 2 - 2:.2f}" width="{w:.2f}" '
                   f'height="{len(entries) * step + 4:.2f}" fill="#fff" fill-opacity="0.8" '
                   'stroke="#ccc" stroke-width="0.8" rx="2"/>')
    out += [_legend_entry(e, x, y + i * step) for i, e in enumerate(entries)]
    out.append("</g>")
    return "".join(out)


def _legend_entry(e: LegendEntry, x: float, y: float) -> str:
    return (f'<g transform="translate({x:.2f},{y:.2f})">{_swatch(e)}</g>'
            f'<text class="legend-entry" x="{x + 26:.2f}" y="{y + 3.5:.2f}" '
            f'font-size="{SMALL_PX}">{esc(e.label)}</text>')


def legend_width(entries: Sequence[LegendEntry]) -> float:
    return max((text_w(e.label, SMALL_PX) for e in entries), default=0.0) + 34


def _render_panel(p: Panel) -> str:
    clip = f"llmbench-clip-{next(_CLIP_IDS)}"
    out = [f'<g class="panel" data-ylim="{p.ylim[0]:g} {p.ylim[1]:g}" '
           f'data-xlim="{p.xlim[0]:g} {p.xlim[1]:g}" data-ylabel="{esc(p.ylabel)}">',
           f'<clipPath id="{clip}"><rect x="{p.x0:.2f}" y="{p.y0:.2f}" '
           f'width="{p.w:.2f}" height="{p.h:.2f}"/></clipPath>']
    xt = p.shown_xticks()
    yt = p.yticks()
    if p.grid_x:
        for t, _ in xt:
            out.append(f'<line x1="{p.px(t):.2f}" y1="{p.y0:.2f}" x2="{p.px(t):.2f}" '
                       f'y2="{p.y0 + p.h:.2f}" stroke="{GRID}" stroke-opacity="0.3" '
                       'stroke-width="0.8"/>')
    for t in yt:
        out.append(f'<line x1="{p.x0:.2f}" y1="{p.py(t):.2f}" x2="{p.x0 + p.w:.2f}" '
                   f'y2="{p.py(t):.2f}" stroke="{GRID}" stroke-opacity="0.3" stroke-width="0.8"/>')
    out += [_mark_svg(p, m).replace("{clip}", clip) for m in p.marks if isinstance(m, Span)]
    out += [_trace_svg(p, t).replace("{clip}", clip) for t in p.traces]
    out += [_mark_svg(p, m).replace("{clip}", clip) for m in p.marks if not isinstance(m, Span)]
    out += [_text_svg(p, t) for t in p.texts]
    out.append(f'<rect x="{p.x0:.2f}" y="{p.y0:.2f}" width="{p.w:.2f}" height="{p.h:.2f}" '
               'fill="none" stroke="#000" stroke-width="0.8"/>')
    bottom = p.y0 + p.h
    for t, label in xt:
        out.append(f'<line x1="{p.px(t):.2f}" y1="{bottom:.2f}" x2="{p.px(t):.2f}" '
                   f'y2="{bottom + 4:.2f}" stroke="#000" stroke-width="0.8"/>')
        if p.x_ticklabels:
            out.append(f'<text class="xtick" data-x="{t:g}" x="{p.px(t):.2f}" '
                       f'y="{bottom + 16:.2f}" text-anchor="middle">{esc(label)}</text>')
    width_y = 0.0
    for t in yt:
        s = tick_text(t, yt)
        width_y = max(width_y, text_w(s, FONT_PX))
        out.append(f'<line x1="{p.x0 - 4:.2f}" y1="{p.py(t):.2f}" x2="{p.x0:.2f}" '
                   f'y2="{p.py(t):.2f}" stroke="#000" stroke-width="0.8"/>')
        out.append(f'<text class="ytick" x="{p.x0 - 7:.2f}" y="{p.py(t) + 4:.2f}" '
                   f'text-anchor="end">{s}</text>')
    if p.ylabel:
        x, y = p.x0 - 15 - width_y, p.y0 + p.h / 2
        out.append(f'<text class="ylabel" x="{x:.2f}" y="{y:.2f}" text-anchor="middle" '
                   f'transform="rotate(-90 {x:.2f} {y:.2f})">{esc(p.ylabel)}</text>')
    if p.xlabel:
        out.append(f'<text class="xlabel" x="{p.x0 + p.w / 2:.2f}" y="{bottom + 32:.2f}" '
                   f'text-anchor="middle">{esc(p.xlabel)}</text>')
    if p.title:
        x, anchor = {"left": (p.x0, "start"), "right": (p.x0 + p.w, "end")}.get(
            p.title_loc, (p.x0 + p.w / 2, "middle"))
        lines = p.title.split("\n")
        spans = "".join(f'<tspan x="{x:.2f}" y="{p.y0 - 6 - (len(lines) - 1 - i) * 14:.2f}">'
                        f"{esc(s)}</tspan>" for i, s in enumerate(lines))
        out.append(f'<text class="title" text-anchor="{anchor}">{spans}</text>')
    entries = p.legend_entries()
    if p.legend_at == "right":            # beside the panel, never over the data
        out.append(_legend_rows(entries, p.x0 + p.w + 8, p.y0 + 6, box=False))
    elif p.legend_at == "lower right":    # inside, on a white box
        step = SMALL_PX + 4
        out.append(_legend_rows(entries, p.x0 + p.w - legend_width(entries) - 4,
                                p.y0 + p.h - len(entries) * step - 2, box=True))
    out.append("</g>")
    return "\n".join(out)


def _shared_legend_svg(c: Chart) -> str:
    if not c.legend:
        return ""
    ncol = min(len(c.legend), c.legend_ncol)
    col_w = max(legend_width(c.legend), 60.0)
    y = c.legend_y if c.legend_y is not None else max(p.y0 + p.h for p in c.panels) + 46
    x0 = c.width / 2 - ncol * col_w / 2
    step = SMALL_PX + 4
    return "".join(['<g class="legend shared">']
                   + [_legend_entry(e, x0 + (i % ncol) * col_w, y + (i // ncol) * step)
                      for i, e in enumerate(c.legend)] + ["</g>"])


def shared_legend_height(n: int, ncol: int = 6) -> float:
    return math.ceil(n / max(ncol, 1)) * (SMALL_PX + 4) if n else 0.0


def render(c: Chart) -> str:
    """The chart as one <svg>, sized in px (the report's CSS scales it down on a narrow screen)."""
    body = [_render_panel(p) for p in c.panels]
    body += [_text_svg(None, t) for t in c.texts]
    body.append(_shared_legend_svg(c))
    return document(c.width, c.height, body)


def document(width: float, height: float, body: Sequence[str]) -> str:
    """The outer <svg>: sized in px, scaled down by the report's CSS on a narrow screen."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" font-size="{FONT_PX}" '
            'fill="#000">\n<rect width="100%" height="100%" fill="#fff"/>\n'
            + "\n".join(b for b in body if b) + "\n</svg>")


# -- the same description through matplotlib (PNG) -------------------------------------------

class MissingExtra(RuntimeError):
    """matplotlib is not installed: a PNG needs the ``png`` extra."""


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtra("a PNG needs matplotlib: pip install 'llmbench[png]'") from None
    return matplotlib, Figure


def _pt(px: float) -> float:
    return px / PX_PER_PT


_MPL_HA = {"left": "left", "center": "center", "right": "right"}


def _mpl_line(ax: Any, t: Line) -> None:
    ys = [float("nan") if y is None else y for y in t.ys]
    ax.plot(t.xs, ys, color=t.color, linestyle=t.style or "none",
            linewidth=t.width, marker=t.marker or None,
            markersize=t.marker_size, markeredgewidth=t.marker_width,
            clip_on=t.clip)
    if t.marker is None and t.style:
        # a point with no finite neighbour draws no line: a dot, as the SVG draws it
        lone = [(x, y) for i, (x, y) in enumerate(zip(t.xs, ys))
                if math.isfinite(y)
                and not (i > 0 and math.isfinite(ys[i - 1]))
                and not (i + 1 < len(ys) and math.isfinite(ys[i + 1]))]
        if lone:
            ax.plot(*zip(*lone), "o", color=t.color, markersize=t.width * 2.3)
    if t.yerr is not None:
        ax.errorbar(t.xs, ys, yerr=[t.yerr[0], t.yerr[1]], fmt="none",
                    ecolor=t.color, capsize=3, linewidth=t.width)


def _mpl_trace(ax: Any, t: Any) -> None:
    if isinstance(t, Line):
        _mpl_line(ax, t)
    elif isinstance(t, Area):
        ax.fill_between(t.xs, t.lower, t.upper, color=t.color, alpha=t.alpha,
                        linewidth=0)
    elif isinstance(t, Bars):
        ax.bar(t.xs, t.ys, width=t.width,
               color=[t.colors[i % len(t.colors)] for i in range(len(t.xs))])
        if t.yerr is not None:
            ax.errorbar(t.xs, t.ys, yerr=[t.yerr[0], t.yerr[1]], fmt="none",
                        ecolor="#333", capsize=5, linewidth=1.2)
    elif isinstance(t, Boxes):
        ax.bxp([{"whislo": s[0], "q1": s[1], "med": s[2], "q3": s[3], "whishi": s[4],
                 "fliers": []} for s in t.stats], positions=t.positions,
               showfliers=False, manage_ticks=False)


def _mpl_text(ax: Any, t: Any) -> None:
    tr = {"data": ax.transData, "axes": ax.transAxes,
          "xaxis": ax.get_xaxis_transform(), "yaxis": ax.get_yaxis_transform()}[t.coords]
    ax.annotate(t.text, xy=(t.x, t.y), xycoords=tr,
                xytext=(_pt(t.offset[0]), _pt(t.offset[1])),
                textcoords="offset points", ha=_MPL_HA.get(t.ha, "center"),
                va=t.va, color=t.color, fontsize=_pt(t.size), rotation=t.rotation,
                annotation_clip=False)


def _mpl_axes(ax: Any, p: Panel) -> None:
    """The panel's ranges, ticks, grid, labels and title."""
    ax.set_xlim(*p.xlim)
    ax.set_ylim(*p.ylim)
    ticks = p.shown_xticks()
    if p.xticks is not None:
        ax.set_xticks([t for t, _ in ticks], [s for _, s in ticks])
    if not p.x_ticklabels:
        ax.tick_params(labelbottom=False)
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)
    if not p.grid_x:
        ax.grid(axis="x", visible=False)
    ax.set_ylabel(p.ylabel)
    ax.set_xlabel(p.xlabel)
    if p.title:
        ax.set_title(p.title, loc=p.title_loc, fontsize=_pt(FONT_PX))


def _mpl_legend(ax: Any, p: Panel, Line2D: Any, Patch: Any) -> None:
    entries = p.legend_entries()
    if not (p.legend_at and entries):
        return
    handles = [_handle(e, Line2D, Patch) for e in entries]
    if p.legend_at == "right":
        ax.legend(handles, [e.label for e in entries], fontsize=_pt(SMALL_PX),
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                  frameon=False)
    else:
        ax.legend(handles, [e.label for e in entries], fontsize=_pt(SMALL_PX),
                  loc="lower right")


def _mpl_panel(fig: Any, c: Chart, p: Panel, Line2D: Any, Patch: Any) -> None:
    """One panel at its pixel box: spans under the traces, rules over them, then texts."""
    ax = fig.add_axes((p.x0 / c.width, 1 - (p.y0 + p.h) / c.height, p.w / c.width,
                       p.h / c.height))
    for m in p.marks:
        if isinstance(m, Span):
            ax.axvspan(m.x0, m.x1, color=m.color, alpha=m.alpha, linewidth=0)
    for t in p.traces:
        _mpl_trace(ax, t)
    for m in p.marks:
        if isinstance(m, Rule):
            (ax.axvline if m.axis == "x" else ax.axhline)(
                m.at, color=m.color, linestyle=m.style, linewidth=m.width)
    for t in p.texts:
        _mpl_text(ax, t)
    _mpl_axes(ax, p)
    _mpl_legend(ax, p, Line2D, Patch)


def _mpl_figure_parts(fig: Any, c: Chart, Line2D: Any, Patch: Any) -> None:
    """The chart's own texts and its legend under the panels."""
    for t in c.texts:
        x, y = text_xy(None, t)
        fig.text(x / c.width, 1 - y / c.height, t.text, ha=_MPL_HA.get(t.ha, "center"),
                 va=t.va, color=t.color, fontsize=_pt(t.size))
    if c.legend:
        y = c.legend_y if c.legend_y is not None else max(p.y0 + p.h for p in c.panels) + 40
        fig.legend([_handle(e, Line2D, Patch) for e in c.legend], [e.label for e in c.legend],
                   loc="upper center", fontsize=_pt(SMALL_PX),
                   ncol=min(len(c.legend), c.legend_ncol),
                   bbox_to_anchor=(0.5, 1 - y / c.height), frameon=False)


def to_matplotlib(c: Chart) -> Any:
    """A matplotlib Figure drawing the description ``c``, each panel at its pixel box."""
    matplotlib, Figure = _matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    rc = {"svg.fonttype": "none", "font.size": _pt(FONT_PX), "svg.hashsalt": "llmbench",
          "font.family": "DejaVu Sans"}
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(c.width / 100, c.height / 100), dpi=100)
        for p in c.panels:
            _mpl_panel(fig, c, p, Line2D, Patch)
        _mpl_figure_parts(fig, c, Line2D, Patch)
    return fig


def _handle(e: LegendEntry, Line2D: Any, Patch: Any) -> Any:
    if e.kind == "area":
        return Patch(color=e.color, alpha=e.alpha, linewidth=0)
    return Line2D([], [], color=e.color, linestyle=e.style or "none", linewidth=e.width,
                  marker=e.marker or None, markersize=5)


def save_png(c: Chart, path: str | Path, dpi: int = 150) -> None:
    """The chart as a PNG (for slides); without matplotlib, raises MissingExtra."""
    fig = to_matplotlib(c)
    fig.savefig(str(path), format="png", dpi=dpi, facecolor="white")


def to_svg_matplotlib(c: Chart) -> str:
    """The description drawn by matplotlib as SVG: for scripts/bench_charts.py's comparison."""
    import io
    fig = to_matplotlib(c)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    s = buf.getvalue()
    return s[s.index("<svg"):]
