"""A few line charts written as SVG by hand: a run's report without matplotlib.

matplotlib's import and one figure's draw cost about 1.3 s of CPU, more than the rest of a
20-request run together (scripts/bench_fixed_costs.py); the run report's charts are lines, filled
areas and vertical marks on linear axes, a few hundred lines of SVG. They follow the rules in
charts.py's docstring (axes from zero or from the data, every trace in a legend).

What the tests read is in the SVG itself: each panel is ``<g class="panel" data-ylim="lo hi">``,
each trace a ``class="trace"`` element with ``data-label``, each legend entry a
``<text class="legend-entry">``, marks and labels carry their gid as class (``step-boundary``
with ``data-x``, ``step-label``).
"""

from __future__ import annotations

import html
import itertools
import math
from dataclasses import dataclass, field
from typing import Sequence

FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
FONT_PX = 12.0                   # matplotlib's 9 pt at 100 dpi
SMALL_PX = 9.5                   # its 7 pt (legends, step labels)
CHAR_W = 0.58                    # average glyph width / font size, for layout only
GRID = "#b0b0b0"
# dash patterns of matplotlib's styles, per unit of line width
_CLIP_IDS = itertools.count()     # ids unique across the charts of one HTML page
DASHES = {"-": None, "--": (3.7, 1.6), ":": (1.0, 1.65), "-.": (6.4, 1.6, 1.0, 1.6)}


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def text_w(text: str, px: float) -> float:
    return len(text) * px * CHAR_W


def nice_ticks(lo: float, hi: float, target: int = 5,
               steps: Sequence[float] = (1, 2, 2.5, 5, 10)) -> list[float]:
    """Ticks at one of ``steps`` times a power of ten, inside [lo, hi] (matplotlib's choice)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (*steps, 10) if m * mag >= raw * 0.999)
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


def _finite(v: object) -> float | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


@dataclass
class Trace:
    label: str
    kind: str                         # "line" or "area"
    color: str
    svg: str


@dataclass
class Panel:
    """One axes box: data ranges, the pixel box it is drawn in, and what is drawn on it."""

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
    traces: list[Trace] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)     # (label, swatch svg)
    extra: list[str] = field(default_factory=list)                  # marks and notes, on top

    def px(self, x: float) -> float:
        lo, hi = self.xlim
        return self.x0 + (x - lo) / ((hi - lo) or 1.0) * self.w

    def py(self, y: float) -> float:
        lo, hi = self.ylim
        return self.y0 + self.h - (y - lo) / ((hi - lo) or 1.0) * self.h

    def _dash(self, style: str, width: float) -> str:
        d = DASHES.get(style)
        return f' stroke-dasharray="{",".join(f"{v * width:.2f}" for v in d)}"' if d else ""

    def line(self, xs: Sequence[float], ys: Sequence[object], label: str, color: str,
             style: str = "-", width: float = 1.5, clip: bool = True, legend: bool = True) -> None:
        """A polyline broken at missing values; a lone point is drawn as a dot, as no line
        would show it."""
        parts, dots, run = [], [], []
        for x, y in zip(xs, ys):
            fy = _finite(y)
            if fy is None:
                if run:
                    (parts if len(run) > 1 else dots).append(run)
                run = []
                continue
            run.append((self.px(x), self.py(fy)))
        if run:
            (parts if len(run) > 1 else dots).append(run)
        d = " ".join("M" + " L".join(f"{a:.2f},{b:.2f}" for a, b in p) for p in parts)
        clip_attr = ' clip-path="url(#{clip})"' if clip else ""
        body = (f'<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}"'
                f'{self._dash(style, width)} stroke-linejoin="round"{clip_attr}/>' if d else "")
        body += "".join(f'<circle cx="{p[0][0]:.2f}" cy="{p[0][1]:.2f}" r="{max(width * 1.6, 2.5):g}" '
                        f'fill="{color}"/>' for p in dots)
        self.traces.append(Trace(label, "line", color, f'<g class="trace" data-label="{esc(label)}">'
                                 f"{body}</g>"))
        if legend:
            self.legend.append((label, f'<line x1="0" y1="0" x2="20" y2="0" stroke="{color}" '
                                       f'stroke-width="{width}"{self._dash(style, width)}/>'))

    def area(self, xs: Sequence[float], lower: Sequence[float], upper: Sequence[float],
             label: str, color: str, alpha: float) -> None:
        """The band between two curves (a stacked area's layer)."""
        top = [(self.px(x), self.py(y)) for x, y in zip(xs, upper)]
        bottom = [(self.px(x), self.py(y)) for x, y in zip(xs, lower)][::-1]
        pts = " L".join(f"{a:.2f},{b:.2f}" for a, b in top + bottom)
        body = (f'<path d="M{pts} Z" fill="{color}" fill-opacity="{alpha}" stroke="none" '
                'clip-path="url(#{clip})"/>' if len(top) > 1 else
                # one sample has no width: a bar one pixel wide still shows the value
                f'<rect x="{top[0][0] - 1.5:.2f}" y="{top[0][1]:.2f}" width="3" '
                f'height="{max(bottom[0][1] - top[0][1], 0):.2f}" fill="{color}" '
                f'fill-opacity="{alpha}"/>' if top else "")
        self.traces.append(Trace(label, "area", color, f'<g class="trace" data-label="{esc(label)}">'
                                 f"{body}</g>"))
        self.legend.append((label, f'<rect x="0" y="-4" width="20" height="8" fill="{color}" '
                                   f'fill-opacity="{alpha}"/>'))

    def vline(self, x: float, color: str, style: str, width: float, cls: str) -> None:
        px = self.px(x)
        self.extra.append(f'<line class="{cls}" data-x="{x:g}" x1="{px:.2f}" y1="{self.y0:.2f}" '
                          f'x2="{px:.2f}" y2="{self.y0 + self.h:.2f}" stroke="{color}" '
                          f'stroke-width="{width}"{self._dash(style, width)}/>')

    def render(self, legend_at: str = "right") -> str:
        """The axes: grid, frame, ticks, labels, traces clipped to the box, legend."""
        clip = f"llmbench-clip-{next(_CLIP_IDS)}"
        out = [f'<g class="panel" data-ylim="{self.ylim[0]:g} {self.ylim[1]:g}" '
               f'data-xlim="{self.xlim[0]:g} {self.xlim[1]:g}" data-ylabel="{esc(self.ylabel)}">',
               f'<clipPath id="{clip}"><rect x="{self.x0:.2f}" y="{self.y0:.2f}" '
               f'width="{self.w:.2f}" height="{self.h:.2f}"/></clipPath>']
        xt = nice_ticks(*self.xlim, target=max(3, min(9, int(self.w // 70))), steps=(1, 2, 5))
        yt = nice_ticks(*self.ylim, target=max(3, min(6, int(self.h // 30))))
        for t in xt:
            out.append(f'<line x1="{self.px(t):.2f}" y1="{self.y0:.2f}" x2="{self.px(t):.2f}" '
                       f'y2="{self.y0 + self.h:.2f}" stroke="{GRID}" stroke-opacity="0.3" '
                       'stroke-width="0.8"/>')
        for t in yt:
            out.append(f'<line x1="{self.x0:.2f}" y1="{self.py(t):.2f}" x2="{self.x0 + self.w:.2f}" '
                       f'y2="{self.py(t):.2f}" stroke="{GRID}" stroke-opacity="0.3" '
                       'stroke-width="0.8"/>')
        out += [t.svg.replace("{clip}", clip) for t in self.traces]
        out += self.extra
        out.append(f'<rect x="{self.x0:.2f}" y="{self.y0:.2f}" width="{self.w:.2f}" '
                   f'height="{self.h:.2f}" fill="none" stroke="#000" stroke-width="0.8"/>')
        bottom = self.y0 + self.h
        for t in xt:
            out.append(f'<line x1="{self.px(t):.2f}" y1="{bottom:.2f}" x2="{self.px(t):.2f}" '
                       f'y2="{bottom + 4:.2f}" stroke="#000" stroke-width="0.8"/>')
            if self.x_ticklabels:
                out.append(f'<text class="xtick" x="{self.px(t):.2f}" y="{bottom + 16:.2f}" '
                           f'text-anchor="middle">{tick_text(t, xt)}</text>')
        width_y = 0.0
        for t in yt:
            s = tick_text(t, yt)
            width_y = max(width_y, text_w(s, FONT_PX))
            out.append(f'<line x1="{self.x0 - 4:.2f}" y1="{self.py(t):.2f}" x2="{self.x0:.2f}" '
                       f'y2="{self.py(t):.2f}" stroke="#000" stroke-width="0.8"/>')
            out.append(f'<text class="ytick" x="{self.x0 - 7:.2f}" y="{self.py(t) + 4:.2f}" '
                       f'text-anchor="end">{s}</text>')
        if self.ylabel:
            x, y = self.x0 - 15 - width_y, self.y0 + self.h / 2
            out.append(f'<text class="ylabel" x="{x:.2f}" y="{y:.2f}" text-anchor="middle" '
                       f'transform="rotate(-90 {x:.2f} {y:.2f})">{esc(self.ylabel)}</text>')
        if self.xlabel:
            out.append(f'<text class="xlabel" x="{self.x0 + self.w / 2:.2f}" '
                       f'y="{bottom + 32:.2f}" text-anchor="middle">{esc(self.xlabel)}</text>')
        if self.title:
            x, anchor = {"left": (self.x0, "start"), "right": (self.x0 + self.w, "end")}.get(
                self.title_loc, (self.x0 + self.w / 2, "middle"))
            out.append(f'<text class="title" x="{x:.2f}" y="{self.y0 - 6:.2f}" '
                       f'text-anchor="{anchor}">{esc(self.title)}</text>')
        out.append(self._legend(legend_at))
        out.append("</g>")
        return "\n".join(out)

    def legend_width(self) -> float:
        return max((text_w(label, SMALL_PX) for label, _ in self.legend), default=0.0) + 34

    def _legend(self, where: str) -> str:
        if not self.legend:
            return ""
        rows = len(self.legend)
        step = SMALL_PX + 4
        if where == "right":                  # beside the panel, never over the data
            x, y = self.x0 + self.w + 8, self.y0 + 6
            box = ""
        else:                                 # lower right, inside, on a white box
            w = self.legend_width()
            x, y = self.x0 + self.w - w - 4, self.y0 + self.h - rows * step - 2
            box = (f'<rect x="{x - 4:.2f}" y="{y - step / 2 - 2:.2f}" width="{w:.2f}" '
                   f'height="{rows * step + 4:.2f}" fill="#fff" fill-opacity="0.8" '
                   'stroke="#ccc" stroke-width="0.8" rx="2"/>')
        out = [f'<g class="legend">{box}']
        for i, (label, swatch) in enumerate(self.legend):
            yy = y + i * step
            out.append(f'<g transform="translate({x:.2f},{yy:.2f})">{swatch}</g>'
                       f'<text class="legend-entry" x="{x + 26:.2f}" y="{yy + 3.5:.2f}" '
                       f'font-size="{SMALL_PX}">{esc(label)}</text>')
        out.append("</g>")
        return "".join(out)


def document(width: float, height: float, body: Sequence[str]) -> str:
    """The outer <svg>: sized in px, scaled down by the report's CSS on a narrow screen."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" font-size="{FONT_PX}" '
            'fill="#000">\n<rect width="100%" height="100%" fill="#fff"/>\n'
            + "\n".join(body) + "\n</svg>")
