"""Charts as inline SVG (matplotlib, Agg): the HTML report stays one file that opens offline.

matplotlib is imported here only, so ``llmbench --help`` and the start of a run stay fast.
Text that reaches a chart (labels, backend names) is stripped of markup characters first.
"""

from __future__ import annotations

import io
import re
from typing import Any, Sequence

import numpy as np

from ..stats import value

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.grid": True,
                         "grid.alpha": 0.3, "figure.dpi": 100, "svg.hashsalt": "llmbench"})
    return plt


def safe(text: Any) -> str:
    """Chart text never carries markup: an SVG inlined in HTML must not be an injection path."""
    return re.sub(r"[<>&\"']", "_", str(text))[:80]


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    _plt().close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def _boundary(ax, loads: Sequence[float], held: Sequence[bool]) -> None:
    """Shade the steps that did not hold, and mark where the ramp broke."""
    broke = next((i for i, h in enumerate(held) if not h), None)
    if broke is None:
        return
    x = loads[broke - 1] + (loads[broke] - loads[broke - 1]) / 2 if broke > 0 else loads[0]
    ax.axvline(x, color="#d62728", linestyle=":", linewidth=1.2)
    ax.axvspan(x, max(loads) + (loads[-1] - loads[0]) * 0.05 + 0.5, color="#d62728", alpha=0.06)


def _finite(v: Any) -> float:
    if v is None:
        return float("nan")
    v = float(v)
    return v if np.isfinite(v) else float("nan")


def ramp_latency_fig(steps: Sequence[dict[str, Any]], thresholds: dict[str, float], unit: str):
    plt = _plt()
    loads = [s["load"] for s in steps]
    held = [s["held"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for ax, metric, title in ((axes[0], "ttft", "Time to first token"),
                              (axes[1], "itl", "Time between tokens (ITL)")):
        for stat, style in (("median", "-o"), ("p95", "-s"), ("p99", ":^")):
            # a step with no data has no point (None, or "inf" read back from run.json)
            ys = [_finite(value(s["summary"], metric, stat)) for s in steps]
            ax.plot(loads, ys, style, markersize=4, label=stat)
        limit = thresholds.get(metric)
        if limit is not None:
            ax.axhline(limit, color="#d62728", linewidth=1, linestyle="--", label="threshold")
        _boundary(ax, loads, held)
        ax.set_title(title)
        ax.set_xlabel(unit)
        ax.set_ylabel("ms")
        ax.legend(fontsize=7)
    return fig


def ramp_latency(steps: Sequence[dict[str, Any]], thresholds: dict[str, float], unit: str) -> str:
    return _svg(ramp_latency_fig(steps, thresholds, unit))


def ramp_throughput_fig(steps: Sequence[dict[str, Any]], unit: str):
    plt = _plt()
    loads = [s["load"] for s in steps]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(loads, [s["summary"]["output_throughput"] for s in steps], "-o", color=_COLORS[0],
            label="output tok/s")
    ax.set_xlabel(unit)
    ax.set_ylabel("output tokens/s", color=_COLORS[0])
    ax2 = ax.twinx()
    ax2.plot(loads, [s["summary"]["request_throughput"] for s in steps], "-s", color=_COLORS[2],
             label="req/s")
    ax2.set_ylabel("requests/s", color=_COLORS[2])
    ax2.grid(False)
    _boundary(ax, loads, [s["held"] for s in steps])
    ax.set_title("Throughput")
    return fig


def ramp_throughput(steps: Sequence[dict[str, Any]], unit: str) -> str:
    return _svg(ramp_throughput_fig(steps, unit))


def distributions_fig(groups: Sequence[tuple[str, np.ndarray]], title: str, ylabel: str = "ms"):
    """Box plots (p5-p95 whiskers) of one latency per step or run."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(groups) + 2), 3.2))
    data = [g[1] if len(g[1]) else np.array([0.0]) for g in groups]
    ax.boxplot(data, whis=(5, 95), showfliers=False)
    ax.set_xticks(range(1, len(groups) + 1), [safe(g[0]) for g in groups], rotation=0)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    return fig


def distributions(groups: Sequence[tuple[str, np.ndarray]], title: str, ylabel: str = "ms") -> str:
    return _svg(distributions_fig(groups, title, ylabel))


def cdfs_fig(series: Sequence[tuple[str, np.ndarray]], title: str):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for i, (name, v) in enumerate(series):
        if not len(v):
            continue
        x = np.sort(v)
        if len(x) > 2000:                 # a CDF needs no more points than a screen shows
            x = np.percentile(v, np.linspace(0, 100, 2000))
        ax.plot(x, np.linspace(0, 1, len(x)), color=_COLORS[i % len(_COLORS)], label=safe(name))
    ax.set_title(title)
    ax.set_xlabel("ms")
    ax.set_ylabel("fraction of requests")
    if ax.get_lines():
        ax.legend(fontsize=7)
    else:                                 # no successful request: say so, do not draw 0
        ax.text(0.5, 0.5, "no successful request", ha="center", va="center",
                transform=ax.transAxes)
    return fig


def cdfs(series: Sequence[tuple[str, np.ndarray]], title: str) -> str:
    return _svg(cdfs_fig(series, title))


def timeline_fig(rows: Sequence[dict[str, Any]]):
    plt = _plt()
    t = [r["t"] for r in rows]
    has_server = any("server_running" in r for r in rows)
    n = 3 if has_server else 2
    fig, axes = plt.subplots(n, 1, figsize=(9.5, 2.2 * n), sharex=True)
    ax = axes[0]
    for key, label, c in (("users", "users", _COLORS[0]), ("in_flight", "in flight", _COLORS[1]),
                          ("waiting_first_token", "waiting for first token", _COLORS[4]),
                          ("streaming", "streaming", _COLORS[2])):
        ys = [r.get(key) for r in rows]
        if any(y is not None for y in ys):
            ax.plot(t, [y if y is not None else np.nan for y in ys], label=label, color=c,
                    linewidth=1.2)
    ax.set_ylabel("requests / users")
    ax.legend(fontsize=7, ncol=4)
    ax = axes[1]
    ax.plot(t, [r.get("ttft_p95_recent_ms") or np.nan for r in rows], color=_COLORS[3],
            label="TTFT p95, last 10 s")
    ax.set_ylabel("ms")
    ax2 = ax.twinx()
    ax2.plot(t, [r.get("tok_s", 0) for r in rows], color=_COLORS[5], alpha=0.6, label="tok/s")
    ax2.set_ylabel("tok/s")
    ax2.grid(False)
    ax.legend(loc="upper left", fontsize=7)
    if has_server:
        ax = axes[2]
        ax.plot(t, [r.get("server_running", np.nan) for r in rows], label="server: running",
                color=_COLORS[2])
        ax.plot(t, [r.get("server_waiting", np.nan) for r in rows], label="server: waiting",
                color=_COLORS[1])
        ax.set_ylabel("requests")
        ax.legend(fontsize=7)
    axes[-1].set_xlabel("seconds")
    return fig


def timeline(rows: Sequence[dict[str, Any]]) -> str:
    return _svg(timeline_fig(rows))


def probe_overhead_fig(steps: Sequence[dict[str, Any]]):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    users = [s["users"] for s in steps]
    for i, (m, label) in enumerate((("ttft_p50", "TTFT p50"), ("ttft_p95", "TTFT p95"),
                                    ("e2el_p50", "E2EL p50"), ("itl_p50", "ITL p50"))):
        ys = [s[m]["overhead_ms"] if s[m]["overhead_ms"] is not None else np.nan for s in steps]
        lo = [y - s[m]["ci_ms"][0] if s[m]["ci_ms"] else 0 for y, s in zip(ys, steps)]
        hi = [s[m]["ci_ms"][1] - y if s[m]["ci_ms"] else 0 for y, s in zip(ys, steps)]
        ax.errorbar(users, ys, yerr=[lo, hi], fmt="-o", capsize=3, markersize=4,
                    color=_COLORS[i], label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title("Router overhead (router − direct), 95% intervals")
    ax.set_xlabel("users")
    ax.set_ylabel("ms")
    ax.legend(fontsize=7)
    return fig


def probe_overhead(steps: Sequence[dict[str, Any]]) -> str:
    return _svg(probe_overhead_fig(steps))


def _overlay(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], unit: str):
    """One line per run: TTFT p95, ITL p95 and output tok/s against load; x marks the break."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for i, (name, steps) in enumerate(runs):
        loads = [s["load"] for s in steps]
        c = _COLORS[i % len(_COLORS)]
        broke = next((s for s in steps if not s["held"]), None)
        for ax, key in zip(axes, ("p95_ttft_ms", "p95_itl_ms", "output_throughput")):
            ax.plot(loads, [_finite(s["summary"].get(key)) for s in steps], "-o", color=c,
                    markersize=4, label=safe(name))
            if broke is not None:
                ax.plot([broke["load"]], [_finite(broke["summary"].get(key))], "x", color=c,
                        markersize=9)
    for ax, title, ylabel in zip(axes, ("TTFT p95", "ITL p95", "Output throughput"),
                                 ("ms", "ms", "tok/s")):
        ax.set_title(title)
        ax.set_xlabel(unit)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
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
